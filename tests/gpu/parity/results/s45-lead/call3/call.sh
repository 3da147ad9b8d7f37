#!/bin/bash
# Session 45, call 3 (the last ~770 s of device time): the full gate on exactly the build that lands (main +
# ring-tiled-offsets + the 4-row T = 1 down as the default), and the batch-1 attention's loads, as alt engines (all the
# same bits as main; call 2's change, the sink and 64 page ids loaded with the position, was slower: 7.26 -> 9.39 us):
#   sink   : only the sink loaded with the position (call 2's first part)
#   tab    : only the 64 page ids loaded with the position, a key's page by shuffle (call 2's second part)
#   kdep   : sink + the K row's 16 loads all before its first product (dep & zero; 232 registers): session 43's page
#            has ptxas issuing them in two waves, the second behind the first's products
#   qs     : sink + each warp's q in shared memory (132 registers instead of 175)
#   qskdep : qs + kdep (164 registers)
# Predicted: sink -0.3-0.6 us, kdep and qskdep -0.5-1.0 us, qs 0-0.5. The fastest of kdep / qs / qskdep by ncu gets
# the gate's kernels, self-test, parity and tiny batching beside main's full gate.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
eng_of() { case $1 in main) echo "$EN" ;; *) echo "/tmp/B/alt/$1/engines/gptoss_cuda/libgptoss_cuda.so" ;; esac; }
K=_Z22attention_split_kernelPKf9gptoss_kvPKtiPKiiiiPfi
for v in main sink tab kdep qs qskdep; do cuobjdump -sass -fun $K $(eng_of $v) > /tmp/sass-$v.txt 2>&1 || echo "sass $v failed"; done
tar -C /tmp -cJf $O/sass-attention.tar.xz sass-main.txt sass-sink.txt sass-tab.txt sass-kdep.txt sass-qs.txt sass-qskdep.txt
BEST= BT=999999
for v in main sink tab kdep qs qskdep; do
  S=$(timeout 90 tests/gpu/ncu_durations.sh --csv /tmp/n.csv "attention_split" -- \
    $B/bench/decode --engine $(eng_of $v) --model $M20B --contexts 128 --tokens 16)
  echo "ncu $v rc=$? ${SECONDS}s: $S"
  { echo "== $v"; cat /tmp/n.csv; } >> /tmp/ncu-dur.csv
  ns=$(echo "$S" | sed -n 's/.*attention_split_kernel [0-9]* x \([0-9]*\) ns.*/\1/p')
  case $v in kdep|qs|qskdep) if [ -n "$ns" ] && [ "$ns" -lt "$BT" ]; then BEST=$v BT=$ns; fi ;; esac
done
xz -9 < /tmp/ncu-dur.csv > $O/ncu-dur.csv.xz
for v in main sink tab kdep qs qskdep qskdep qs kdep tab sink main; do
  timeout 60 $B/bench/decode --engine $(eng_of $v) --model $M20B --contexts 128,1024 --tokens 256 > /tmp/d.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(awk '$1 ~ /^(128|1024)$/ {printf "%s: %s (%s) ", $1, $3, $NF} /^context .* a token/ {printf "step %s ", $10}' /tmp/d.txt)"
  { echo "== $v"; cat /tmp/d.txt; } >> $O/decode-ab.txt
done
echo "the fastest by ncu: $BEST ($BT ns): its gate beside main's"
rm -rf /tmp/Bv && cp -r $B /tmp/Bv && cp $(eng_of $BEST) /tmp/Bv/engines/gptoss_cuda/ &&
  cp /tmp/B/alt/$BEST/tests/gpu/gptoss_kernels /tmp/Bv/tests/gpu/
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build /tmp/Bv --out /tmp/gv --steps "kernels selftest parity batching" > $O/gate-$BEST.txt 2>&1 &
GV=$!
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate (main) rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $GV; echo "gate ($BEST) rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-$BEST.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/gv/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
