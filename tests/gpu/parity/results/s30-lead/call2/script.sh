#!/bin/bash
# session 30 call 2: the batched step launched ahead of the host with packed prefill kept (session 29's
# call6/batched-step-ahead-admission.diff rebased on main: two host stages used in turn; prompts to prefill wait for
# the in-flight step's end, then the queue is admitted again) as build alt/ahead: the gate's selftest, batching and
# serving steps on it; then bench/throughput 64 streams, main / ahead / main / ahead (LLMR_GPTOSS_STEP_AHEAD=1 in both;
# main's batched steps are never ahead).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/B/alt
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
# the gate with the alt engine: a build tree whose engines are alt/ahead's
rm -rf /tmp/BA; cp -r $B /tmp/BA; rm -rf /tmp/BA/engines; cp -r $A/ahead/engines /tmp/BA/engines
timeout 330 tests/gpu/gate.sh --build /tmp/BA --out /tmp/g --full --steps "selftest batching serving" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL|request [0-9]|packed|slices" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-250 | head -30
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for v in main ahead; do
  if [ $v = main ]; then E=$B/engines/gptoss_cuda/libgptoss_cuda.so; else E=$A/ahead/engines/gptoss_cuda/libgptoss_cuda.so; fi
  timeout 60 $B/bench/throughput --model /tmp/m20b --engine $E --streams 64 > /tmp/t.txt 2>&1; echo "throughput $v run $r rc=$? ${SECONDS}s"
  grep -E "^ +[0-9]+ |streams, wall|step" /tmp/t.txt | cut -c1-300; cat /tmp/t.txt >> $O/tp-$v.txt
done; done
echo "total ${SECONDS}s"
# data for the next steps: the batched step's dense GEMMs timed (cuBLAS forms), and ncu on the batched expert kernel at T = 64
timeout 90 $B/tests/gpu/gptoss_kernels --lm-head-timing > $O/lm-head-timing.txt 2>&1; echo "lm-head-timing rc=$? ${SECONDS}s"
grep -E "timing" $O/lm-head-timing.txt | cut -c1-200 | head -30
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 150 $NCU --kernel-name regex:mxfp4_mma_stream --launch-count 2 --section SpeedOfLight --section SchedulerStats \
  --section WarpStateStats --section Occupancy --section InstructionStats --section LaunchStats \
  $B/tests/gpu/gptoss_kernels --moe-timing 64 > $O/ncu-moe64.txt 2>&1; echo "ncu rc=$? ${SECONDS}s"
grep -E "mxfp4_mma_stream|Duration|Issued Ipc|Eligible Warps|No Eligible|Executed Instructions |Registers|Achieved Occupancy|Stall|Memory Throughput|DRAM Throughput|Grid Size|Block Size" $O/ncu-moe64.txt | head -60
echo "total2 ${SECONDS}s"
