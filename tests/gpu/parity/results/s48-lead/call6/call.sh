#!/bin/bash
# Session 48, call 6 (bounds, measurements only; main 3b6e9d0): is a tensor-core down fed a pre-split activation
# worth building? Calls 3-5: the counter form's steady state is ~2x the FFMA down's rate per SM, but each CTA has only
# one or two stages, so its start (the activation split) and its tail bound it. Alt "r1" = call 3's counter form;
# "ns" = r1 with LLMR_GPTOSS_DR_NOSPLIT=1 (the split skipped: wrong results, the bound of a down whose split vector
# comes ready-made); "gq" = main with the T = 1 gate_up's tiles taken in quads (4 consecutive tiles a CTA, so one CTA
# writes a whole 32-value chunk of the activation and could split it: gate-up-quads.diff; the same bits). Predicted:
# ns 1.5-3 us below r1's 12.25; gq's gate_up within +-0.3 us of main's 17.0.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
timeout 200 tests/gpu/decode_ab.sh --log $O/decode-ab.txt main=$EN r1=$A/ns/$E ns=$A/ns/$E:LLMR_GPTOSS_DR_NOSPLIT=1 \
  gq=$A/gq/$E main r1 ns gq gq ns r1 main
echo "ab ${SECONDS}s"
for v in main ns gq; do
  EE=$EN; [ $v = ns ] && EE=$A/ns/$E; [ $v = gq ] && EE=$A/gq/$E
  echo "ncu $v: $( ( [ $v = ns ] && export LLMR_GPTOSS_DR_NOSPLIT=1; timeout 60 tests/gpu/ncu_durations.sh --csv /tmp/ncu-$v.csv \
    'gate_up_ring|moe_down' -- $B/bench/decode --engine $EE --model $M20B --contexts 128 --tokens 16) )"
done
echo "total ${SECONDS}s"
