#!/bin/bash
# Session 50, call 3: the landing candidate N2 = main 4f37f45 + the decode graph's lm_head taking the greedy argmax
# (gptoss_gemv1_argmax: each block's part, the last block merges them and writes the id to m->tok and a pinned host
# word of the position's parity), so a lone greedy row without penalties needs no sampler launch
# (LLMR_GPTOSS_GRAPH_ARGMAX=0 goes back). Session 49 put the sampler at 8-12 us of a 1.69 ms token.
# Predicted: the token -0.4-0.6% (sampling ~0; the lm_head +1-3 us for its parts and merge), the decode step
# +0.1-0.2%. Alt base = 4f37f45. Then the full gate on exactly N2 if its kernel checks pass.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT E=engines/gptoss_cuda/libgptoss_cuda.so
timeout 120 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1; rc=$?
echo "rows checks rc=$rc: $(tail -1 $O/rows-checks.txt) ${SECONDS}s"; grep -E "^FAIL|argmax|lm_head" $O/rows-checks.txt | cut -c1-220
timeout 150 tests/gpu/decode_ab.sh --log $O/decode-ab.txt base=/tmp/B/alt/base/$E N2=$EN off=$EN:LLMR_GPTOSS_GRAPH_ARGMAX=0 \
  base N2 off N2 base off N2 base | tee $O/ab.txt
grep -h "a token" $O/decode-ab.txt > $O/token-split.txt
echo "ab ${SECONDS}s"
timeout 60 $B/bench/throughput --engine $EN --model $M20B --streams 1,2 > $O/throughput.txt 2>&1
echo "throughput rc=$?: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' $O/throughput.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }') ${SECONDS}s"
if [ $rc = 0 ]; then
  timeout $((592 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
  echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
  grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-250
fi
echo "total ${SECONDS}s"
