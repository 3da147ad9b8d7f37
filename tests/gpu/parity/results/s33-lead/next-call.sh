#!/bin/bash
# Prepared in session 33 for the next session's first GPU call (not run). 1) Where the T = 1 kernels lose on the tiled
# layout (calls 4-5: +1.3-1.9% at batch 1 on the checkpoint's): the launch-by-launch profile with the experts tiled in
# place (the default) and in the checkpoint's layout (LLMR_GPTOSS_MOE_TILED=0), A B A B. By the code, down's 2-rows-a-warp
# loads are the suspect (moe_decode.cu md_rows, TILED: a warp's load is 8 pieces of 64 bytes 1 KB apart where the
# checkpoint's layout gives 512 bytes in one piece). 2) With down-tiled-ldg.diff built beside main (those loads through
# L1; same values, same bits), bench/decode A B A B against main. 3) The full gate on main: session 33's review mends
# (c6dffa4) ran through the kernels and the self-test only. Build main into build/; build the diff in a worktree
# (git worktree add /tmp/ldg && cd /tmp/ldg && git apply <this dir>/down-tiled-ldg.diff && make -j2); pack both:
# tests/gpu/pack.sh --out .gpu-lead/pkg --alt ldg:/tmp/ldg, and carry .gpu-lead/pkg.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for r in 1 2; do for v in 2 0; do
  LLMR_GPTOSS_PROFILE=1 LLMR_GPTOSS_MOE_TILED=$v timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 --tokens 64 > /tmp/p.txt 2>&1
  echo "profile tiled=$v run $r rc=$?"; grep -E '^  (fused|attention|o_proj|MXFP4|lm_head|total)' /tmp/p.txt
  { echo "== tiled=$v run $r"; cat /tmp/p.txt; } >> $O/profile-all.txt
done; done
ALT=/tmp/B/alt/ldg/engines/gptoss_cuda/libgptoss_cuda.so
if [ -f $ALT ]; then for r in 1 2; do for v in main ldg; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $v = ldg ] && E=$ALT
  timeout 40 $B/bench/decode --engine $E --model /tmp/m20b --contexts 128,1024 --tokens 64 > /tmp/d.txt 2>&1
  echo "decode $v run $r rc=$?: $(grep -E '^ +(128|1024) ' /tmp/d.txt | awk '{printf "%s %s (%s) ", $1, $3, $NF}')"
done; done; fi
timeout 440 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-250 | head -10
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
echo "total ${SECONDS}s"
