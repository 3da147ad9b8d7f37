#!/bin/bash
# Session 39 call 5 (H200): the prompt kernel (warpgroup MMA, B from shared memory) timed on a batched step's pairs
# (--moe-timing's new "prompt kernel on the step's pairs" entry) beside the step's streaming launches. Call 4's ncu put
# the e5m2 launch at 84% of the L1 data pipe's wavefronts (shared 43%: the B fragments), so a kernel whose B the
# tensor cores read from shared memory themselves is the one to time. Predicted ~0.2-0.3 ms at 64 rows.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
timeout 200 $B/tests/gpu/gptoss_kernels --moe-timing 16 32 64 128 > $O/moe-timing.txt 2>&1
echo "moe-timing rc=$? ${SECONDS}s"
grep -o "time experts T=[0-9]*\|the same with the tiled weights[^;]*\|the e5m2 copy[^;]*\|the prompt kernel[^;]*" $O/moe-timing.txt
timeout 150 ncu --set full --import-source no -k "regex:mxfp4_prompt_gemm_kernel" -c 2 -o /tmp/rep-pk-64 \
  $B/tests/gpu/gptoss_kernels --moe-timing 64 > /tmp/ncu-pk.log 2>&1
echo "ncu prompt kernel T=64 rc=$? ${SECONDS}s"
ncu -i /tmp/rep-pk-64.ncu-rep --print-details all > $O/ncu-pk-64.txt 2>&1
grep -E "Grid Size|Duration|DRAM Throughput|Achieved Occupancy|Issue Slots Busy|L1: Data Pipe Lsu|Pipe Tensor Cycles" $O/ncu-pk-64.txt | cut -c1-110
echo "total ${SECONDS}s"
