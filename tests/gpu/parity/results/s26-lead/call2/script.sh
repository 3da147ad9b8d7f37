#!/bin/bash
# session 26 call 2: step 53, a batch-1 layer's attention + o_proj in one cooperative launch (LLMR_GPTOSS_ATTN_OPROJ=1):
# its kernel checks (bit for bit the two launches) and timing; bench/decode =0 / =1 twice; the gate's parity and
# batching steps (--full: also the 20b) with it on.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 120 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
grep -E "^FAIL|attention \+ o_proj|checks" $O/kernels.txt | cut -c1-250
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for p in 0 1; do
  echo "=== ATTN_OPROJ=$p run $r"; LLMR_GPTOSS_ATTN_OPROJ=$p timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024,4096 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
done; done; echo "bench ${SECONDS}s"
LLMR_GPTOSS_ATTN_OPROJ=1 timeout 330 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "parity batching" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head
tar -C /tmp/g -cJf $O/gate-logs.txz gate
xz -9 $O/kernels.txt
echo "total ${SECONDS}s"
