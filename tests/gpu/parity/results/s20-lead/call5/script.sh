#!/bin/bash
# session 20 call 5: the F16 hot loop with its scale multipliers from a per-CTA table and no predicated weight loads,
# against d444ee0 (base) in the same call: kernel checks of the tensor-core experts, the experts' timings at T = 8 /
# 64 / 128 (both builds, twice), bench/throughput at 8 and 64 streams (A B B A), SASS of the new hot loop.
O=$OUT; mkdir -p /tmp/B /tmp/A /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && xz -dc .gpu-lead/pkg/base.tar.xz | tar -C /tmp/A -xf -
tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache; export LLMR_CACHE=/tmp/cache; B=/tmp/B/build A=/tmp/A/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for r in 1 2; do for v in A B; do D=/tmp/$v/build
  timeout 60 $D/tests/gpu/gptoss_kernels --moe-timing 8 64 128 > $O/moe-timing-$v$r.txt 2>&1; echo "$v moe-timing rc=$?"
  grep -oE "time experts T=[0-9]+|F16 [0-9./ ]+ ms|F16 pre-staged[^;]*" $O/moe-timing-$v$r.txt | paste -sd' '
done; done
{ for v in B A A B; do D=/tmp/$v/build
    echo "=== $v"; timeout 120 $D/bench/throughput --model /tmp/m20b --streams 8,64 2>&1 | grep -E "^ +(8|64) +[0-9]+ |^ +(4-7|8-15|16-31|32-63|64) |WARN|rror"
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt; echo "tp ${SECONDS}s"
timeout 240 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma.txt 2>&1; echo "mma rc=$? ${SECONDS}s"; grep -E "FAIL|checks" $O/mma.txt | head -20
cuobjdump -sass $B/engines/gptoss_cuda/libgptoss_cuda.so > /tmp/all.sass 2>&1
python3 - <<'PY' > $O/sass-f16.txt
out, keep = [], False
for l in open('/tmp/all.sass'):
    if 'Function :' in l: keep = '_Z23mxfp4_mma_stream_kernelILi1ELi2ELi2ELb1ELb1E' in l
    if keep: out.append(l.rstrip())
print('\n'.join(out))
PY
wc -l $O/sass-f16.txt; echo "total ${SECONDS}s"
