#!/bin/bash
# Prepared in session 49 for the next session (measurements only, the build = main as session 49 left it): where a
# 2-5-row batched step's time goes now that its experts take one gate_up and one down launch for all rows, and whether
# q/k/v and o_proj should stay on the row kernels at 5 rows (BATCH_QKV_ROWS, BATCH_O_ROWS 4 -> 5) now that the experts
# do. LLMR_GPTOSS_BATCH_PROFILE=1 adds an event after each part of every layer (q/k/v, attention, o_proj, the MoE
# block; bench/throughput prints them per row bucket), which costs host time but splits the GPU's. Then
# router-rows-blocks.diff (prepared, compile-checked, not yet run): the small steps' router over 8 blocks a row
# (LLMR_GPTOSS_ROUTER_ROWS_BLOCKS; one SM a row pulls the whole 184 KB router today), the same bits (its kernel check
# is in the diff). Pack its tree as alt "rrb": cp -a main /tmp/rrb, git apply the diff there, make the engine, then
# tests/gpu/pack.sh --alt rrb:/tmp/rrb. Predicted 2-5-row steps -1-4% (~2-5 us of a layer's ~10 us router).
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
LLMR_GPTOSS_BATCH_PROFILE=1 timeout 90 $B/bench/throughput --engine $EN --model $M20B --streams 2,3,4,5 > $O/profile.txt 2>&1
echo "profile rc=$? ${SECONDS}s"; grep -A8 "^ *rows" $O/profile.txt | head -40
for v in d q5 d q5; do
  X=""; [ $v = q5 ] && X="LLMR_GPTOSS_BATCH_QKV_ROWS=5 LLMR_GPTOSS_BATCH_O_ROWS=5"
  env $X timeout 60 $B/bench/throughput --engine $EN --model $M20B --streams 5,6 > /tmp/tp-$v.txt 2>&1
  echo "$v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp-$v.txt | awk '{ printf "%s streams %s out, step rate %s; ", $1, $5, $8 }')"
  { echo "== $v"; cat /tmp/tp-$v.txt; } >> $O/rows5.txt
done
timeout 90 $B/bench/throughput --engine $EN --model $M20B --streams 1,8,32,64 > $O/standing.txt 2>&1 # the standing (64 streams not rerun in session 49)
echo "standing rc=$?: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' $O/standing.txt | awk '{ printf "%s streams %s out, step rate %s; ", $1, $5, $8 }')"
E=engines/gptoss_cuda/libgptoss_cuda.so R=/tmp/B/alt/rrb/$E
if [ -f $R ]; then
  timeout 240 /tmp/B/alt/rrb/tests/gpu/gptoss_kernels > $O/rrb-kernels.txt 2>&1; echo "rrb kernels rc=$? (test_moe_rows: $(grep -c "^ok   moe rows" $O/rrb-kernels.txt) ok)"
  for v in 1 8 1 8; do
    LLMR_GPTOSS_ROUTER_ROWS_BLOCKS=$v timeout 60 $B/bench/throughput --engine $R --model $M20B --streams 2,4 > /tmp/tp-r$v.txt 2>&1
    echo "router blocks $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp-r$v.txt | awk '{ printf "%s streams %s out, step rate %s; ", $1, $5, $8 }')"
  done
fi
echo "total ${SECONDS}s"
