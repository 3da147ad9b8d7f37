#!/bin/bash
# Prepared in session 44 (not run: its device time was spent). Three same-bits changes, two behind an environment switch.
# route-ring-3.diff: LLMR_GPTOSS_ROUTE_RING=3 with a cheaper gate_up side.
# Call 4 of session 44 measured the router finish in groups (o_proj's last block of each of 32 groups adds its partial
# rows; every gate_up CTA adds the 32 sums and takes the top-4 in its ROUTE 1 prologue): o_proj 14.45 -> 12.34 us, but
# the gate_up 17.92 -> 20.44, batch-1 -0.5%. route-ring-3.diff gives the gate_up its own prologue (ROUTE 3,
# gptoss_moe_grouped_gate_up_dp4a): the 32 sums in one round trip (ROUTE 1 loads two virtual warps at a time), over
# the ring's stages; r by every consumer from the squares column (the finish's order, the same bits), so warps 1..7
# split the activation vector while warp 0 takes the top-4; the producer released by a named barrier (2) once every
# warp is past its reads of the sums, the consumers not waiting there. Same bits as the default (kernel check:
# residual, ids, weights, groups, logits and act, 3 times, both ring forms). Compile-checked: 72 registers, 256 bytes
# of static shared memory (3 CTAs an SM still fit: 232,320 of 233,472 bytes). On the default path it changes only
# gemv1_kernel (16 more parameter bytes; o_proj gets the not-taken group-finish branch: call 4's build had the same,
# o_proj 14.45 us there against 14.47-14.60 without); the ring's default instances keep their PTX.
# Predicted: the gate_up 20.4 -> ~18.6-19.4 us (ROUTE 2: 17.9), o_proj 12.3 as in call 4; batch-1 +0.5-1.5% over the
# default. If it wins, make 3 the default in model.cu (gptoss_env_int("LLMR_GPTOSS_ROUTE_RING", 3, 0, 3)).
# down-r4.diff (LLMR_GPTOSS_DOWN_R4=1): the T = 1 down on the tiled copy with 4 rows a warp task (two tile lanes' row
# pairs), so each of a block's 8 warps has one task instead of two and each activation read serves 4 rows: session
# 43's page put the activation's reads at twice the weights' sectors and ~1/4 of the kernel's stall samples. Same bits
# (kernel check against 2 rows a task, both decodes). Compile-checked: 80 registers, no spill, 3 blocks an SM; the
# other instances' PTX unchanged. Predicted: down 12.6 -> ~10-11.5 us, batch-1 +1-3%. If it wins, make it the default.
# ring-tiled-offsets.diff (no switch: the default path): the T = 1 ring gate_up on the tiled copy reads a lane's words at
# W ^ (32 j + 16 r), W = 144 g + 4 t, one register, instead of offsets kept per j that the compiler recomputed in the
# loop (~10 instructions a chunk). Same loads, same bits. PTX: 40 -> 35 instructions between a chunk's mma pairs (the
# checkpoint layout's ring: 31). Session 44 found the tiled ring ~0.8 us a layer slower than the checkpoint layout's
# (17.9 against 17.1 us), which is +1.1% batch-1 on that layout. Predicted: 17.9 -> ~17.3 us, batch-1 +0.5-0.8%.
# Preparation: in a clone of main (4d6e104 or later), git apply all three diffs (they apply together) and make: the
# build. In a second clone, apply route-ring-3.diff and down-r4.diff only and make: the alt "noofs". Then
# tests/gpu/pack.sh --out .gpu-lead/pkg --alt noofs:CLONE2; copy this file into the pkg; carry .gpu-lead/pkg.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-decode-timing.txt 2>&1
echo "moe-decode-timing rc=$? ${SECONDS}s: $(grep -c '^ok' $O/moe-decode-timing.txt) ok, $(grep -c '^FAIL' $O/moe-decode-timing.txt) FAIL"
grep -E "^FAIL|groups|4 rows|timing o_proj" $O/moe-decode-timing.txt | cut -c1-260
EB=/tmp/B/alt/noofs/engines/gptoss_cuda/libgptoss_cuda.so
# b: without the offsets change (alt), defaults; r2: with it, defaults; r3 / d4 / both: with it and the switches on
env_of() { case $1 in b|r2) echo "LLMR_GPTOSS_ROUTE_RING=2" ;; r3) echo "LLMR_GPTOSS_ROUTE_RING=3" ;;
  d4) echo "LLMR_GPTOSS_DOWN_R4=1" ;; both) echo "LLMR_GPTOSS_ROUTE_RING=3 LLMR_GPTOSS_DOWN_R4=1" ;; esac; }
eng_of() { if [ "$1" = b ]; then echo "$EB"; else echo "$EN"; fi; }
for v in r3 b r2 d4 both both d4 r2 b r3 r3 d4 r2 b both; do
  env $(env_of $v) timeout 60 $B/bench/decode --engine $(eng_of $v) --model $M20B --contexts 128,1024 --tokens 256 > /tmp/d.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(awk '$1 ~ /^(128|1024)$/ {printf "%s: %s tok/s (%s) ", $1, $3, $NF}' /tmp/d.txt)"
  { echo "== $v"; cat /tmp/d.txt; } >> $O/decode-ab.txt
done
for v in b r2 r3 d4; do
  S=$(env $(env_of $v) timeout 90 tests/gpu/ncu_durations.sh --csv /tmp/n.csv \
    "moe_down|gemv1_kernel|qkv_decode|attention_split|moe_gate_up_ring" -- \
    $B/bench/decode --engine $(eng_of $v) --model $M20B --contexts 128 --tokens 16)
  echo "ncu $v rc=$? ${SECONDS}s: $S"
  { echo "== $v"; cat /tmp/n.csv; } >> /tmp/ncu-dur.csv
done
xz -9 < /tmp/ncu-dur.csv > $O/ncu-dur.csv.xz
# the full gate with both on, and the defaults' self-test, parity and batching beside it
LLMR_GPTOSS_ROUTE_RING=3 LLMR_GPTOSS_DOWN_R4=1 timeout $((585 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1 &
GA=$!
timeout $((580 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g2 --steps "selftest parity batching" > $O/gate-defaults.txt 2>&1
wait $GA; echo "gate (ROUTE_RING=3, DOWN_R4=1) rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
echo "gate (defaults)"; grep "^GATE" $O/gate-defaults.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g2/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
