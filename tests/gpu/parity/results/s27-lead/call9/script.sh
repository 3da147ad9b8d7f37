#!/bin/bash
# session 27 call 9: call 8's one failure (the routed tensor-core gate_up differing from finish + ring, act 0.041) read
# as mma.sync (.aligned) reached by a diverged warp after the ring's per-thread polling wait; the mend: __syncwarp()
# after the wait. The T = 1 MoE checks 15 times with the build before the mend (alt/ts) and 15 times after it.
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
for v in before:/tmp/B/alt/ts/tests/gpu/gptoss_kernels after:/tmp/B/build/tests/gpu/gptoss_kernels; do n=${v%%:*}; b=${v#*:}
  fails=0
  for r in $(seq 1 15); do
    timeout 60 $b --moe-decode-timing > $O/moe-$n-$r.txt 2>&1 || fails=$((fails+1))
    grep -E "^FAIL" $O/moe-$n-$r.txt | cut -c1-200
  done
  echo "$n: $fails of 15 runs failed ${SECONDS}s"
done
echo "total ${SECONDS}s"
