#!/bin/bash
# session 20 call 1: where the batched step's experts spend (the F16 streaming kernel at T = 64: SASS of its hot loop,
# ncu warp states and per-instruction source counters), and the 16-token shapes that exist already (env switches),
# with the F16 form at 64 streams, beside the default, in the same call.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
cuobjdump -sass $B/engines/gptoss_cuda/libgptoss_cuda.so > /tmp/all.sass 2>&1; echo "cuobjdump rc=$?"
python3 - <<'PY' > $O/sass-stream.txt
import re
txt = open('/tmp/all.sass').read().split('\n')
out, keep = [], False
for l in txt:
    if 'Function :' in l:
        keep = 'mxfp4_mma_stream_kernel' in l and 'Lb1E' in l
    if keep: out.append(l)
print('\n'.join(out))
PY
wc -l $O/sass-stream.txt
timeout 60 $B/tests/gpu/gptoss_kernels --moe-timing 8 64 > $O/moe-timing.txt 2>&1; echo "moe-timing rc=$? ${SECONDS}s"
timeout 150 ncu --kernel-name-base demangled -k "regex:stream_kernel<.int.1, .int.2, .int.2, .bool.1>" --launch-skip 2 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --section InstructionStats --section ComputeWorkloadAnalysis \
  -o /tmp/f16 $B/tests/gpu/gptoss_kernels --moe-timing 64 > $O/ncu-log.txt 2>&1; echo "ncu rc=$? ${SECONDS}s"
ncu -i /tmp/f16.ncu-rep --print-details all > $O/ncu-f16.txt 2>&1
ncu -i /tmp/f16.ncu-rep --page source --csv --print-source sass > $O/ncu-f16-source.csv 2>&1; echo "source rc=$?"
{ for r in 1 2; do
  for v in "" "LLMR_GPTOSS_MOE_STREAM_TILES=2 LLMR_GPTOSS_MOE_STREAM_OCC=3" "LLMR_GPTOSS_MOE_STREAM_TILES=1 LLMR_GPTOSS_MOE_STREAM_OCC=3" "LLMR_GPTOSS_MOE_STREAM_TILES=2 LLMR_GPTOSS_MOE_STREAM_OCC=1"; do
    echo "=== [$v]"; env $v timeout 90 $B/bench/throughput --model /tmp/m20b --streams 64 2>&1 | grep -E "^ +64 +[0-9]+ |^ +(8-15|16-31|32-63|64) |WARN|rror"
  done
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt
echo "total ${SECONDS}s"
