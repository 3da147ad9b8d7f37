#!/bin/bash
# Session 48, call 3 (measurements): call 2's tensor-core down was slower than the FFMA one (12.97 against 11.99 us;
# the step +0.8%). Two suspects: its tail (each row's lane a full __threadfence, then the atomic, then the reads: three
# round trips after the last stage) and its start (every CTA asks for both stages at once, so its first lands late).
# Build "r1" (main here): the count an atom.acq_rel, no fence. Alt "r2": r1 + each CTA's second copy asked for once its
# first has landed (stagger-first-stages.diff). "ffma" = LLMR_GPTOSS_DOWN_RING=0. Predicted: r1 -0.5-1 us, r2 another
# -1-2 us (down ~10-11 us). Then the T = 1 MoE block's checks (with the new ring tests) and r2's stalls by SASS line.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
timeout 200 tests/gpu/decode_ab.sh --log $O/decode-ab.txt ffma=$EN:LLMR_GPTOSS_DOWN_RING=0 r1=$EN r2=$A/r2/$E \
  ffma r1 r2 r2 r1 ffma ffma r1 r2
echo "ab ${SECONDS}s"
for v in ffma r1 r2; do
  EE=$EN; [ $v = r2 ] && EE=$A/r2/$E
  echo "ncu $v: $( ( [ $v = ffma ] && export LLMR_GPTOSS_DOWN_RING=0; timeout 60 tests/gpu/ncu_durations.sh --csv /tmp/ncu-$v.csv \
    'moe_down' -- $B/bench/decode --engine $EE --model $M20B --contexts 128 --tokens 16) )"
done
echo "ncu ${SECONDS}s"
timeout 120 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-decode.txt 2>&1; echo "checks rc=$? ${SECONDS}s"
grep -h "FAIL\|down T=1\|timing down\|checks," $O/moe-decode.txt | cut -c1-220
timeout 150 tests/gpu/ncu_source.sh --out $O r2down 'moe_down_ring' -- $B/bench/decode --engine $A/r2/$E --model $M20B \
  --contexts 128 --tokens 16 2>&1 | tail -30
rm -f $O/*.ncu-rep.xz
echo "total ${SECONDS}s"
