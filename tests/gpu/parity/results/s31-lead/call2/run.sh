#!/bin/bash
# session 31 call 2: main with every F16 launch on the tiled copy and LLMR_GPTOSS_MOE_TILED=2 (auto) the default.
# Expert checks; bench/throughput 8 / 32 / 64 streams: the defaults (the expert cache leaves no room for the auto copy
# on an 80 GB card), the cache off (the auto copy taken), the copy forced beside the cache (=1); and, with the copy
# forced, the streaming kernel from 2 rows (LLMR_GPTOSS_MOE_MMA_MIN_ROWS=2) and with 8 warps a CTA.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 150 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/moe-mma-checks.txt 2>&1; echo "moe-mma-checks rc=$? ${SECONDS}s"
grep -hE "^FAIL|checks, " $O/moe-mma-checks.txt | cut -c1-220
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
run() { # name streams env...
  local n=$1 s=$2; shift 2
  env "$@" timeout 90 $B/bench/throughput --model /tmp/m20b --streams $s > /tmp/t.txt 2>&1
  echo "throughput $n rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |tiled|VRAM" /tmp/t.txt | cut -c1-220; cat /tmp/t.txt >> $O/tp-$n.txt
}
run default 8,32,64
run nocache 8,32,64 LLMR_GPTOSS_EXPERT_CACHE=0
run forced 8,32,64 LLMR_GPTOSS_MOE_TILED=1
run forced-min2 8 LLMR_GPTOSS_MOE_TILED=1 LLMR_GPTOSS_MOE_MMA_MIN_ROWS=2
run forced-w8 8,32,64 LLMR_GPTOSS_MOE_TILED=1 LLMR_GPTOSS_MOE_STREAM_WARPS=8
run default2 8,32,64
run forced2 8,32,64 LLMR_GPTOSS_MOE_TILED=1
echo "total ${SECONDS}s"
