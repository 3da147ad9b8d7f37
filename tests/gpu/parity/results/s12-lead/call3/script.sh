#!/bin/bash
# session 12 call 3: serving e2e (tiny, 20b) with the fp16 experts; the standing (streams, decode, load);
# where a short prompt's time goes (profile at 256 / 512 tokens, GEMM streams 1 vs 4)
B=$PWD/.gpu-lead/build; O=$OUT; export LLMR_CACHE=$PWD/.gpu-lead/cache
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
$B/bench/throughput --model /tmp/m20b --streams 1,8,32,64 > $O/tp.txt 2>&1; echo "tp rc=$?"; grep -E "^ *(1|8|32|64) +[0-9]+ +[0-9]+ |prefill .* GPU" $O/tp.txt | cut -c1-200
LLMR_GPTOSS_TC_F16=0 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp-f16off.txt 2>&1; echo "tp f16=0 rc=$?"; grep -E "^ *64 +[0-9]+ +[0-9]+ |prefill .* GPU" $O/tp-f16off.txt | cut -c1-200
$B/bench/decode --model /tmp/m20b --contexts 128,1024 > $O/decode.txt 2>&1; echo "decode rc=$?"; tail -3 $O/decode.txt
$B/bench/load --model /tmp/m20b > $O/load.txt 2>&1; echo "load rc=$?"; tail -2 $O/load.txt
run() { echo "=== $1"; shift; env "$@" LLMR_GPTOSS_PREFILL_PROFILE=1 $B/bench/prefill --model /tmp/m20b --lengths 256,512 --reps 3 2>&1 | grep -E "profile T=(256|512)|^ +(256|512) " | tail -4; }
{ run "default" A=1; run "TC_STREAMS=1" LLMR_GPTOSS_TC_STREAMS=1; run "default again" A=1; } > $O/short.txt 2>&1; cut -c1-230 $O/short.txt
rm -rf /tmp/m20b
{ LLMR_BUILD=$B bash e2e/gpu/serving.sh; echo "serving tiny rc=$?"; LLMR_BUILD=$B FULL=1 bash e2e/gpu/serving.sh; echo "serving 20b rc=$?"; } > $O/serving.txt 2>&1; grep -E "rc=|PASS|FAIL" $O/serving.txt | cut -c1-250 | tail -8
