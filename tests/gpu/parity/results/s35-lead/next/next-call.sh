#!/bin/bash
# Prepared in session 35 for the next session's first GPU call (not run; session 35 ran out of device time). Goal: a
# 4,096-token prompt without the expert cache at <= 102.4 ms (40k tok/s; session 35: 104.6), so the 38 GB cache can
# go by default (VRAM 55.8 -> 17.6 GB, 64 streams no slower). Four compile-checked diffs in this folder:
#  - nosync-counts.diff: no host sync a layer for the expert counts where gptoss_tc_mlp reads them on the device alone
#    (the prompt kernel; tc.h gptoss_tc_mlp_device_counts): 24 syncs a chunk, the GPU idle between each layer's
#    routing and its experts' launches (predicted ~0.5 ms a chunk; ~2-3% at 256 tokens);
#  - swiglu-epilogue.diff: the SwiGLU in the prompt kernel's gate_up epilogue (gptoss_mxfp4_prompt_gemm_swiglu) where
#    no precise rows are packed: act rows of I fp32 instead of the products' rows of 2I (4,096 tokens: 377 MB less
#    written and read a layer, predicted ~2 ms); test_tc checks it against the SwiGLU kernel bit for bit;
#  - empty-barriers.diff: the kernel's phase __syncthreads replaced by an empty mbarrier a buffer (each warp says it is
#    past the products that read it; only the staging thread waits): the barrier stall was ~10% of the kernel's stall
#    cycles (calls 2-3; predicted 2-4% of the GEMMs);
#  - mixed-tiles.diff: with 128-row tiles, an item of 64 rows or fewer (an expert's last rows) runs the 64-row tile
#    (half the products, a second tensor map); a new test_tc case (T=600, 150 rows an expert) takes that path
#    (predicted ~1.7 ms at 4,096 tokens, more at ~1k-token chunks).
# nosync, swiglu and empty apply together in that order; mixed applies alone or after nosync (it moves the kernel
# body that swiglu and empty edit: merge by hand). This call is speed only: each diff alone against main, without the
# cache, A B A B. Preparation: build main into build/ (this tree), and main + each diff in a copy of the tree
# (cp -a, git apply, make build/engines/gptoss_cuda/libgptoss_cuda.so) at /tmp/nosync, /tmp/swiglu, /tmp/empty,
# /tmp/mixed; tests/gpu/pack.sh --out .gpu-lead/pkg --alt nosync:/tmp/nosync --alt swiglu:/tmp/swiglu
# --alt empty:/tmp/empty --alt mixed:/tmp/mixed; carry .gpu-lead/pkg. Then merge the winners, and in the second call
# run gptoss_kernels --tc-checks and the full gate on them (also with LLMR_GPTOSS_EXPERT_CACHE=0), then the default
# (LLMR_GPTOSS_EXPERT_CACHE auto -> off, model.cu) with bench/prefill, bench/throughput and bench/load on it.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for r in 1 2; do for v in base nosync swiglu empty mixed; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $v != base ] && E=/tmp/B/alt/$v/engines/gptoss_cuda/libgptoss_cuda.so
  LLMR_GPTOSS_EXPERT_CACHE=0 LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 60 $B/bench/prefill --engine $E --model /tmp/m20b \
    --lengths 256,512,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "$v $r rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms | ", $1, $2}')"
  echo "   $(grep -E 'prefill profile' /tmp/pf.txt | tail -15 | awk 'NR%3==0' | sed -E 's/.*T=([0-9]+).*experts ([0-9.]+) ms.*/T=\1 experts \2/' | tr '\n' ' ')"
  { echo "== $v $r"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done
for v in base mixed; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $v != base ] && E=/tmp/B/alt/$v/engines/gptoss_cuda/libgptoss_cuda.so
  LLMR_GPTOSS_EXPERT_CACHE=0 timeout 60 $B/bench/throughput --engine $E --model /tmp/m20b --streams 64 > /tmp/tp.txt 2>&1
  echo "throughput $v rc=$?: $(grep -E '^ +64 ' /tmp/tp.txt | head -1)"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done
echo "total ${SECONDS}s"
