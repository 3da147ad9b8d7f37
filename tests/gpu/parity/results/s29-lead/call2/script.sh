#!/bin/bash
# session 29 call 2: the lone row's step launched ahead of the host's token wait (LLMR_GPTOSS_STEP_AHEAD, default 1):
# the gate's selftest (its new check: the same tokens, turns and contexts with it on and off) and serving steps;
# bench/decode with it off / on (A B x 3, 128 / 1,024); what non-greedy sampling costs a lone row (temperature 1;
# with top-p 0.9; with top-k 50); bench/throughput 1 / 64 streams (greedy, then temperature 1 at 64).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 300 tests/gpu/gate.sh --build $B --out /tmp/g --steps "selftest serving" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "FAIL|step ahead" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2 3; do for a in 0 1; do
  LLMR_GPTOSS_STEP_AHEAD=$a timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > /tmp/decode-a$a-r$r.txt 2>&1
  echo "decode ahead=$a run $r rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ |^context" /tmp/decode-a$a-r$r.txt
done; done
cat /tmp/decode-a*.txt > $O/decode-ahead.txt
for s in "--temperature 1" "--temperature 1 --top-p 0.9" "--temperature 1 --top-k 50"; do
  timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128 $s > /tmp/ds.txt 2>&1
  echo "decode $s rc=$? ${SECONDS}s"; grep -E "^sampling|^ +[0-9]+ |^context" /tmp/ds.txt; cat /tmp/ds.txt >> $O/decode-sampling.txt
done
timeout 120 $B/bench/throughput --model /tmp/m20b --streams 1,64 > $O/tp.txt 2>&1; echo "throughput rc=$? ${SECONDS}s"
grep -E "^ +[0-9]+ |streams, wall" $O/tp.txt | cut -c1-300
timeout 120 $B/bench/throughput --model /tmp/m20b --streams 64 --temperature 1 > $O/tp-t1.txt 2>&1; echo "throughput t1 rc=$? ${SECONDS}s"
grep -E "^ +[0-9]+ |streams, wall" $O/tp-t1.txt | cut -c1-300
echo "total ${SECONDS}s"
