#!/bin/bash
# Prepared in session 45, to land attention-vlqk.diff. Session 45's call 4 measured the four forms here against main
# 69058d3 (ncu at real clocks, attention_split_kernel; bench/decode steps at 128 / 1,024 keys, two runs each):
#   main 7.42 us, 1.757 / 1.7955 ms; kd 8.02, 1.7675 / 1.8005; vl 6.88, 1.744 / 1.7865; vlk 6.34, 1.7365 / 1.781;
#   vlqk 6.00 us, 1.7295 / 1.777 ms (-1.6% / -1.0%; 571.6-572.1 against 562.9-563.0 tok/s at 128 keys).
# Same bits by construction (load order and where a zero is selected; the same fmaf sequence). It has not been
# gated: the session's device time was spent. So: in a clone of main, git apply attention-vlqk.diff and make (the
# build); tests/gpu/pack.sh --out .gpu-lead/pkg --alt main:MAIN_TREE (main's built tree, for the A/B); copy this file
# into the pkg; carry .gpu-lead/pkg. ~480 s. If the gate passes, commit the diff (with its figures) and record them
# in performance.md.
# Also, if the package has an alt "dng" (a clone with attention-vlqk.diff and down-ng.diff applied, built; pack.sh
# --alt dng:TREE): a probe of the T = 1 down with its activation loads unpredicated at G = 1 (a group always has a
# pair, so `i >= ng` can never hold there; the same bits). Its PTX has 24 predicated instructions instead of 84; ptxas
# gives the 2-row form 80 registers (76 before) and the 4-row form 44 bytes of spills at its 80-register cap, so it
# runs both (LLMR_GPTOSS_DOWN_R4=0 and 1). No prediction beyond "faster if the loads then go out together": read the
# SASS it dumps first.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
EM=/tmp/B/alt/main/engines/gptoss_cuda/libgptoss_cuda.so
for v in new main main new new main; do
  E=$EN; [ $v = main ] && E=$EM
  timeout 60 $B/bench/decode --engine $E --model $M20B --contexts 128,1024 --tokens 256 > /tmp/d.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(awk '$1 ~ /^(128|1024)$/ {printf "%s: %s (%s) ", $1, $3, $NF} /^context .* a token/ {printf "step %s ", $10}' /tmp/d.txt)"
  { echo "== $v"; cat /tmp/d.txt; } >> $O/decode-ab.txt
done
ED=/tmp/B/alt/dng/engines/gptoss_cuda/libgptoss_cuda.so
if [ -f $ED ]; then
  cuobjdump -sass -fun '_Z22moe_down_decode_kernelILi1ELi4ELb1ELi90ELb1EEvPKfPKiiS1_PKhS5_PKtiiPfi' $ED > /tmp/sass-dng.txt 2>&1
  xz -9 < /tmp/sass-dng.txt > $O/sass-down-dng.txt.xz
  for v in new dng dng2 new2 new dng dng2 new2; do
    E=$EN; case $v in dng*) E=$ED ;; esac; R4=1; case $v in *2) R4=0 ;; esac
    LLMR_GPTOSS_DOWN_R4=$R4 timeout 60 $B/bench/decode --engine $E --model $M20B --contexts 128,1024 --tokens 256 > /tmp/d.txt 2>&1
    echo "$v rc=$? ${SECONDS}s: $(awk '$1 ~ /^(128|1024)$/ {printf "%s: %s (%s) ", $1, $3, $NF} /^context .* a token/ {printf "step %s ", $10}' /tmp/d.txt)"
    { echo "== $v"; cat /tmp/d.txt; } >> $O/decode-dng.txt
  done
  for v in new dng dng2; do
    E=$EN; [ $v != new ] && E=$ED; R4=1; [ $v = dng2 ] && R4=0
    echo "ncu $v: $(LLMR_GPTOSS_DOWN_R4=$R4 timeout 60 tests/gpu/ncu_durations.sh moe_down -- $B/bench/decode --engine $E \
      --model $M20B --contexts 128 --tokens 16)"
  done
fi
timeout 90 $B/bench/throughput --engine $EN --model $M20B --streams 1,8,32,64 > $O/throughput.txt 2>&1
echo "throughput rc=$? ${SECONDS}s"; grep -E "^ +(1|8|32|64) +[0-9]+ +[0-9]+ " $O/throughput.txt
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
