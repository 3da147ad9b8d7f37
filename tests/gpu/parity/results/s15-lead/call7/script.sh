#!/bin/bash
# session 15 call 7: the full engine gate (--full: batching and serving also on the full-size 20b) on main with
# gptoss_batching's first near-tie replay split (the prompt as the runs took it, then the agreed tokens as one chunk).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 570 tests/gpu/gate.sh --build $B --out /tmp/g --full 2>&1 | tee $O/gate.txt
for f in kernels selftest parity batching batching20b serving serving20b; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
grep -E "near-tie|^FAIL" /tmp/g/gate/batching20b.txt | cut -c1-420
echo "total ${SECONDS}s"
