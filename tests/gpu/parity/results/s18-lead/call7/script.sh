#!/bin/bash
# session 18 call 7: issue 10 step 22, o_proj (+ router partials) and qkv through bulk-copy rings (LLMR_GPTOSS_GEMV_RING,
# on; bit for bit): bench/decode =0 vs default twice, per-kernel ncu with it on, the full gate with it on.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels-moe.txt 2>&1; echo "kernels-moe rc=$?"; grep -E "^FAIL|ring|checks" $O/kernels-moe.txt | cut -c1-200
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== LLMR_GPTOSS_GEMV_RING=0"; LLMR_GPTOSS_GEMV_RING=0 timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
  echo "=== default (rings)"; timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
timeout 150 ncu --clock-control none --cache-control none --csv --metrics gpu__time_duration.sum \
  -k regex:"qkv_decode|attention_split|gemv1|moe_router_finish|moe_gate_up_ring|moe_down_decode|argmax|embed_kernel" \
  --launch-skip 40 --launch-count 420 $B/bench/decode --model /tmp/m20b --contexts 128 --tokens 16 > $O/ncu.csv 2>&1
echo "ncu rc=$? ${SECONDS}s"
rm -rf /tmp/m20b
echo "before gate ${SECONDS}s"
timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g --full 2>&1 | tee $O/gate.txt
for f in kernels parity batching20b serving; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
grep -E "^FAIL|ring" $O/kernels.txt | cut -c1-200 | head -12
grep -E "^[a-z0-9-]+/seed" $O/parity.txt | head -12
echo "total ${SECONDS}s"
