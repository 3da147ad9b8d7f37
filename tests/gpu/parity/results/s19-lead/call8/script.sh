#!/bin/bash
# session 19 call 8: gptoss_qkv_rows (a small batched step's attention prologue in one launch). bench/throughput at 8
# and 64 streams, LLMR_GPTOSS_BATCH_QKV_ROWS=0 vs default, twice, with the per-part profile; then the full gate.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  for v in 0 8; do
    echo "=== LLMR_GPTOSS_BATCH_QKV_ROWS=$v"; LLMR_GPTOSS_BATCH_PROFILE=1 LLMR_GPTOSS_BATCH_QKV_ROWS=$v timeout 120 $B/bench/throughput --model /tmp/m20b --streams 8,64 2>&1 | grep -E "^ +(8|64) +[0-9]+ |^ +(2-3|4-7|8-15|16-31|32-63|64) |WARN|rror"
  done
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt
rm -rf /tmp/m20b
echo "bench done ${SECONDS}s"
timeout 480 tests/gpu/gate.sh --build $B --out /tmp/g --full 2>&1 | tail -9
cp -r /tmp/g/gate $O/ 2>/dev/null
grep -E "qkv rows|qkv prologue of" $O/gate/kernels.txt | head -20
echo "total ${SECONDS}s"
