#!/bin/bash
# session 18 call 6: where step 21 (tag s18-preload-experiment: qkv / gemv1 issue their first weight chunks before the
# x staging and the norm) lost time in call 3: per-kernel ncu durations (boost clocks, warm caches) of main and of
# main + step 21 side by side, bench/decode A/B twice; and LLMR_GPTOSS_PDL=1 against the default on today's kernels.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && xz -dc .gpu-lead/pkg/alt.so.xz > /tmp/alt.so && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; MAIN=$B/engines/gptoss_cuda/libgptoss_cuda.so; ALT=/tmp/alt.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== main"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $MAIN --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== main + step 21"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $ALT --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== main, LLMR_GPTOSS_PDL=1"; LLMR_GPTOSS_PDL=1 timeout 100 $B/bench/decode --model /tmp/m20b --engine $MAIN --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
for v in main alt; do
  so=$MAIN; [ $v = alt ] && so=$ALT
  timeout 150 ncu --clock-control none --cache-control none --csv --metrics gpu__time_duration.sum \
    -k regex:"qkv_decode|attention_split|gemv1|moe_router_finish|moe_gate_up_ring|moe_down_decode|argmax|embed_kernel" \
    --launch-skip 40 --launch-count 420 $B/bench/decode --model /tmp/m20b --engine $so --contexts 128 --tokens 16 > $O/ncu-$v.csv 2>&1
  echo "ncu $v rc=$? ${SECONDS}s"
done
rm -rf /tmp/m20b
echo "total ${SECONDS}s"
