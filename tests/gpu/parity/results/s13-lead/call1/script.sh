#!/bin/bash
# session 13 call 1: diagnostics. SASS of the engine; ncu (full, source counters) of the 64-row streaming MoE
# gate_up (mode 2, 8-token tiles, 2 parts); where batch-1 decode and the 64-row step spend (H100).
B=$PWD/.gpu-lead/build; O=$OUT
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
cuobjdump -sass $B/engines/gptoss_cuda/libgptoss_cuda.so > $O/engine.sass 2>&1; echo "sass rc=$? $(wc -l < $O/engine.sass) lines"; gzip -9 $O/engine.sass
timeout 300 ncu --kernel-name-base demangled -k "regex:mxfp4_mma_stream_kernel<1, 2, 2>" -c 2 --set full --import-source no -o $O/ms64 $B/tests/gpu/gptoss_kernels --moe-timing 64 > $O/ncu-run.txt 2>&1; echo "ncu rc=$?"; tail -3 $O/ncu-run.txt | cut -c1-300
ncu -i $O/ms64.ncu-rep --page source --csv --print-source sass > $O/ms64-sass.csv 2>&1; echo "src rc=$? $(wc -l < $O/ms64-sass.csv)"
ncu -i $O/ms64.ncu-rep --page details > $O/ms64-details.txt 2>&1; grep -E "Duration|Executed Ipc A|Issue Slots|Registers|Eligible Warps|Active Warps|highest-utilized" $O/ms64-details.txt | head -20
gzip -9 $O/ms64-sass.csv
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
LLMR_GPTOSS_PROFILE=1 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > $O/decode-prof.txt 2>&1; echo "decode-prof rc=$?"
$B/bench/decode --model /tmp/m20b --contexts 128,1024 > $O/decode.txt 2>&1; echo "decode rc=$?"; tail -3 $O/decode.txt
LLMR_GPTOSS_BATCH_PROFILE=1 $B/bench/throughput --model /tmp/m20b --streams 8,64 > $O/tp-prof.txt 2>&1; echo "tp rc=$?"; grep -E "^ *(8|64) +[0-9]+ +[0-9]+ " $O/tp-prof.txt
