#!/bin/bash
# Session 47, call 5 (measurements only; the build = main 4ee3f09): (1) the standing of the landed engine, bench/throughput
# at 1 / 8 / 32 / 64 streams; (2) a bound for session 48: how much of the batch-1 step the T = 1 gate_up's activation
# split costs where it runs (call 3: 14% of the kernel's warp samples, and the consumers barely wait for the first
# stage after it). Alt "ns" = main + ../ring-diag-env-experiment.diff, run with LLMR_GPTOSS_RING_DIAG=3: every CTA skips
# the split (wrong activations, so wrong tokens; only its times mean anything).
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
tests/gpu/decode_ab.sh --log $O/decode-ab.txt main=$EN ns=$A/ns/$E:LLMR_GPTOSS_RING_DIAG=3 main ns ns main main ns
echo "ab ${SECONDS}s"
for v in main ns; do
  EE=$EN X=; [ $v = ns ] && EE=$A/ns/$E X=3
  echo "ncu $v: $(LLMR_GPTOSS_RING_DIAG=$X timeout 60 tests/gpu/ncu_durations.sh --csv /tmp/ncu-$v.csv 'gate_up_ring' -- \
    $B/bench/decode --engine $EE --model $M20B --contexts 128 --tokens 16)"
done
echo "ncu ${SECONDS}s"
timeout 200 $B/bench/throughput --engine $EN --model $M20B --streams 1,8,32,64 > $O/throughput.txt 2>&1
echo "throughput rc=$? ${SECONDS}s"; grep -E "^ +(1|8|32|64) +[0-9]+ +[0-9]+ " $O/throughput.txt
echo "total ${SECONDS}s"
