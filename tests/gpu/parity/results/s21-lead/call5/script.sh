#!/bin/bash
# session 21 call 5: step 39, the F16 form's bit decode (LLMR_GPTOSS_MOE_F16_BITS=1: two IMAD shifts + one LOP3 per fp16
# pair instead of the byte-permute table, moving the decode off the ALU pipe, 63% busy against FMA's 25% in session 20's
# ncu). Its kernel checks (against the CPU, same bits across shapes), one layer's experts at T = 8 / 64 / 128 and
# 64 / 8 streams, table and bits in the order A B B A; SASS instruction mix of both pre-staged kernels.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
LLMR_GPTOSS_MOE_F16_BITS=1 timeout 120 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/checks-bits.txt 2>&1; echo "checks bits rc=$? ${SECONDS}s"
grep -E "checks, [0-9]+ failed|FAIL" $O/checks-bits.txt | head -8; grep -E "F16 T=(64|512) (gate|down)" $O/checks-bits.txt | head -4
cuobjdump -sass $B/engines/gptoss_cuda/libgptoss_cuda.so > /tmp/all.sass 2>&1
python3 - <<'PY' > $O/sass-mix.txt
import re, collections
funcs, cur = {}, None
for l in open('/tmp/all.sass'):
    if 'Function :' in l:
        cur = l.split('Function :')[1].strip(); funcs[cur] = []
    elif cur:
        m = re.search(r'/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)', l)
        if m: funcs[cur].append(m.group(1))
for f, ins in funcs.items():
    if 'mxfp4_mma_stream_kernel' in f and 'ILi1ELi2ELi2ELb1ELb1' in f:
        c = collections.Counter(ins)
        print(f[:70], len(ins), sorted(c.items(), key=lambda x: -x[1])[:14])
PY
cat $O/sass-mix.txt
for v in 0 1 1 0; do LLMR_GPTOSS_MOE_F16_BITS=$v timeout 60 $B/tests/gpu/gptoss_kernels --moe-timing 8 64 128 > $O/timing-$v.txt 2>&1
  echo "bits=$v: $(grep -oE "time experts T=[0-9]+|F16 [0-9.]+ / [0-9.]+ ms|F16 pre-staged[^;]*" $O/timing-$v.txt | tr '\n' ' ')"; done
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for v in 0 1 1 0; do LLMR_GPTOSS_MOE_F16_BITS=$v timeout 80 $B/bench/throughput --model /tmp/m20b --streams 64,8 > $O/tp-$v.txt 2>&1
  echo "bits=$v rc=$? ${SECONDS}s"; grep -E "^ +(8|64) +[0-9]+ " $O/tp-$v.txt; done
echo "total ${SECONDS}s"
