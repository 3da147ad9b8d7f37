#!/bin/bash
# Session 51, call 6: what down would take with ~2 instead of ~4 instructions a weight (a speed-of-light experiment,
# wrong results, not for main). Alt "dq" = main + call6/down-dp4a-sol.diff: every one-token down (T = 1, the rows
# launches too) runs the ring gate_up's dp4a consumer arithmetic (mq_chunk's: two mxfp4_i8x8 a word pair, 12 dp4a a
# 32-value chunk and row, the chunk's factor and scale) against its activation read AS IF split (its fp32 bytes:
# garbage values, the same memory traffic as a real split vector). Calls 2-3: the rows down issues on 67% of its
# slots; session 19: the T = 1 down is bound by its arithmetic.
# Predicted: down at 1 row 11.7 -> ~8-9 us, at 2 rows 20.1 -> ~13-15 us (ncu); batch 1 -3-4% a step; 2 streams +5-7%.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT D=/tmp/B/alt/dq/engines/gptoss_cuda/libgptoss_cuda.so
timeout 120 tests/gpu/decode_ab.sh --log $O/decode-ab.txt main=$EN dq=$D main dq dq main main dq | tee $O/decode.txt
echo "decode ${SECONDS}s"
for round in 1 2; do
  for v in main dq; do
    if [ $v = main ]; then E=$EN; else E=$D; fi
    timeout 60 $B/bench/throughput --engine $E --model $M20B --streams 2,3,4 > /tmp/tp.txt 2>&1
    echo "$v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
    { echo "== $v round $round"; cat /tmp/tp.txt; } >> $O/throughput.txt
  done
done | tee $O/ab.txt
echo "ab ${SECONDS}s (streams: out tok/s / step rate)"
for v in main dq; do
  if [ $v = main ]; then E=$EN; else E=$D; fi
  timeout 90 tests/gpu/ncu_durations.sh --skip 1500 --count 200 --csv $O/ncu-$v.csv 'down_decode' -- \
    $B/bench/throughput --engine $E --model $M20B --streams 2 > $O/ncu-$v.txt 2>&1
  echo "ncu $v rc=$? ${SECONDS}s: $(tr ';' '\n' < $O/ncu-$v.txt | grep down | head -4 | tr '\n' ';')"
done
echo "total ${SECONDS}s"
