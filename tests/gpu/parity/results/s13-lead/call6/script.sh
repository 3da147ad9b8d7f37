#!/bin/bash
# session 13 call 6: the standing on main 9c5a660 (streams, batch-1 decode, load) and serving e2e (tiny, 20b)
B=$PWD/.gpu-lead/build; O=$OUT; export LLMR_CACHE=$PWD/.gpu-lead/cache
nvidia-smi --query-gpu=name --format=csv,noheader
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
$B/bench/throughput --model /tmp/m20b --streams 1,8,32,64 > $O/tp.txt 2>&1; echo "tp rc=$?"; grep -E "^ *(1|8|32|64) +[0-9]+ +[0-9]+ " $O/tp.txt | cut -c1-200
{ for i in 1 2; do $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "; done; } > $O/decode.txt 2>&1; cat $O/decode.txt
$B/bench/load --model /tmp/m20b > $O/load.txt 2>&1; echo "load rc=$?"; tail -2 $O/load.txt
rm -rf /tmp/m20b
{ LLMR_BUILD=$B bash e2e/gpu/serving.sh; echo "serving tiny rc=$?"; LLMR_BUILD=$B FULL=1 bash e2e/gpu/serving.sh; echo "serving 20b rc=$?"; } > $O/serving.txt 2>&1; grep -E "rc=|PASS|FAIL" $O/serving.txt | cut -c1-250 | tail -8
