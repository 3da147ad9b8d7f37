#!/bin/bash
# session 23 call 6: the SASS of gptoss_mxfp4_mma_wgmma's kernel (step 45): its instruction mix, to see what other
# than the decode and the wgmma it spends its 146 M warp instructions a layer's gate_up on (call 5's ncu).
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -; B=/tmp/B/build
which cuobjdump nvdisasm
cuobjdump -sass -fun '_Z22mxfp4_mma_wgmma_kernelPKhS0_S0_PKtPKiS4_S4_iiiiffPf' $B/engines/gptoss_cuda/libgptoss_cuda.so > $O/wgmma.sass 2>&1
echo "rc=$? lines $(wc -l < $O/wgmma.sass)"
grep -oE "^ +/\*[0-9a-f]{4}\*/ +[@!A-Z0-9_.]+( [A-Z0-9_.]+)?" $O/wgmma.sass | awk '{op=$2; if (op ~ /^@/) op=$3; sub(/\..*/,"",op); c[op]++} END {for (o in c) print c[o], o}' | sort -rn | head -40
