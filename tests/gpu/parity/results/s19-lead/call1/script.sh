#!/bin/bash
# session 19 call 1: the MoE block in one launch (gptoss_moe_block_dp4a: routed gate_up, grid barrier, down from the
# same ring). grid_barrier.cuh's check and cost; the T = 1 MoE kernel checks with the new bit-for-bit check and
# timing; bench/decode LLMR_GPTOSS_MOE_BLOCK=0 vs default, twice each; then the gate's selftest + parity steps.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 30 $B/tests/gpu/gptoss_kernels --barrier-timing > $O/barrier.txt 2>&1; echo "barrier rc=$?"; grep -E "timing|checks|FAIL" $O/barrier.txt
timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe.txt 2>&1; echo "moe rc=$?"; grep -E "FAIL|one launch|checks" $O/moe.txt
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== LLMR_GPTOSS_MOE_BLOCK=0"; LLMR_GPTOSS_MOE_BLOCK=0 timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror|copy"
  echo "=== default (MoE block in one launch)"; timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
rm -rf /tmp/m20b
echo "bench done ${SECONDS}s"
timeout 300 tests/gpu/gate.sh --build $B --out /tmp/g --steps "selftest parity" 2>&1 | tail -5
cp -r /tmp/g/gate $O/ 2>/dev/null
echo "total ${SECONDS}s"
