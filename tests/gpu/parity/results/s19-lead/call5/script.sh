#!/bin/bash
# session 19 call 5: what bounds the batched step's experts at 64 rows (the F16 form's 9% fewer instructions gained
# nothing, call 3): ncu sections of the F16 and bf16 (2 parts) streaming kernels at T = 64 (gate_up, then down), and
# of the T = 1 down kernel, in gptoss_kernels --moe-timing 64; then the refactored kernel checks (--moe-mma-checks).
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis"
for f in 1 0; do
  timeout 150 ncu --kernel-name-base demangled -k "regex:stream_kernel<.int.1, .int.2, .int.2, .bool.$f>" --launch-skip 2 --launch-count 2 $S $B/tests/gpu/gptoss_kernels --moe-timing 64 > $O/ncu-f16-$f.txt 2>&1
  echo "ncu f16=$f rc=$? ${SECONDS}s"; grep -cE "Duration" $O/ncu-f16-$f.txt
done
timeout 150 ncu -k "regex:moe_down_decode_kernel" --launch-skip 5 --launch-count 1 $S $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/ncu-down-t1.txt 2>&1; echo "ncu down rc=$?"
timeout 200 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma.txt 2>&1; echo "mma rc=$?"; grep -E "FAIL|checks" $O/mma.txt | head
echo "total ${SECONDS}s"
