#!/bin/bash
# session 24 call 3: call 2's one failure (batching-20b, greedy request 2 parting at its last step with fuse 5): step 48
# (down's rows by gate_up's epilogue) is taken back out, the default is 4 (steps 46 + 47). The 20b batching check with
# this build at fuse 4 and 3, and with call 2's build (A = call2.tar.xz) at 5 and 4; the batch and expert kernel checks.
O=$OUT; mkdir -p /tmp/B /tmp/A /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && xz -dc .gpu-lead/pkg/call2.tar.xz | tar -C /tmp/A -xf -
tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/A/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 60 $B/tests/gpu/gptoss_kernels --batch-checks > $O/batch-checks.txt 2>&1; echo "batch-checks rc=$? ${SECONDS}s $(tail -1 $O/batch-checks.txt)"
timeout 90 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/moe-mma-checks.txt 2>&1; echo "moe-mma-checks rc=$? ${SECONDS}s $(grep -E 'checks, [0-9]+ failed' $O/moe-mma-checks.txt | tail -1)"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
run() { # build fuse tag
  LLMR_GPTOSS_BATCH_FUSE=$2 timeout 150 $1/tests/gpu/gptoss_batching --model /tmp/m20b > $O/batching-$3.txt 2>&1
  echo "$3 rc=$? ${SECONDS}s $(tail -1 $O/batching-$3.txt) | $(grep -E '^FAIL' $O/batching-$3.txt | cut -c1-160)"
}
run $B 4 new-f4a; run $A 5 old-f5a; run $B 3 new-f3; run $A 4 old-f4; run $B 4 new-f4b; run $A 5 old-f5b
echo "total ${SECONDS}s"
