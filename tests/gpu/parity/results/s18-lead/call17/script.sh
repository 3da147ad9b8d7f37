#!/bin/bash
# session 18 call 17: issue 10 step 25, the full-attention layers on the split kernel from 1,024 keys (a second decode
# graph; LLMR_GPTOSS_SPLIT_ATTN_FROM=0 never): bench/decode =0 vs default twice at 128 / 1,024 / 4,096, then the full
# gate when the default is faster at 4,096 by more than 2% and not slower at 128 by more than 1%.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== LLMR_GPTOSS_SPLIT_ATTN_FROM=0"; LLMR_GPTOSS_SPLIT_ATTN_FROM=0 timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024,4096 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
  echo "=== default (split from 1,024)"; timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024,4096 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
rm -rf /tmp/m20b
go=$(awk '/^===/{v=($2 ~ /FROM=0/)?"old":"new"} /^ +128 /{a[v]+=$3} /^ +4096 /{b[v]+=$3} END{print (b["new"] > 1.02*b["old"] && a["new"] > 0.99*a["old"]) ? 1 : 0}' $O/decode-ab.txt)
echo "go=$go ${SECONDS}s"
if [ "$go" = 1 ]; then
  timeout 450 tests/gpu/gate.sh --build $B --out /tmp/g --full 2>&1 | tee $O/gate.txt
  for f in kernels parity batching20b serving; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
  grep -E "^FAIL" $O/kernels.txt | cut -c1-200 | head -4
  grep -E "^[a-z0-9-]+/seed" $O/parity.txt | head -12
fi
echo "total ${SECONDS}s"
