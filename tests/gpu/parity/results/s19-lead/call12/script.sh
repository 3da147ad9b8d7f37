#!/bin/bash
# session 19 call 12: the final engine's standing (bench/decode at 128 / 1,024 / 4,096, bench/throughput at 1 / 8 / 32 /
# 64 streams), and 8 streams with LLMR_GPTOSS_BATCH_O_ROWS=4 (the default) against =0, twice.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024,4096 > $O/decode.txt 2>&1; grep -E "^ +[0-9]+ |copy" $O/decode.txt
timeout 200 $B/bench/throughput --model /tmp/m20b --streams 1,8,32,64 > $O/tp.txt 2>&1; echo "tp rc=$?"; grep -E "^ +(1|8|32|64) +[0-9]+ +[0-9]+ |VRAM|load" $O/tp.txt
{ for i in 1 2; do for v in 0 4; do
  echo "=== LLMR_GPTOSS_BATCH_O_ROWS=$v"; LLMR_GPTOSS_BATCH_O_ROWS=$v timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8 2>&1 | grep -E "^ +8 +[0-9]+ "
done; done; } > $O/o-rows-ab.txt 2>&1; cat $O/o-rows-ab.txt
rm -rf /tmp/m20b
echo "total ${SECONDS}s"
