#!/bin/bash
# Session 51, call 4: the q/k/v prologues' first pass of weights by bulk copy (LLMR_GPTOSS_QKV_TMA, default 3 in this
# build: bit 1 the one-token kernel, bit 2 the 2-row one; 0 the loads after the norm, main's form). Lane 0 of each warp
# asks for its row pair's first pass (2 x 3 KB) with two cp.async.bulk at the kernel's first instruction, into the
# warp's slot behind x; the pass then reads the slot. Call 3's ncu: qkv_rows<2> 16.7-17.5 us, DRAM 37%, 0.48 issued
# per scheduler, its warps waiting on loads; the one-token kernel 12.6 (session 48).
# Predicted: the norm (~3 us: x's loads, two barriers) hides behind the first pass's stream: qkv_rows<2> 17.5 ->
# ~12-13 us, the one-token kernel 12.6 -> ~10; batch 1 -2-3% a step, 2 streams +3-5% step rate.
# Alt "main" = main 9a6b425's engine. Then, if the rows checks pass and 3 is no slower than 0 at batch 1 (+0.3% at
# most) and 1% faster at 2 streams, the full gate on exactly this build.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT M=/tmp/B/alt/main/engines/gptoss_cuda/libgptoss_cuda.so
timeout 120 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1; rc=$?
echo "rows checks rc=$rc: $(tail -1 $O/rows-checks.txt) ${SECONDS}s"; grep -E "^FAIL|timing qkv|bulk copy" $O/rows-checks.txt | cut -c1-200 | head -16
timeout 150 tests/gpu/decode_ab.sh --log $O/decode-ab.txt t0=$EN:LLMR_GPTOSS_QKV_TMA=0 t3=$EN main=$M \
  t0 t3 main t3 t0 t3 t0 | tee $O/decode.txt
echo "decode ${SECONDS}s"
for round in 1 2; do
  for v in 0 3 main; do
    if [ $v = main ]; then X="" E=$M; else X="LLMR_GPTOSS_QKV_TMA=$v" E=$EN; fi
    env $X timeout 60 $B/bench/throughput --engine $E --model $M20B --streams 2,3,4 > /tmp/tp.txt 2>&1
    echo "tma $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
    { echo "== $v round $round"; cat /tmp/tp.txt; } >> $O/throughput.txt
  done
done | tee $O/ab.txt
echo "ab ${SECONDS}s (streams: out tok/s / step rate)"
d=$(awk '$1 == "t3" { v = $3; sub(/%/, "", v); print (v + 0 <= 0.3) ? 1 : 0 }' $O/decode.txt)
w=$(awk '/^tma 0/ { split($0, a, "2: "); split(a[2], b, " / "); s0 += b[2] + 0 } /^tma 3/ { split($0, a, "2: "); split(a[2], b, " / "); s3 += b[2] + 0 } END { print (s3 > 1.01 * s0) ? 1 : 0 }' $O/ab.txt)
echo "batch 1 no slower: $d; 2 streams +1%: $w"
if [ $rc = 0 ] && [ "$d" = 1 ] && [ "$w" = 1 ]; then
  timeout $((592 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
  echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
  grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-250
fi
echo "total ${SECONDS}s"
