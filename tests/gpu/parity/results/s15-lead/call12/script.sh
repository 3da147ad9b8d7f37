#!/bin/bash
# session 15 call 12 (review): the debug forward's precise mode derived from the debug_out argument instead of a
# model flag set around the call (host code); kernel checks' slot predicates shared. Gate: kernels, self-test,
# parity, batching tiny + 20b.
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 560 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels selftest parity batching" 2>&1 | tee $O/gate.txt
for f in kernels parity batching20b; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
grep -E "timing (gate_up_decode|down_decode)" $O/kernels.txt | grep "T=1:"
grep -E "seeded request 6" $O/batching20b.txt | cut -c1-300
echo "total ${SECONDS}s"
