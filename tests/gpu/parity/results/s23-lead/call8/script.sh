#!/bin/bash
# session 23 call 8: the one RoPE rotation (gptoss_rope_pair, products rounded one by one) in every kernel that rotates:
# the full gate (the batch-row checks now bit for bit), then bench/decode and 64 streams against call 7 (same H100 kind).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "checks, [0-9]+ failed|^FAIL|rope_rows|rows_qkv_finish" /tmp/g/gate/kernels.txt | cut -c1-160 | tail -12
grep -hE "^request [0-9]|FAIL" /tmp/g/gate/serving20b.txt | cut -c1-200 | head -10
tar -C /tmp/g -czf $O/gate-logs.tgz gate
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
timeout 60 $B/bench/decode --model /tmp/m20b > $O/decode.txt 2>&1; echo "decode rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ +[0-9.]+ " $O/decode.txt
timeout 60 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp.txt 2>&1; echo "tp rc=$? ${SECONDS}s"; grep -E "^ +64 +[0-9]+ " $O/tp.txt
echo "total ${SECONDS}s"
