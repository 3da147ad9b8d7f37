#!/bin/bash
# Prepared in session 53 for the next session (no device time was left to run it): one call, ~4-5 minutes.
#  1. next/e5-tiles2.diff (engine + kernel checks; compiled, never run on a GPU): the e5m2 copy's launches with 16-pair
#     tiles at one CTA an SM (mxfp4_mma_stream_e5_kernel<4, 2, 1>: 16 warps, 126 registers, no spills, 189 KB of
#     staging at the 20b's K), opt-in by LLMR_GPTOSS_MOE_E5_TILES=2; the default launch's cubin is byte for byte main's.
#     Why: at 48-64 rows an expert averages 6-8.5 pairs, so about half of the touched experts have 9-16 and today two
#     CTAs (8-pair tiles) each read their weights and turn them into fp16 pairs; the copy's launch runs at 3.3 TB/s of
#     its bytes at 48-64 rows against 3.7-3.8 at 24-32 (session 53 call 2). Against it: half the warps an SM (16 instead
#     of 32, a 4-deep ring where mode 2 has 2), which is what sank the MXFP4 form's 16-pair tiles (0.311-0.317 ms
#     against 0.248 at 64 rows, session 52). Predicted: 64 rows 0.227 -> 0.20-0.24 ms (either way), 48 rows level or
#     worse. The same bits (ms_word_products_f16 per n8 tile, as with 8-pair tiles): the new kernel check says so.
#  2. The per-row experts' handover to the tensor-core ones (BATCH_MOE_PER_ROW 5 / MOE_MMA_MIN_ROWS 6 since session
#     49; the per-row kernels gained 3-5% since, sessions 50-52): 6 and 7 rows per row too, at 5-8 streams. These change
#     bits (another path), so a winner needs the full gate before it lands.
#  3. The e5m2 copy's threshold around session 53's 48 rows (call 2's kernel timings cross at ~48; the step's experts
#     are lighter than uniform routing): 40 and 56 against 48 at 40 and 56 streams (the same bits: no gate needed).
# Build: git apply tests/gpu/parity/results/s53-lead/next/e5-tiles2.diff; make; tests/gpu/pack.sh --build build --out
#   .gpu-lead/pkg. Run with carry [".gpu-lead/pkg"].
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 150 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/moe-mma-checks.txt 2>&1
echo "moe-mma-checks rc=$? ${SECONDS}s: $(tail -1 $O/moe-mma-checks.txt)"
grep -h "16-pair tiles\|FAIL" $O/moe-mma-checks.txt | head -8 | cut -c1-200
timeout 90 $B/tests/gpu/gptoss_kernels --moe-timing 32 48 64 > $O/moe-timing.txt 2>&1
echo "moe-timing rc=$? ${SECONDS}s"
grep "^time experts" $O/moe-timing.txt | sed 's/; /\n   /g' | grep -E "^time|e5m2 copy|the same with the tiled"
timeout 150 tests/gpu/throughput_ab.sh --streams 32,48,64 --log $O/tp-e5tiles.txt t1=$EN t2=$EN:LLMR_GPTOSS_MOE_E5_TILES=2 \
  t1 t2 t2 t1 t2 t1 > $O/ab-e5tiles.txt 2>&1
echo "e5 tiles A/B rc=$? ${SECONDS}s"; tail -30 $O/ab-e5tiles.txt
timeout 150 tests/gpu/throughput_ab.sh --streams 5,6,7,8 --log $O/tp-perrow.txt pr5=$EN \
  pr6=$EN:LLMR_GPTOSS_BATCH_MOE_PER_ROW=6:LLMR_GPTOSS_MOE_MMA_MIN_ROWS=7 \
  pr7=$EN:LLMR_GPTOSS_BATCH_MOE_PER_ROW=7:LLMR_GPTOSS_MOE_MMA_MIN_ROWS=8 pr5 pr6 pr7 pr7 pr6 pr5 > $O/ab-perrow.txt 2>&1
echo "per-row A/B rc=$? ${SECONDS}s"; tail -28 $O/ab-perrow.txt
timeout 120 tests/gpu/throughput_ab.sh --streams 40,56 --log $O/tp-e5rows.txt r48=$EN r40=$EN:LLMR_GPTOSS_MOE_E5_MIN_ROWS=40 \
  r56=$EN:LLMR_GPTOSS_MOE_E5_MIN_ROWS=56 r48 r40 r56 r56 r40 r48 > $O/ab-e5rows.txt 2>&1
echo "e5 rows A/B rc=$? ${SECONDS}s"; tail -16 $O/ab-e5rows.txt
echo "total ${SECONDS}s"
