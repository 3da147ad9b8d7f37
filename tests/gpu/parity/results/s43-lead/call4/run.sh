#!/bin/bash
# Session 43 call 4 (the last ~290 s of device time): the standing on main (175b34a's engine: call 3 reverted its two
# changes) and the source page of the batch-1 attention (attention_split_kernel: 64 blocks, one per query head, ~7 us
# a layer at 128 keys in session 18), the one batch-1 kernel call 2's pages did not catch.
O=$OUT; rm -rf /tmp/B; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0; EN=$B/engines/gptoss_cuda/libgptoss_cuda.so
[ -f /tmp/m20b/config.json ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 60 $B/bench/decode --engine $EN --model /tmp/m20b --contexts 128,1024 --tokens 256 > $O/standing.txt 2>&1; echo "decode rc=$? ${SECONDS}s"
timeout 60 $B/bench/throughput --engine $EN --model /tmp/m20b --streams 1,8,32,64 >> $O/standing.txt 2>&1; echo "throughput rc=$? ${SECONDS}s"
grep -E "^ +(128|1024) |^ +(1|8|32|64) +[0-9]+ +[0-9]+ " $O/standing.txt
timeout 90 ncu --set full --import-source no -k regex:attention_split --launch-skip 48 -c 3 -o /tmp/rep2 \
  $B/bench/decode --engine $EN --model /tmp/m20b --contexts 128 --tokens 16 > /tmp/ncu2.log 2>&1; echo "ncu attention rc=$? ${SECONDS}s"
ncu -i /tmp/rep2.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $O/source-attn.csv.xz
ncu -i /tmp/rep2.ncu-rep --print-details all 2>&1 | xz -9 > $O/ncu-attn.txt.xz
echo "total ${SECONDS}s"
