#!/bin/bash
# Session 44, call 2. Call 1 (s44-lead/call1: session 43's prepared down forms) showed ptxas keeps issuing a T = 1 down
# lane's u = 1 and u = 2 weight loads next to their use, whatever the walk. Here the pass's first product depends on
# every load of the pass through a value that is 0 at run time but unknown to the compiler (dep & zero), so ptxas must
# issue them all first: down (md_rows ALL_IN), o_proj (gemv1_kernel<true>) and q/k/v (qkv_decode_kernel), same bits.
# Predicted: down 12.6 -> ~9.5-10.5 us, o_proj and q/k/v -0-10% each; batch-1 +2-5%.
# Measures: the four kernels' SASS load placement (both engines), bench/decode A B B A A B, ncu durations of the T = 1
# kernels (base, base on the checkpoint's layout, this build), gptoss_kernels --moe-decode-timing (the H200's T = 1
# MoE parts, the tensor-core ring's copies and arithmetic alone); the full gate when batch-1 gained >= 0.4% at both
# contexts.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT; EB=/tmp/B/alt/base/engines/gptoss_cuda/libgptoss_cuda.so
CUO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for f in _Z22moe_down_decode_kernelILi1ELi2ELb1ELi90ELb1EEvPKfPKiiS1_PKhS5_PKtiiPfi \
         _Z12gemv1_kernelILb1EEvPKfPKtS3_iiPfiiS1_S4_9gemv1_fin \
         _Z17qkv_decode_kernelPKfPKtfS2_S2_S2_S2_S2_S2_iiiPKiS0_fPf9gptoss_kvi; do
  for v in z base; do
    L=$EN; [ $v = base ] && L=$EB
    $CUO -sass -fun $f $L > /tmp/sass.txt 2>&1
    echo "== $v $f"
    grep -nE "LDG|FFMA|BAR|EXIT" /tmp/sass.txt | awk '/LDG|BAR|EXIT/ {print; f = 0; next} /FFMA/ && !f++ {print}' | head -60
    cat /tmp/sass.txt >> /tmp/sass-all.txt
  done
done > $O/sass-ldg.txt; xz -9 < /tmp/sass-all.txt > $O/sass-all.txt.xz; echo "sass ${SECONDS}s"
for v in z base base z z base; do
  E=$EN; [ $v = base ] && E=$EB
  timeout 60 $B/bench/decode --engine $E --model $M20B --contexts 128,1024 --tokens 256 > /tmp/d.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(awk '$1 ~ /^(128|1024)$/ {printf "%s: %s tok/s (%s) ", $1, $3, $NF}' /tmp/d.txt)"
  { echo "== $v"; cat /tmp/d.txt; } >> $O/decode-ab.txt
done
for v in base base-ckpt z; do
  E=$EN; [ $v != z ] && E=$EB; T=1; [ $v = base-ckpt ] && T=0
  LLMR_GPTOSS_MOE_TILED=$T timeout 90 ncu --clock-control none --cache-control none \
    -k regex:"moe_down|gemv1_kernel|qkv_decode|attention_split|moe_gate_up_ring" --launch-skip 240 -c 240 --csv \
    --metrics gpu__time_duration.sum $B/bench/decode --engine $E --model $M20B --contexts 128 --tokens 16 > /tmp/n.csv 2>&1
  echo "ncu $v rc=$? ${SECONDS}s: $(grep -E 'moe_|gemv1|qkv|attention' /tmp/n.csv | awk -F'","' '{k=$5; sub(/\(.*/,"",k); gsub(/[",]/,"",$NF); s[k]+=$NF; n[k]++} END {for (k in s) printf "%s %d x %.0f ns; ", k, n[k], s[k]/n[k]}')"
  { echo "== $v"; cat /tmp/n.csv; } >> /tmp/ncu-dur.csv
done
xz -9 < /tmp/ncu-dur.csv > $O/ncu-dur.csv.xz
timeout 120 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-decode-timing.txt 2>&1
echo "moe-decode-timing rc=$? ${SECONDS}s"; grep -E "timing|FAIL|passed" $O/moe-decode-timing.txt | tail -24
# the gate, if this build gained at both contexts (mean of three runs each)
GAIN=$(awk '/^== / {v = $2} $1 ~ /^(128|1024)$/ {s[v, $1] += $3} END {g1 = s["z", 128] / s["base", 128]; g2 = s["z", 1024] / s["base", 1024]; printf "%.4f %.4f", g1, g2}' $O/decode-ab.txt)
echo "z / base: $GAIN"
if awk -v a="${GAIN% *}" -v b="${GAIN#* }" 'BEGIN {exit !(a >= 1.004 && b >= 1.004)}'; then
  timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels selftest parity batching serving" > $O/gate.txt 2>&1
  echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
  grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
else
  echo "no gate: no gain"
fi
echo "total ${SECONDS}s"
