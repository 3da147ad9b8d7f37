#!/bin/bash
# Session 50, call 1: session 49's prepared call (s49-lead/next/call.sh: where a 2-5-row batched step's time goes by
# part, q/k/v and o_proj on the row kernels at 5 rows, the 1 / 8 / 32 / 64-stream standing, the small steps' router
# over 8 blocks a row as alt "rrb" with its kernel check), plus each 2-row-step kernel's duration by ncu (2 streams),
# to split the MoE part into the router, gate_up and down. Build = main 03c8054.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
LLMR_GPTOSS_BATCH_PROFILE=1 timeout 90 $B/bench/throughput --engine $EN --model $M20B --streams 2,3,4,5 > $O/profile.txt 2>&1
echo "profile rc=$? ${SECONDS}s"; grep -A8 "^ *rows" $O/profile.txt | head -40
timeout 150 tests/gpu/ncu_durations.sh --skip 1500 --count 300 --csv $O/ncu-2rows.csv \
  'qkv_rows|gemv1_rows|attention_rows|moe_router|ring_kernel|down_decode|lm_head|gemm|rows' -- \
  $B/bench/throughput --engine $EN --model $M20B --streams 2 > $O/ncu-2rows.txt 2>&1
echo "ncu rc=$? ${SECONDS}s"; cat $O/ncu-2rows.txt | tr ';' '\n' | head -30
for v in d q5 d q5; do
  X=""; [ $v = q5 ] && X="LLMR_GPTOSS_BATCH_QKV_ROWS=5 LLMR_GPTOSS_BATCH_O_ROWS=5"
  env $X timeout 60 $B/bench/throughput --engine $EN --model $M20B --streams 5,6 > /tmp/tp-$v.txt 2>&1
  echo "$v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp-$v.txt | awk '{ printf "%s streams %s out, step rate %s; ", $1, $5, $8 }')"
  { echo "== $v"; cat /tmp/tp-$v.txt; } >> $O/rows5.txt
done
echo "rows5 ${SECONDS}s"
timeout 90 $B/bench/throughput --engine $EN --model $M20B --streams 1,8,32,64 > $O/standing.txt 2>&1
echo "standing rc=$?: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' $O/standing.txt | awk '{ printf "%s streams %s out, step rate %s; ", $1, $5, $8 }') ${SECONDS}s"
E=engines/gptoss_cuda/libgptoss_cuda.so R=/tmp/B/alt/rrb/$E
if [ -f $R ]; then
  timeout 240 /tmp/B/alt/rrb/tests/gpu/gptoss_kernels > $O/rrb-kernels.txt 2>&1
  echo "rrb kernels rc=$? (test_moe_rows: $(grep -c "^ok   moe rows" $O/rrb-kernels.txt) ok; $(grep -c '^FAIL' $O/rrb-kernels.txt) FAIL) ${SECONDS}s"
  tail -2 $O/rrb-kernels.txt
  for v in 1 8 1 8; do
    LLMR_GPTOSS_ROUTER_ROWS_BLOCKS=$v timeout 60 $B/bench/throughput --engine $R --model $M20B --streams 2,4 > /tmp/tp-r$v.txt 2>&1
    echo "router blocks $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp-r$v.txt | awk '{ printf "%s streams %s out, step rate %s; ", $1, $5, $8 }')"
    { echo "== r$v"; cat /tmp/tp-r$v.txt; } >> $O/rrb-throughput.txt
  done
fi
echo "total ${SECONDS}s"
