#!/bin/bash
# session 19 call 9: gptoss_qkv_rows mended (call 8: the 8-row form's shared-memory opt-in asked for more than a block
# may have; x read twice): its kernel checks and timings alone (the qkv part of gptoss_kernels is not separable, so the
# whole binary), then bench/throughput at 8 and 64 streams, LLMR_GPTOSS_BATCH_QKV_ROWS=0 vs default, twice.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 300 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"; grep -E "^FAIL|qkv rows|qkv prologue|checks" $O/kernels.txt | head -24
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  for v in 0 8; do
    echo "=== LLMR_GPTOSS_BATCH_QKV_ROWS=$v"; LLMR_GPTOSS_BATCH_PROFILE=1 LLMR_GPTOSS_BATCH_QKV_ROWS=$v timeout 120 $B/bench/throughput --model /tmp/m20b --streams 8,64 2>&1 | grep -E "^ +(8|64) +[0-9]+ |^ +(2-3|4-7|8-15|16-31|32-63|64) |WARN|rror"
  done
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt
rm -rf /tmp/m20b
echo "total ${SECONDS}s"
