#!/bin/bash
# session 18 call 1: main + step 19 (router finish loads its partial rows at once, default) + the routed ring gate_up
# (LLMR_GPTOSS_ROUTE_RING=1, off): kernel checks and timing, bench/decode old (main c4d2715) / new / new + route ring
# twice, batching on the 20b with the route ring, then the full gate on the new engine (default switches).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && xz -dc .gpu-lead/pkg/old.so.xz > /tmp/old.so && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; OLD=/tmp/old.so; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels-moe.txt 2>&1; echo "kernels-moe rc=$? ${SECONDS}s"
grep -E "^FAIL|route|checks|o_proj \+ router|gate_up" $O/kernels-moe.txt | cut -c1-220
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== old (main)"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $OLD --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== new"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
  echo "=== new + route ring"; LLMR_GPTOSS_ROUTE_RING=1 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror|ignored"
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
echo "before batching-rr ${SECONDS}s"
LLMR_GPTOSS_ROUTE_RING=1 timeout 300 $B/tests/gpu/gptoss_batching --model /tmp/m20b > $O/batching20b-rr.txt 2>&1; echo "batching20b route ring rc=$? $(tail -1 $O/batching20b-rr.txt) ${SECONDS}s"
rm -rf /tmp/m20b
echo "before gate ${SECONDS}s"
timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g --full 2>&1 | tee $O/gate.txt
for f in kernels parity batching20b serving serving20b; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
grep -E "^FAIL" $O/kernels.txt | cut -c1-200 | head -4
echo "total ${SECONDS}s"
