#!/bin/bash
# Session 46, call 4 (measurements only, main 27b712d): the experts' tiled layout against the checkpoint's
# (LLMR_GPTOSS_MOE_TILED=0) at batch 1 and in the batched steps, on today's kernels (session 32 found the checkpoint's
# layout +1.9% at batch 1; session 44 put its gate_up at 17.1 us against the tiled 17.9). Decides whether batch 1
# should read the checkpoint's layout with the tiled copy beside it for the batched steps.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
tests/gpu/decode_ab.sh --log $O/decode-ab.txt d=$EN t0=$EN:LLMR_GPTOSS_MOE_TILED=0 d t0 t0 d d t0
echo "ab ${SECONDS}s"
for v in d t0; do
  T=1; [ $v = t0 ] && T=0
  echo "ncu $v: $(LLMR_GPTOSS_MOE_TILED=$T timeout 60 tests/gpu/ncu_durations.sh --csv $O/ncu-$v.csv 'gate_up|moe_down' -- \
    $B/bench/decode --engine $EN --model $M20B --contexts 128 --tokens 16)"
  xz -9 $O/ncu-$v.csv
  LLMR_GPTOSS_MOE_TILED=$T timeout 90 $B/bench/throughput --engine $EN --model $M20B --streams 1,8,16,32,64 > $O/throughput-$v.txt 2>&1
  echo "throughput $v rc=$? ${SECONDS}s"; grep -E "^ +(1|8|16|32|64) +[0-9]+ +[0-9]+ " $O/throughput-$v.txt
done
echo "total ${SECONDS}s"
