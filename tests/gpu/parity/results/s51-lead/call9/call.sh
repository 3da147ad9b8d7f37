#!/bin/bash
# Session 51, call 9: down a tile a block by bulk copies (call9/down-tile.diff, LLMR_GPTOSS_DOWN_TILE: bit 1 batch 1, bit
# 2 the rows launches; 0 main's kernel). Call 7: down's warps load, wait (32-35% of the samples) and then compute with
# nothing in flight, 3 blocks of 8 rows an SM (80 registers), n rows in n waves. Here thread 0 asks for the 4 experts'
# tiles (16 rows, 23 + 1.4 KB each, contiguous in the tiled copy) with 8 bulk copies at the block's start, each expert
# on its own barrier; warp w sums experts w / 4 and 2 + w / 4 of row quad w % 4 from shared memory (md_load's units,
# md_chunks, md_reduce: the same bits), 2 blocks an SM, 100 KB in flight each.
# Predicted: down at 2 rows 20.1 -> ~14-15 us, at 1 row 11.7 -> ~10-11; 2 / 3 / 4 streams +3-5%, batch 1 +0-2%.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 60 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1; rc=$?
echo "rows checks rc=$rc: $(tail -1 $O/rows-checks.txt) ${SECONDS}s"; grep -E "^FAIL" $O/rows-checks.txt | cut -c1-220 | head -6
[ $rc = 0 ] || exit 0
timeout 50 tests/gpu/decode_ab.sh --contexts 128 --tokens 128 --log $O/decode-ab.txt t0=$EN:LLMR_GPTOSS_DOWN_TILE=0 \
  t1=$EN:LLMR_GPTOSS_DOWN_TILE=1 t0 t1 t1 t0 | tee $O/decode.txt
echo "decode ${SECONDS}s"
for v in 0 2 2 0; do
  LLMR_GPTOSS_DOWN_TILE=$v timeout 20 $B/bench/throughput --engine $EN --model $M20B --streams 2,3,4 > /tmp/tp.txt 2>&1
  echo "tile $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done | tee $O/ab.txt
echo "total ${SECONDS}s"
