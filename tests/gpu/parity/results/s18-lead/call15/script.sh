#!/bin/bash
# session 18 call 15: issue 10 step 24, down's activations staged in shared memory (LLMR_GPTOSS_DOWN_STAGE, on; bit for bit):
# its kernel check, bench/decode =0 vs default twice, per-kernel ncu, the full gate only when faster by more than 1%.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels-moe.txt 2>&1; echo "kernels-moe rc=$?"; grep -E "^FAIL|staged|checks|MoE block fused" $O/kernels-moe.txt | cut -c1-220
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== LLMR_GPTOSS_DOWN_STAGE=0"; LLMR_GPTOSS_DOWN_STAGE=0 timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
  echo "=== default (staged)"; timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
timeout 150 ncu --clock-control none --cache-control none --csv --metrics gpu__time_duration.sum \
  -k regex:"qkv_decode|attention_split|gemv1|moe_router_finish|moe_gate_up_ring|moe_down_decode|argmax|embed_kernel" \
  --launch-skip 40 --launch-count 420 $B/bench/decode --model /tmp/m20b --contexts 128 --tokens 16 > $O/ncu.csv 2>&1
echo "ncu rc=$? ${SECONDS}s"
rm -rf /tmp/m20b
faster=$(awk '/^===/{v=($2 ~ /STAGE=0/)?"old":"new"} /^ +128 /{s[v]+=$3; n[v]++} END{print (s["new"]/n["new"] > 1.01*s["old"]/n["old"]) ? 1 : 0}' $O/decode-ab.txt)
echo "faster=$faster"
if [ "$faster" = 1 ]; then
  timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g --full 2>&1 | tee $O/gate.txt
  for f in kernels parity batching20b serving; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
  grep -E "^FAIL|staged" $O/kernels.txt | cut -c1-220 | head -6
fi
echo "total ${SECONDS}s"
