#!/bin/bash
# session 25 call 11: the final engine (step 49 and step 50: the batch-1 full layers' attention on
# gptoss_attention_rows from 256 keys, with PDL): the full gate, then bench/decode and bench/throughput 1 / 8 / 32 / 64.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 440 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head
tar -C /tmp/g -czf $O/gate-logs.tgz gate
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1
timeout 60 $B/bench/decode --model /tmp/m20b > $O/decode.txt 2>&1; echo "decode rc=$? ${SECONDS}s"; tail -4 $O/decode.txt
timeout 100 $B/bench/throughput --model /tmp/m20b > $O/tp.txt 2>&1; echo "tp rc=$? ${SECONDS}s"; grep -E "^ +(1|8|32|64) +[0-9]+ +[0-9]+ " $O/tp.txt
echo "total ${SECONDS}s"
