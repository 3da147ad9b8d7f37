#!/bin/bash
# Prepared in session 45 (not run: its device time was spent). The batch-1 attention's V and K loads in one wave each.
# Session 45 call 3's SASS of attention_split_kernel (s45-lead/call3/sass-attention.tar.xz) shows why the kernel is a
# chain of round trips: the V loads `v0[jj] = jj < nj ? v[lane] : 0` became predicated loads, each followed by a move
# that waits for it, so the 64 went out in waves of 10-16 (4-5 round trips); the K row's 16 loads went out in waves
# into 3-5 rotating register quads, each behind the last one's products. Call 2's sink loaded early changed nothing but
# that allocation and cost 1.9 us (7.29 -> 9.16); with the K loads forced into one wave (kdep) the same build was
# 1.4 us faster (7.77), so the K waves alone are worth ~1.4 us. Same bits in every form:
#   kd   (attention-kd.diff, 234 registers): the K row's 16 loads before its first product (dep & zero), the sink late
#        as in main. Predicted: 7.29 -> ~6.3-6.8 us
#   vl   (attention-vl.diff, 176 registers): the V loads unpredicated (every lane's pointer is a key's: past nj, key
#        j0's), the zero for keys past nj selected where used, so fmaf(p, 0, a) as before. Predicted: -0.5-1.5 us
#   vlk  (attention-vlk.diff, 218 registers): vl + kd. Predicted: 7.29 -> ~5-6 us, batch-1 +1.5-3%
#   vlqk (attention-vlqk.diff, 158 registers): vlk + each warp's q in shared memory (frees 64 registers)
# Preparation: for each N, in its own clone of main (681e1f2 or later), git apply attention-N.diff and make (the
# kernel checks are built with the engine's .cu files included, so each tree's tests/gpu/gptoss_kernels checks its
# own form); then tests/gpu/pack.sh --out .gpu-lead/pkg --alt kd:T1 --alt vl:T2 --alt vlk:T3 --alt vlqk:T4; copy this
# file into the pkg; carry .gpu-lead/pkg. ~500 s. If one wins, land it: its build then needs the full gate.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
eng_of() { case $1 in main) echo "$EN" ;; *) echo "/tmp/B/alt/$1/engines/gptoss_cuda/libgptoss_cuda.so" ;; esac; }
K=_Z22attention_split_kernelPKf9gptoss_kvPKtiPKiiiiPfi
for v in main kd vl vlk vlqk; do cuobjdump -sass -fun $K $(eng_of $v) > /tmp/sass-$v.txt 2>&1 || echo "sass $v failed"
  echo "sass $v: $(grep -c 'LD\.E \|LDG\.E ' /tmp/sass-$v.txt) scalar loads"; done
tar -C /tmp -cJf $O/sass-attention.tar.xz sass-main.txt sass-kd.txt sass-vl.txt sass-vlk.txt sass-vlqk.txt
BEST= BT=999999
for v in main kd vl vlk vlqk; do
  S=$(timeout 90 tests/gpu/ncu_durations.sh --csv /tmp/n.csv "attention_split" -- \
    $B/bench/decode --engine $(eng_of $v) --model $M20B --contexts 128,1024 --tokens 16)
  echo "ncu $v rc=$? ${SECONDS}s: $S"
  { echo "== $v"; cat /tmp/n.csv; } >> /tmp/ncu-dur.csv
  ns=$(echo "$S" | sed -n 's/.*attention_split_kernel [0-9]* x \([0-9]*\) ns.*/\1/p')
  if [ $v != main ] && [ -n "$ns" ] && [ "$ns" -lt "$BT" ]; then BEST=$v BT=$ns; fi
done
xz -9 < /tmp/ncu-dur.csv > $O/ncu-dur.csv.xz
for v in main kd vl vlk vlqk vlqk vlk vl kd main; do
  timeout 60 $B/bench/decode --engine $(eng_of $v) --model $M20B --contexts 128,1024 --tokens 256 > /tmp/d.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(awk '$1 ~ /^(128|1024)$/ {printf "%s: %s (%s) ", $1, $3, $NF} /^context .* a token/ {printf "step %s ", $10}' /tmp/d.txt)"
  { echo "== $v"; cat /tmp/d.txt; } >> $O/decode-ab.txt
done
for v in main $BEST; do
  timeout 90 $B/bench/throughput --engine $(eng_of $v) --model $M20B --streams 1,8,32,64 > /tmp/t.txt 2>&1
  echo "throughput $v rc=$? ${SECONDS}s"; grep -E "^ +(1|8|32|64) +[0-9]+ +[0-9]+ " /tmp/t.txt
  { echo "== $v"; cat /tmp/t.txt; } >> $O/throughput.txt
done
echo "the fastest by ncu: $BEST ($BT ns): the full gate on it"
rm -rf /tmp/Bv && cp -r $B /tmp/Bv && cp $(eng_of $BEST) /tmp/Bv/engines/gptoss_cuda/ &&
  cp /tmp/B/alt/$BEST/tests/gpu/* /tmp/Bv/tests/gpu/
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build /tmp/Bv --out /tmp/g --full > $O/gate-$BEST.txt 2>&1
echo "gate ($BEST) rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-$BEST.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
