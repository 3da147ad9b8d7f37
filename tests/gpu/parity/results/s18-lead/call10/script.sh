#!/bin/bash
# session 18 call 10: issue 10 step 20's second form, the routed ring gate_up summing the router partials in the
# finish's order (bit for bit finish + ring), as the default (LLMR_GPTOSS_ROUTE_RING=0 off): its kernel check,
# bench/decode =0 vs default twice, the full gate (serving on the 20b included).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels-moe.txt 2>&1; echo "kernels-moe rc=$?"; grep -E "^FAIL|route|checks" $O/kernels-moe.txt | cut -c1-220
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== LLMR_GPTOSS_ROUTE_RING=0"; LLMR_GPTOSS_ROUTE_RING=0 timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
  echo "=== default (route ring)"; timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror|ignored"
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
rm -rf /tmp/m20b
echo "before gate ${SECONDS}s"
timeout 450 tests/gpu/gate.sh --build $B --out /tmp/g --full 2>&1 | tee $O/gate.txt
for f in kernels parity batching20b serving; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
grep -E "^FAIL|route" $O/kernels.txt | cut -c1-220 | head -8
grep -E "^[a-z0-9-]+/seed" $O/parity.txt | head -12
grep -E "FAIL|PASS" /tmp/g/gate/serving20b.txt | tail -3 | cut -c1-300
echo "total ${SECONDS}s"
