#!/bin/bash
# Prepared in session 35 for the next session's first GPU call (not run). Goal: a 4,096-token prompt without the expert
# cache at <= 102.4 ms (40k tok/s; session 35: 104.6), so the 38 GB cache can go by default (VRAM 55.8 -> 17.6 GB,
# 64 streams no slower). Two compile-checked diffs in this folder, each estimated at ~1-2 ms there:
#  - nosync-counts.diff: no host sync a layer for the expert counts where gptoss_tc_mlp reads them on the device alone
#    (the prompt kernel; tc.h gptoss_tc_mlp_device_counts): 24 syncs a chunk, the GPU idle between each layer's
#    routing and its experts' launches (also short prompts: ~2-3% at 256 tokens, predicted);
#  - swiglu-epilogue.diff: the SwiGLU in the prompt kernel's gate_up epilogue (gptoss_mxfp4_prompt_gemm_swiglu) where
#    no precise rows are packed: act rows of I fp32 instead of the products' rows of 2I (4,096 tokens: 377 MB less
#    written and read a layer); test_tc checks it against the SwiGLU kernel bit for bit;
#  - empty-barriers.diff: the prompt kernel's phase __syncthreads replaced by an empty mbarrier a buffer (each warp
#    says it is past the products that read it; only the staging thread waits): the barrier stall was ~10% of the
#    kernel's stall cycles (session 35 calls 2-3).
# They apply together in that order. Preparation: build main into /tmp/base/build (cp -a the tree, make), main + each
# diff into /tmp/nosync, /tmp/swiglu, /tmp/empty, and all three into this tree's build/ (so its gptoss_kernels has the
# new check); then tests/gpu/pack.sh --out .gpu-lead/pkg --alt base:/tmp/base --alt nosync:/tmp/nosync
# --alt swiglu:/tmp/swiglu --alt empty:/tmp/empty, and carry .gpu-lead/pkg. Keep the winners: the full gate on them,
# then the default (LLMR_GPTOSS_EXPERT_CACHE auto -> off, model.cu) with bench/prefill, bench/throughput and bench/load.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 & MK=$!
timeout 170 $B/tests/gpu/gptoss_kernels --tc-checks > $O/tc-checks.txt 2>&1; echo "tc-checks rc=$? ${SECONDS}s"
grep -E "SwiGLU in its epilogue|prompt_gemm.*(800|2880)" $O/tc-checks.txt | cut -c1-160; grep -E "^FAIL|FAIL " $O/tc-checks.txt | head
tail -1 $O/tc-checks.txt
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
for r in 1 2; do for v in base nosync swiglu empty all; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $v != all ] && E=/tmp/B/alt/$v/engines/gptoss_cuda/libgptoss_cuda.so
  LLMR_GPTOSS_EXPERT_CACHE=0 timeout 60 $B/bench/prefill --engine $E --model /tmp/m20b --lengths 256,512,1024,2048,4096 \
    --reps 3 > /tmp/pf.txt 2>&1
  echo "$v $r rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms | ", $1, $2}')"
  { echo "== $v $r"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done
LLMR_GPTOSS_EXPERT_CACHE=0 tests/gpu/gate.sh --build $B --out /tmp/g --steps "selftest parity batching" > $O/gate.txt 2>&1
echo "gate (no cache, all three diffs) rc=$? ${SECONDS}s"; grep -E "^GATE" $O/gate.txt
echo "total ${SECONDS}s"
