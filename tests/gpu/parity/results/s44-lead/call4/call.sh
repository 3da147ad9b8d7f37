#!/bin/bash
# Session 44, call 4. LLMR_GPTOSS_ROUTE_RING=3: the router finish's first step (each group vw of partial rows vw, vw + 32,
# ... summed in the finish's order) by the last of o_proj's blocks of each group, in parallel, and the rest (the 32
# sums, r, the logits, the top-4) in every CTA of the ring gate_up (its ROUTE 1 prologue reading 32 rows instead of
# 360). Same bits as the default (2: all of the finish in o_proj's last block, ~4 us a layer after it arrives; call 2's
# moe-decode-timing: gemv1_router_finish 11.7 us against gemv1_router alone 7.8). Also in this build: q/k/v's loads
# all before its first product (call 3: -2% q/k/v, +0.1-0.2% batch-1) and the staged down (off).
# Predicted: o_proj ~14.4 -> ~11.5-12 us, the gate_up +0.3-0.7 us; batch-1 +2-3%.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT; EB=/tmp/B/alt/base/engines/gptoss_cuda/libgptoss_cuda.so
timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-decode-timing.txt 2>&1
echo "moe-decode-timing rc=$? ${SECONDS}s: $(grep -c '^ok' $O/moe-decode-timing.txt) ok, $(grep -c '^FAIL' $O/moe-decode-timing.txt) FAIL"
grep -E "^FAIL|groups|timing o_proj|tensor-core ring T=1" $O/moe-decode-timing.txt | cut -c1-260
run() { # $1: base | r2 (this build's defaults) | r3 (LLMR_GPTOSS_ROUTE_RING=3)
  local E=$EN rr=2; [ $1 = base ] && E=$EB; [ $1 = r3 ] && rr=3
  LLMR_GPTOSS_ROUTE_RING=$rr timeout 60 $B/bench/decode --engine $E --model $M20B --contexts 128,1024 --tokens 256 > /tmp/d.txt 2>&1
  echo "$1 rc=$? ${SECONDS}s: $(awk '$1 ~ /^(128|1024)$/ {printf "%s: %s tok/s (%s) ", $1, $3, $NF}' /tmp/d.txt)"
  { echo "== $1"; cat /tmp/d.txt; } >> $O/decode-ab.txt
}
for v in r3 r2 base base r2 r3 r3 base r2; do run $v; done
for v in r2 r3; do
  rr=${v#r}
  LLMR_GPTOSS_ROUTE_RING=$rr timeout 90 ncu --clock-control none --cache-control none \
    -k regex:"moe_down|gemv1_kernel|qkv_decode|attention_split|moe_gate_up_ring" --launch-skip 240 -c 240 --csv \
    --metrics gpu__time_duration.sum $B/bench/decode --engine $EN --model $M20B --contexts 128 --tokens 16 > /tmp/n.csv 2>&1
  echo "ncu $v rc=$? ${SECONDS}s: $(grep -E 'moe_|gemv1|qkv|attention' /tmp/n.csv | awk -F'","' '{k=$5; sub(/\(.*/,"",k); gsub(/[",]/,"",$NF); s[k]+=$NF; n[k]++} END {for (k in s) printf "%s %d x %.0f ns; ", k, n[k], s[k]/n[k]}')"
  { echo "== $v"; cat /tmp/n.csv; } >> /tmp/ncu-dur.csv
done
xz -9 < /tmp/ncu-dur.csv > $O/ncu-dur.csv.xz
G=$(awk '/^== / {v = $2} $1 ~ /^(128|1024)$/ {s[v, $1] += $3; n[v, $1]++} END {
  for (i = 0; i < 2; i++) { c = i ? 1024 : 128; b = s["base", c] / n["base", c];
    printf "%.4f %.4f ", (s["r2", c] / n["r2", c]) / b, (s["r3", c] / n["r3", c]) / b } }' $O/decode-ab.txt)
echo "r2/base r3/base at 128, then 1024: $G"
set -- $G
RR=2; awk -v a=$2 -v b=$4 -v c=$1 -v d=$3 'BEGIN {exit !(a >= 1.004 && b >= 1.004 && a > c && b > d)}' && RR=3
echo "gating ROUTE_RING=$RR (full, every step), and the defaults beside it (selftest parity batching)"
LLMR_GPTOSS_ROUTE_RING=$RR timeout $((585 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1 &
GA=$!
[ $RR = 3 ] && timeout $((580 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g2 --steps "selftest parity batching" > $O/gate-defaults.txt 2>&1
wait $GA; echo "gate (ROUTE_RING=$RR) rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
[ $RR = 3 ] && { echo "gate (defaults)"; grep "^GATE" $O/gate-defaults.txt; }
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g2/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
