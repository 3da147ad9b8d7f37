#!/bin/bash
# session 15 call 4 (main): the 20b batching check's seeded request 6 with the prompt path's experts on two bf16
# parts (LLMR_GPTOSS_TC_F16=0) instead of one fp16 part; ncu (full set, SASS stall samples) of the T = 1 MXFP4
# gate_up and down kernels (call 3's regex matched nothing: templated names).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
for i in 1 2; do LLMR_GPTOSS_TC_F16=0 timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b > /tmp/b20-$i.txt 2>&1; echo "b20 TC_F16=0 run $i rc=$?"; grep -E "checks|^FAIL" /tmp/b20-$i.txt | cut -c1-160; done
cat /tmp/b20-1.txt /tmp/b20-2.txt > $O/b20-f16off.txt
for k in gate_up down; do
  timeout 200 ncu -k "regex:moe_${k}_decode_kernel" --launch-skip 100 -c 1 --set full --import-source yes -o /tmp/$k \
    $B/bench/decode --model /tmp/m20b --contexts 128 > /tmp/ncu-$k.log 2>&1; echo "ncu $k rc=$?"; grep -E "==PROF==|==ERROR==" /tmp/ncu-$k.log | head -3 | cut -c1-200
  ncu -i /tmp/$k.ncu-rep --page details > $O/$k-details.txt 2>&1
  ncu -i /tmp/$k.ncu-rep --page source --csv --print-source sass > /tmp/$k-sass.csv 2>&1; gzip -9c /tmp/$k-sass.csv > $O/$k-sass.csv.gz
  grep -E "Duration|DRAM Throughput|Issue Slots Busy|Registers Per|Achieved Active|Warp Cycles Per Issued|SM Frequency|L1/TEX Hit|L1/TEX Cache Throughput" $O/$k-details.txt | head -12
done
echo "total ${SECONDS}s"
