#!/bin/bash
# Prepared in session 30 for the next session's first GPU call (not run). Build main into build/ and main with
# next-experiments.diff applied into a worktree, then pack both (/tmp/pkg.sh-style: alt/exp/engines and
# alt/exp/tests/gpu/gptoss_kernels). It runs: the expert checks and timings of the experiment build (the tiled reads in
# every F16 launch, pre-staged 16-pair tiles in mode 1: bit for bit among the F16 forms), the host checks and the
# expert checks of main (f90ece2's tiling map); bench/throughput 8 / 32 / 64 streams: main, main tiled (pre-staged
# launches only), exp tiled (every F16 launch), exp tiled + 16-pair tiles, and the bound with tiled loads and no
# arithmetic (LLMR_EXP_MOE_DIAG=1).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/B/alt
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/tests/gpu/gptoss_kernels --host-checks | tail -2
timeout 150 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/moe-mma-checks-main.txt 2>&1; echo "main moe-mma-checks rc=$? ${SECONDS}s"
timeout 150 $A/exp/tests/gpu/gptoss_kernels --moe-mma-checks > $O/moe-mma-checks-exp.txt 2>&1; echo "exp moe-mma-checks rc=$? ${SECONDS}s"
grep -hE "^FAIL|checks, " $O/moe-mma-checks-*.txt | cut -c1-220
grep -oE "F16 \(not pre-staged\) with the tiled[^;]*|F16 pre-staged [^;]*|EXP pre-staged[^;]*" $O/moe-mma-checks-exp.txt | head -40
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
run() { # name engine env...
  local n=$1 e=$2; shift 2
  env "$@" timeout 90 $B/bench/throughput --model /tmp/m20b --engine $e --streams 8,32,64 > /tmp/t.txt 2>&1
  echo "throughput $n rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ " /tmp/t.txt | cut -c1-200; cat /tmp/t.txt >> $O/tp-$n.txt
}
M=$B/engines/gptoss_cuda/libgptoss_cuda.so; X=$A/exp/engines/gptoss_cuda/libgptoss_cuda.so
run main $M LLMR_GPTOSS_MOE_TILED=0
run main-tiled $M LLMR_GPTOSS_MOE_TILED=1
run exp-tiled $X LLMR_GPTOSS_MOE_TILED=1
run exp-tiled-16 $X LLMR_GPTOSS_MOE_TILED=1 LLMR_GPTOSS_MOE_STREAM_TILES=2 LLMR_GPTOSS_MOE_STREAM_OCC=1
run exp-tiled-noarith $X LLMR_GPTOSS_MOE_TILED=1 LLMR_EXP_MOE_DIAG=1
echo "total ${SECONDS}s"
