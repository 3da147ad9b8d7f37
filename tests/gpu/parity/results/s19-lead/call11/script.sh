#!/bin/bash
# session 19 call 11: gptoss_gemv1_rows (a small batched step's o_proj, weights read once). Kernel checks (the whole
# gptoss_kernels), bench/throughput at 8 and 64 streams LLMR_GPTOSS_BATCH_O_ROWS=0 vs default, twice, with the
# per-part profile; then the gate's selftest, parity, batching and serving steps (--full).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 300 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"; grep -E "^FAIL|gemv1 rows|gemv1 of|checks, " $O/kernels.txt | head -14
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  for v in 0 8; do
    echo "=== LLMR_GPTOSS_BATCH_O_ROWS=$v"; LLMR_GPTOSS_BATCH_PROFILE=1 LLMR_GPTOSS_BATCH_O_ROWS=$v timeout 120 $B/bench/throughput --model /tmp/m20b --streams 8,64 2>&1 | grep -E "^ +(8|64) +[0-9]+ |^ +(2-3|4-7|8-15) |WARN|rror"
  done
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt
rm -rf /tmp/m20b
echo "bench done ${SECONDS}s"
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --steps "selftest parity batching serving" --full 2>&1 | tail -8
cp -r /tmp/g/gate $O/ 2>/dev/null
echo "total ${SECONDS}s"
