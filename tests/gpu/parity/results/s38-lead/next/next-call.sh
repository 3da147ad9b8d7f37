#!/bin/bash
# Prepared in session 38 for the next session (docs/performance.md, "What is next (session 38)", items 1-2): where the
# batched step's expert kernels wait, instruction by instruction. ncu --set full on one gate_up launch at 32 and at 64
# rows of (a) the pre-staged MXFP4-tiles launch (mxfp4_mma_stream_kernel<1, 2, 2, true, true, true>) and (b) the e5m2
# copy's twin (mxfp4_mma_stream_e5_kernel), from gptoss_kernels --moe-timing; each report's source page (SASS with the
# warp-stall samples of each instruction) as CSV, xz-compressed, beside the summary. What to read: the instructions
# with the most samples and their stall reasons (the mma chain into the fresh accumulator? the decode's prmt chain?
# the ring's loads? the staging's barrier?). Preparation: build main; tests/gpu/pack.sh --out .gpu-lead/pkg; carry it.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
for T in 32 64; do
  for k in 'mxfp4_mma_stream_kernel<.*\(bool\)1, \(bool\)1, \(bool\)1>' 'mxfp4_mma_stream_e5_kernel'; do
    n=$([ "${k#mxfp4_mma_stream_e5}" = "$k" ] && echo tiles || echo e5)
    timeout 150 ncu --set full --import-source no --kernel-name-base demangled -k "regex:$k" -c 1 -o /tmp/rep-$n-$T \
      $B/tests/gpu/gptoss_kernels --moe-timing $T > /tmp/ncu-$n-$T.log 2>&1
    echo "ncu $n T=$T rc=$? ${SECONDS}s"
    ncu -i /tmp/rep-$n-$T.ncu-rep --print-details all > $O/ncu-$n-$T.txt 2>&1
    ncu -i /tmp/rep-$n-$T.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $O/source-$n-$T.csv.xz
    grep -E "Duration|DRAM Throughput|Issue Slots Busy|Warp Cycles Per Issued|Achieved Occupancy" $O/ncu-$n-$T.txt | head -6 | cut -c1-120
  done
done
echo "total ${SECONDS}s"
