#!/bin/bash
# session 19 call 3: the streaming expert kernel's F16 form (fp16 table decode, 2 fp16 activation parts) for the
# batched decode step. Its kernel checks and timings (--moe-mma-checks); bench/throughput at 8 / 64 streams with
# LLMR_GPTOSS_BATCH_MOE_F16=0 vs default, twice; then the gate's batching step on tiny and the 20b (--full).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 240 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma.txt 2>&1; echo "mma rc=$? ${SECONDS}s"; grep -E "FAIL|F16|checks" $O/mma.txt | cut -c1-220
grep -E "^time experts T=(8|64|128|512) " $O/mma.txt | sed 's/; stream.*; auto/; auto/' | cut -c1-260
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== LLMR_GPTOSS_BATCH_MOE_F16=0"; LLMR_GPTOSS_BATCH_MOE_F16=0 timeout 120 $B/bench/throughput --model /tmp/m20b --streams 8,64 2>&1 | grep -E "^ +(8|64) +[0-9]+ |^ +(16-31|32-63|64) |WARN|rror"
  echo "=== default (F16)"; timeout 120 $B/bench/throughput --model /tmp/m20b --streams 8,64 2>&1 | grep -E "^ +(8|64) +[0-9]+ |^ +(16-31|32-63|64) |WARN|rror"
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt
rm -rf /tmp/m20b
echo "bench done ${SECONDS}s"
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --steps "batching" --full 2>&1 | tail -3
cp -r /tmp/g/gate $O/ 2>/dev/null
echo "total ${SECONDS}s"
