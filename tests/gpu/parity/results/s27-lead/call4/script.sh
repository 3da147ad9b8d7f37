#!/bin/bash
# session 27 call 4: the tensor-core consumers without bound checks (chunks padded with zeros to 4 per warp, the B
# fragment's unused columns loaded from the used ones), their split's digits packed by prmt, and the chunk scales
# from exponent bits (both forms): the T = 1 MoE checks and timings, ncu of the ring kernels' first 8 launches, the
# tensor-core kernel's SASS, and bench/decode A B A B A B (dp4a vs tensor-core consumers, both routed by o_proj).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 120 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-decode.txt 2>&1; echo "moe-decode rc=$? ${SECONDS}s"
grep -E "^(FAIL|[0-9]+ checks)|tensor-core ring gate_up \(|timing (gate_up_decode, (dp4a|tensor-core) ring|MoE block fused, (dp4a|tensor)|o_proj)" $O/moe-decode.txt | cut -c1-200
timeout 200 ncu -k regex:ring_kernel --launch-count 8 --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
  --section InstructionStats --section Occupancy --section LaunchStats \
  $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/ncu.txt 2>&1; echo "ncu rc=$? ${SECONDS}s"
grep -E "moe_gate_up_ring_kernel<|Duration|Executed Ipc A|Issue Slots Busy|Executed Instructions  " $O/ncu.txt | sed -E 's/\(const float.*//' | head -40
cuobjdump -sass -fun '_Z23moe_gate_up_ring_kernelILi0ELb1EEvPKfPKiPKhS5_PKtiiffPfii8mr_route' $B/engines/gptoss_cuda/libgptoss_cuda.so > $O/sass-imma.txt 2>&1; echo "sass rc=$? lines $(wc -l < $O/sass-imma.txt)"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1
for r in 1 2 3; do for f in 1 2; do
  LLMR_GPTOSS_ROUTE_RING=2 LLMR_GPTOSS_MOE_DP4A=$f timeout 60 $B/bench/decode --model /tmp/m20b > $O/decode-f$f-r$r.txt 2>&1; echo "decode form $f run $r rc=$? ${SECONDS}s"
  grep -E "^ +[0-9]+ " $O/decode-f$f-r$r.txt | head -2
done; done
echo "total ${SECONDS}s"
