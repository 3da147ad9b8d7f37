#!/bin/bash
# Prepared in session 43 (not run: its device time was spent). Two same-bits forms of the T = 1 down kernel on the
# experts' tiled copy, both aimed at what call 2's SASS showed: ptxas issues a lane's u = 1 and u = 2 weight loads
# next to their first use (the PTX has all six at the top), so a warp waits three memory latencies a task, two tasks
# in a row (down 12.7 us a layer at real clocks, ~1.2 TB/s).
# - down-word-major.diff: md_rows at G = 1 walks a pass word-major (word k of all three chunks, then word k + 1) with a
#   part per chunk; each chunk's products and the chunk-ordered adds into acc are the chunk-major walk's, so the same
#   bits; every load of the pass is used in its first step. Compile-checked: 80 registers, no spill; only the G = 1
#   forms' PTX changes. Works only if ptxas then issues the six loads together (sass-down.txt: the LDG.E.EF.128 lines
#   before the first FFMA). Also lane 0's two biases loaded at the task's start, not after the sums (4% of the kernel's
#   warp samples on their use in call 2's page; G = 1 forms only).
# - down-tiled-cp.diff: moe_down_tiled_cp_kernel (moe_decode_async.cu, LLMR_GPTOSS_DOWN_CP=1, off by default): each
#   warp starts cp.async copies of both its tasks' units and scale words (7.5 KB a warp, 61,440 bytes a block, 3 blocks
#   an SM) before computing anything, then the plain kernel's products in its order. A kernel check compares it with
#   the plain kernel bit for bit (test_decode_tiled); its biases are loaded at the task's start too. Compile-checked:
#   80 registers, no spill.
# Predicted: down 12.7 -> ~9.5-10.5 us (word-major, if ptxas cooperates) and ~8.5-9.5 us (cp.async: one latency a warp);
# batch-1 +2-4% and +3-5%. Both diffs apply together (they touch different parts of moe_decode.cu); with DOWN_CP=1 the
# word-major walk no longer runs in the 20b's T = 1 down.
# - oproj-router-weight-first.diff: o_proj (gemv1_kernel<true>) loads its row's router weight with the row's weights
#   instead of after storing y[n] (a possible alias kept it there; its use right after held 5% of o_proj's samples in
#   call 2's page). Same bits; gemv1_kernel<false> (lm_head) keeps its PTX. Predicted: o_proj -3-5%, batch-1 +0.5%.
#   Its effect is read from the kernels' ncu durations (gemv1_kernel<1> against base).
# Also measured, with no code change: the T = 1 kernels on the checkpoint's layout with and without the cp.async
# kernels moe_decode_async.cu has had for it (LLMR_GPTOSS_MOE_TILED=0, + LLMR_GPTOSS_MOE_ASYNC=1), not measured on the
# H200 since session 31 made the tiled layout the default.
# Preparation: build main; git clone /work/main /tmp/base && make there; git apply the three diffs in main; make;
# tests/gpu/pack.sh --out .gpu-lead/pkg --alt base:/tmp/base; copy this file into the pkg; carry .gpu-lead/pkg. ~9 min.
O=$OUT; rm -rf /tmp/B; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -f /tmp/m20b/config.json ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
EB=/tmp/B/alt/base/engines/gptoss_cuda/libgptoss_cuda.so; EN=$B/engines/gptoss_cuda/libgptoss_cuda.so
CUO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for f in _Z22moe_down_decode_kernelILi1ELi2ELb1ELi90ELb1EEvPKfPKiiS1_PKhS5_PKtiiPfi _Z24moe_down_tiled_cp_kernelPKfPKiS0_PKhS4_PKtiiPf; do
  echo "== $f"; $CUO -sass -fun $f $EN 2>&1 | grep -nE "LDG|LDGSTS|DEPBAR|FFMA|BAR|EXIT" \
    | awk '/LDG|DEPBAR|BAR|EXIT/ {print; next} /FFMA/ && !f++ {print}' | head -40
done > $O/sass-down.txt; echo "sass rc=$? ${SECONDS}s"
for v in wm cp base base cp wm; do # wm: new with DOWN_CP=0 (the word-major walk), cp: new with DOWN_CP=1
  E=$EN; [ $v = base ] && E=$EB; CP=0; [ $v = cp ] && CP=1
  LLMR_GPTOSS_DOWN_CP=$CP timeout 60 $B/bench/decode --engine $E --model /tmp/m20b --contexts 128,1024 --tokens 256 > /tmp/d.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(awk '$1 ~ /^(128|1024)$/ {printf "%s: %s tok/s (%s) ", $1, $3, $NF}' /tmp/d.txt)"
  { echo "== $v"; cat /tmp/d.txt; } >> $O/decode-ab.txt
done
for env in "LLMR_GPTOSS_MOE_TILED=0" "LLMR_GPTOSS_MOE_TILED=0 LLMR_GPTOSS_MOE_ASYNC=1"; do
  env $env timeout 90 $B/bench/decode --engine $EB --model /tmp/m20b --contexts 128,1024 --tokens 256 > /tmp/d.txt 2>&1
  echo "base $env rc=$? ${SECONDS}s: $(awk '$1 ~ /^(128|1024)$/ {printf "%s: %s tok/s (%s) ", $1, $3, $NF}' /tmp/d.txt)"
  { echo "== base $env"; cat /tmp/d.txt; } >> $O/decode-ab.txt
done
for v in wm cp base; do
  E=$EN; [ $v = base ] && E=$EB; CP=0; [ $v = cp ] && CP=1
  LLMR_GPTOSS_DOWN_CP=$CP timeout 60 ncu --clock-control none --cache-control none -k regex:"moe_down|gemv1_kernel" --launch-skip 100 -c 96 --csv \
    --metrics gpu__time_duration.sum $B/bench/decode --engine $E --model /tmp/m20b --contexts 128 --tokens 16 > /tmp/n.csv 2>&1
  echo "ncu $v rc=$? ${SECONDS}s: $(grep -E 'moe_down|gemv1' /tmp/n.csv | awk -F'","' '{k=$5; sub(/\(.*/,"",k); u=$(NF-1); gsub(/[",]/,"",$NF); s[k]+=$NF; n[k]++} END {for (k in s) printf "%s %d x %.3f %s; ", k, n[k], s[k]/n[k], u}')"
  { echo "== $v"; cat /tmp/n.csv; } >> /tmp/ncu-dur.csv
done
xz -9 < /tmp/ncu-dur.csv > $O/ncu-dur.csv.xz
# the defaults (the word-major walk) through the full gate; the cp.async kernel (DOWN_CP=1) through self-test, parity
# and batching beside it
LLMR_GPTOSS_DOWN_CP=1 timeout $((560 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-cp.txt 2>&1 &
G0=$!
timeout $((565 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels selftest parity batching serving" > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate with LLMR_GPTOSS_DOWN_CP=1 rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-cp.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
