#!/bin/bash
# Session 43 call 3. Call 2's source pages of the batch-1 kernels: o_proj (gemv1_kernel<true>) and qkv_decode_kernel
# issue their first weight loads only after staging x (and, for q/k/v, the norm) behind __syncthreads, so the first
# use of a weight waits a whole memory latency after the barrier: 22% of o_proj's warp samples and 36% of qkv's on
# that one instruction. Now each warp's first pass of weights goes out before the staging (the same loads, the same
# sums: the same bits); o_proj also loads its row's router weight before storing y[n] (a possible alias made it wait
# behind the store) and keeps its bias as bf16 bits until used. qkv_decode gets __launch_bounds__(256, 3) (80
# registers, 60 bytes of spills) so its 320 blocks stay in one wave; without the bound it took 112 registers.
# Engines: new (both), g (o_proj only: alt g), base (main at 175b34a: alt base).
# Predicted: o_proj 17.4 -> ~14.5 us and qkv 14.1 -> ~11 us (ncu, base clocks, caches flushed); batch-1 decode
# +4-7% (~24 x 5 us of a 1.80 ms token).
O=$OUT; rm -rf /tmp/B; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -f /tmp/m20b/config.json ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
EN=$B/engines/gptoss_cuda/libgptoss_cuda.so
eng() { case $1 in new) echo $EN ;; *) echo /tmp/B/alt/$1/engines/gptoss_cuda/libgptoss_cuda.so ;; esac; }
for v in new g base base g new new g base base g new; do
  timeout 60 $B/bench/decode --engine $(eng $v) --model /tmp/m20b --contexts 128,1024 --tokens 256 > /tmp/d.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(awk '$1 ~ /^(128|1024)$/ {printf "%s: %s tok/s (%s) ", $1, $3, $NF}' /tmp/d.txt)"
  { echo "== $v"; cat /tmp/d.txt; } >> $O/decode-abc.txt
done
for v in new g base; do
  timeout 60 ncu --cache-control all -k regex:"gemv1|qkv_decode" --launch-skip 100 -c 75 --csv \
    --metrics gpu__time_duration.sum $B/bench/decode --engine $(eng $v) --model /tmp/m20b --contexts 128 --tokens 16 > /tmp/n.csv 2>&1
  echo "ncu $v rc=$? ${SECONDS}s: $(grep -E 'gemv1|qkv' /tmp/n.csv | awk -F'","' '{k=$5; sub(/\(.*/,"",k); u=$(NF-1); gsub(/[",]/,"",$NF); s[k]+=$NF; n[k]++} END {for (k in s) printf "%s %d x %.3f %s; ", k, n[k], s[k]/n[k], u}')"
  { echo "== $v"; cat /tmp/n.csv; } >> /tmp/ncu-dur.csv
done
xz -9 < /tmp/ncu-dur.csv > $O/ncu-dur.csv.xz
CUO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for f in _Z12gemv1_kernelILb1EEvPKfPKtS3_iiPfiiS1_S4_9gemv1_fin _Z17qkv_decode_kernelPKfPKtfS2_S2_S2_S2_S2_S2_iiiPKiS0_fPf9gptoss_kvi; do
  $CUO -sass -fun $f $EN 2>&1 | grep -nE "LDG|BAR|STL|LDL" | head -60
done > $O/sass-ldg.txt; echo "sass rc=$? ${SECONDS}s"
LLMR_GPTOSS_EXPERT_CACHE=0 timeout $((575 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
G0=$!
timeout $((580 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels selftest parity batching serving" > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
