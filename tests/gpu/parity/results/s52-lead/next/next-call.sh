#!/bin/bash
# Prepared in session 52 for the next session (no device time was left to run either): two diffs, both compiled, never
# run on a GPU.
#  1. next/rows-graph.diff (engine): the 2-row batched step as one CUDA graph (scheduler.cu rows_step;
#     LLMR_GPTOSS_ROWS_GRAPH, default 1, 0 = launches as before). Since c29e2b2 every launch of a 2-row step below
#     split_from (1,536) keys is fixed by n alone (the batch-1 kernels or their row forms: no grid sized by the positions,
#     no cuBLAS), its inputs at fixed device addresses (the staged tokens, positions, block tables), its output
#     m->blogits: one graph per model, captured at the second such step. Why it may pay: session 51's ncu sums of a 2-row
#     layer's kernels (x 24, + lm_head) come to ~2.51-2.55 ms against the 2.52 ms step, while the batch-1 graph runs
#     ~3-5% under its kernels' sum (1.686 ms against ~1.73-1.77). Predicted: a 2-row step -2-4%, 2 streams' step rate
#     +1.5-2.5%, 3 streams +0.5-1%, nothing from 4 rows.
#  2. next/two-rows-lone.diff (tests): gptoss_batching checks that a request beside one other gives its lone tokens and
#     log-probabilities bit for bit (2-row steps below split_from: each part is its lone kernel's, kernel-checked); the
#     gate's batching steps (tiny and 20b) then run it, with the graph of 1 on.
# Build: git apply tests/gpu/parity/results/s52-lead/next/rows-graph.diff tests/gpu/parity/results/s52-lead/next/two-rows-lone.diff;
#   make; tests/gpu/pack.sh --build build --out .gpu-lead/pkg. Run with carry [".gpu-lead/pkg"] (~520 s).
# Land 1 if the A/B gains and the gate passes (the gate ran on exactly that build); land 2 if its checks pass (tiny and
# 20b). If 2 fails, its message names the first step that differs; run it with LLMR_GPTOSS_ROWS_GRAPH=0 to tell the
# graph from the path.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
for v in 0 1 0 1; do
  LLMR_GPTOSS_ROWS_GRAPH=$v timeout 40 $B/bench/throughput --engine $EN --model $M20B --streams 2,3 > /tmp/tp.txt 2>&1
  echo "rows_graph $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }') $(grep -c 'graph is off' /tmp/tp.txt) capture failures"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done | tee $O/ab.txt
echo "ab ${SECONDS}s"
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -6 | cut -c1-250
grep -h "beside request 1\|graph is off" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-250
echo "total ${SECONDS}s"
