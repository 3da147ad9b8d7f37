#!/bin/bash
# session 19 call 6: the F16 form with 16-token tiles in occupancy mode 2 (one super-chunk of loads in flight, 64
# registers): each expert of a 64-row step decoded once instead of ~1.4 times (experts with 9-16 tokens took two
# 8-token tiles). Kernel checks and timings (--moe-mma-checks), bench/throughput at 64 streams with the shape forced
# (LLMR_GPTOSS_MOE_STREAM_TILES=2 LLMR_GPTOSS_MOE_STREAM_OCC=2) against the default, twice.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 240 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma.txt 2>&1; echo "mma rc=$? ${SECONDS}s"; grep -E "FAIL|checks" $O/mma.txt | head
grep -E "^time experts T=(8|16|32|64|128) " $O/mma.txt | sed 's/; stream.*; auto/; auto/' | cut -c1-330
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== default"; timeout 120 $B/bench/throughput --model /tmp/m20b --streams 8,64 2>&1 | grep -E "^ +(8|64) +[0-9]+ |^ +(4-7|8-15|16-31|32-63|64) |WARN|rror"
  echo "=== TILES=2 OCC=2"; LLMR_GPTOSS_MOE_STREAM_TILES=2 LLMR_GPTOSS_MOE_STREAM_OCC=2 timeout 120 $B/bench/throughput --model /tmp/m20b --streams 8,64 2>&1 | grep -E "^ +(8|64) +[0-9]+ |^ +(4-7|8-15|16-31|32-63|64) |WARN|rror"
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt
rm -rf /tmp/m20b
echo "total ${SECONDS}s"
