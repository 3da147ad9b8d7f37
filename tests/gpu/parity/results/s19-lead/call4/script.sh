#!/bin/bash
# session 19 call 4: why the F16 form is no faster at 64 rows (call 3): ncu sections of the bf16 (2 parts) and F16
# streaming kernels at T = 64 (gate_up and down), the SASS of both; then the full gate with the F16 form on by default
# (batching passed in call 3).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
for f in false true; do
  timeout 120 ncu --kernel-name-base demangled -k "regex:stream_kernel<1, 2, 2, $f>" --launch-count 2 --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SchedulerStats --section Occupancy --section ComputeWorkloadAnalysis $B/tests/gpu/gptoss_kernels --moe-timing 64 > $O/ncu-$f.txt 2>&1
  echo "ncu $f rc=$?"
done
which cuobjdump && cuobjdump -sass -fun '_Z23mxfp4_mma_stream_kernelILi1ELi2ELi2ELb0EEvPKfiiPKiPKhS5_PKtS3_S3_S3_iiiiffiiPf' $B/tests/gpu/gptoss_kernels > $O/sass-bf16.txt 2>&1
which cuobjdump && cuobjdump -sass -fun '_Z23mxfp4_mma_stream_kernelILi1ELi2ELi2ELb1EEvPKfiiPKiPKhS5_PKtS3_S3_S3_iiiiffiiPf' $B/tests/gpu/gptoss_kernels > $O/sass-f16.txt 2>&1
wc -l $O/sass-*.txt
echo "ncu done ${SECONDS}s"
timeout 480 tests/gpu/gate.sh --build $B --out /tmp/g --steps "kernels selftest parity serving" --full 2>&1 | tail -8
cp -r /tmp/g/gate $O/ 2>/dev/null
echo "total ${SECONDS}s"
