#!/bin/bash
# session 29 call 5: the full gate on the session's engine as landed (the lone row's step ahead, the radix sampler, the
# batched step ahead reverted after call 4's serving failure; the grouped gate_up opt-in, its checks in the kernels
# step); then the grouped tensor-core gate_up (LLMR_GPTOSS_MOE_DP4A=3): the T = 1 MoE checks and timings twice,
# bench/decode DP4A 2 / 3 (A B x 2, 128 / 1,024); bench/decode greedy with the step ahead off / on (A B x 2);
# temperature 1 with the one-block / radix sampler (A B, 128); bench/throughput 1 / 8 / 64 streams greedy, then 64
# streams at temperature 1.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL|request [0-9]" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head -20
grep -hE "grouped" /tmp/g/gate/kernels.txt | cut -c1-200
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
fails=0
for r in 1 2; do
  timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > /tmp/moe-$r.txt 2>&1 || fails=$((fails+1))
  grep -E "^FAIL" /tmp/moe-$r.txt | cut -c1-240
done
echo "moe-decode-timing: $fails of 2 runs failed ${SECONDS}s"; cp /tmp/moe-1.txt $O/
grep -hE "grouped|tensor-core ring T=1|no activation split|tensor-core ring gate_up T=1" /tmp/moe-*.txt | cut -c1-240
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for g in 2 3; do
  LLMR_GPTOSS_MOE_DP4A=$g timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > /tmp/d.txt 2>&1
  echo "decode dp4a=$g run $r rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ " /tmp/d.txt; cat /tmp/d.txt >> $O/decode-grouped.txt
done; done
for r in 1 2; do for a in 0 1; do
  LLMR_GPTOSS_STEP_AHEAD=$a timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > /tmp/d.txt 2>&1
  echo "decode ahead=$a run $r rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ |^context" /tmp/d.txt; cat /tmp/d.txt >> $O/decode-ahead.txt
done; done
for r in 1; do for v in 0 1; do
  LLMR_GPTOSS_SAMPLER=$v timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128 --temperature 1 > /tmp/d.txt 2>&1
  echo "decode t1 sampler=$v run $r rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ |^context" /tmp/d.txt; cat /tmp/d.txt >> $O/decode-t1.txt
done; done
timeout 150 $B/bench/throughput --model /tmp/m20b --streams 1,8,64 > $O/tp.txt 2>&1; echo "throughput rc=$? ${SECONDS}s"
grep -E "^ +[0-9]+ |streams, wall" $O/tp.txt | cut -c1-300
timeout 120 $B/bench/throughput --model /tmp/m20b --streams 64 --temperature 1 > $O/tp-t1.txt 2>&1; echo "throughput t1 rc=$? ${SECONDS}s"
grep -E "^ +[0-9]+ |streams, wall" $O/tp-t1.txt | cut -c1-300
echo "total ${SECONDS}s"
