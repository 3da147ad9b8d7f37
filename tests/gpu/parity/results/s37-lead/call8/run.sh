#!/bin/bash
# Session 37 call 8 (H200 machine, no GPU work): the SASS of the batched step's streaming F16 kernel (pre-staged, tiled:
# mxfp4_mma_stream_kernel<1, 2, 2, true, true, true>) and of the prompt kernel, for counting the instructions of their
# inner loops (cuobjdump is not on the build machine).
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -; SECONDS=0
SO=/tmp/B/build/engines/gptoss_cuda/libgptoss_cuda.so
cuobjdump -sass $SO > /tmp/all.sass 2>&1; echo "cuobjdump rc=$? $(wc -l < /tmp/all.sass) lines"
awk '/Function : .*mxfp4_mma_stream_kernel.*Li1ELi2ELi2ELb1ELb1ELb1E/{p=1} p&&/Function : /&&!/Li1ELi2ELi2ELb1ELb1ELb1E/{p=0} p' /tmp/all.sass > $O/stream_f16_pre_tiled.sass
awk '/Function : .*mxfp4_prompt_gemm_kernel.*Li16ELb0E/{p=1} p&&/Function : /&&!/mxfp4_prompt_gemm_kernel.*Li16ELb0E/{p=0} p' /tmp/all.sass > $O/prompt_16_0.sass
wc -l $O/*.sass; grep -c "Function :" /tmp/all.sass; grep "Function :" /tmp/all.sass | grep -E "stream_kernel|prompt_gemm" | head -30 | cut -c1-150
xz -9 $O/*.sass; echo "total ${SECONDS}s"
