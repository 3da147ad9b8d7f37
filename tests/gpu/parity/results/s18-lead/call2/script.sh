#!/bin/bash
# session 18 call 2: the routed ring gate_up as the default (LLMR_GPTOSS_ROUTE_RING=0 off): kernel checks and timing,
# bench/decode default vs =0 twice, a kernel-time profile of batch-1 decode (nsys if present, else ncu), then the full
# gate with parity on tiny + small + 20b-2l (the 20b's shapes, 2 layers: the router split and the rings vs transformers).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels-moe.txt 2>&1; echo "kernels-moe rc=$? ${SECONDS}s"
grep -E "^FAIL|route|checks|o_proj \+ router" $O/kernels-moe.txt | cut -c1-220
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== route ring off"; LLMR_GPTOSS_ROUTE_RING=0 timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
  echo "=== default (route ring)"; timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror|ignored"
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
echo "before profile ${SECONDS}s"
if command -v nsys >/dev/null; then
  timeout 120 nsys profile -o /tmp/prof --force-overwrite true --cuda-graph-trace=node $B/bench/decode --model /tmp/m20b --contexts 128 --tokens 32 > $O/nsys-run.txt 2>&1
  echo "nsys rc=$?"
  nsys stats --report cuda_gpu_kern_sum --format csv /tmp/prof.nsys-rep > $O/nsys-kern.csv 2>&1
  nsys stats --report cuda_gpu_trace --format csv /tmp/prof.nsys-rep 2>/dev/null | tail -2500 > $O/nsys-trace-tail.csv
  head -30 $O/nsys-kern.csv | cut -c1-200
else
  echo "no nsys; ncu"
  timeout 150 ncu --csv --metrics gpu__time_duration.sum -k regex:"qkv|attention|gemv1|ring|down|sampl|argmax|greedy|lm" --launch-skip 300 --launch-count 300 $B/bench/decode --model /tmp/m20b --contexts 128 --tokens 16 > $O/ncu.csv 2>&1
  echo "ncu rc=$?"; tail -5 $O/ncu.csv | cut -c1-200
fi
rm -rf /tmp/m20b
echo "before gate ${SECONDS}s"
timeout 480 tests/gpu/gate.sh --build $B --out /tmp/g --full 2>&1 | tee $O/gate.txt
for f in kernels parity batching20b serving; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
cp /tmp/g/gate/parity/parity/reports.txt $O/parity-reports.txt 2>/dev/null
grep -E "^FAIL" $O/kernels.txt | cut -c1-200 | head -4
grep -E "20b-2l|transformers" $O/parity.txt | head -12
echo "total ${SECONDS}s"
