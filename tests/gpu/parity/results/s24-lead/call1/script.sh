#!/bin/bash
# session 24 call 1: o_proj's parts summed into x by the batched router (step 46, LLMR_GPTOSS_BATCH_FUSE=3, the new
# default) and the review mends (one part-sum helper, gptoss_tc_part_sum; tc_split_kernel through gptoss_tc_split_value
# for every layout): the gate's kernels, parity and batching steps; 64 streams A B A B (BATCH_FUSE 2 / 3); prefill at
# 4k and load re-measured (last measured in sessions 12 and 13); bench/decode.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 330 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels parity batching" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "checks, [0-9]+ failed|^FAIL|router_decode_add|tc_split|rows_qkv_finish" /tmp/g/gate/kernels.txt | cut -c1-170 | tail -14
tar -C /tmp/g -czf $O/gate-logs.tgz gate
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for f in 2 3 2 3; do
  LLMR_GPTOSS_BATCH_FUSE=$f timeout 50 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp-fuse$f-$SECONDS.txt 2>&1
  echo "fuse=$f rc=$? ${SECONDS}s $(grep -E '^ +64 +[0-9]+ ' $O/tp-fuse$f-*.txt | tail -1) | $(grep -E '^ +64 +[0-9]+ +64.0' $O/tp-fuse$f-*.txt | tail -1)"
done
timeout 60 $B/bench/decode --model /tmp/m20b > $O/decode.txt 2>&1; echo "decode rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ +[0-9.]+ " $O/decode.txt
timeout 90 $B/bench/prefill --model /tmp/m20b --lengths 1024,4096 --reps 3 > $O/prefill.txt 2>&1; echo "prefill rc=$? ${SECONDS}s"; tail -4 $O/prefill.txt
timeout 60 $B/bench/load --model /tmp/m20b --reps 3 > $O/load.txt 2>&1; echo "load rc=$? ${SECONDS}s"; tail -3 $O/load.txt
echo "total ${SECONDS}s"
