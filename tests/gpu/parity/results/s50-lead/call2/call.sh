#!/bin/bash
# Session 50, call 2: the landing candidate N = main + the small steps' router over 8 blocks a row (s49's
# router-rows-blocks.diff, default 8) + the row kernels' prologues (gemv1_rows and qkv_rows stage x with all of a
# thread's loads in flight and fetch their first row's bias / residual / RoPE constants / positions before the
# sums, as the one-token kernels do). Call 1's ncu put the 2-row step's qkv_rows at 19.7 us against the one-token
# kernel's 12.6 for the same 29.5 MB, gemv1_rows 11.6, the router 8.8 a layer.
# Predicted: qkv_rows<2> 19.7 -> ~15 us, gemv1_rows<2> 11.6 -> ~10.5; a 2-row step -4-6% (rrb's -1.5% included).
# Alt rrb = main + the router diff with its default 1 block a row (= main unless LLMR_GPTOSS_ROUTER_ROWS_BLOCKS=8).
# Then the full gate on exactly N, if its row checks pass.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT R=/tmp/B/alt/rrb/engines/gptoss_cuda/libgptoss_cuda.so
timeout 120 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1; rc=$?
echo "rows checks rc=$rc: $(tail -1 $O/rows-checks.txt) ${SECONDS}s"; grep -E "^FAIL|timing" $O/rows-checks.txt | cut -c1-200
timeout 100 tests/gpu/ncu_durations.sh --skip 1500 --count 300 --csv $O/ncu-2rows.csv \
  'qkv_rows|gemv1_rows|attention_rows|moe_router|ring_kernel|down_decode|lm_head|gemm|rows' -- \
  $B/bench/throughput --engine $EN --model $M20B --streams 2 > $O/ncu-2rows.txt 2>&1
echo "ncu rc=$? ${SECONDS}s"; tr ';' '\n' < $O/ncu-2rows.txt | head -12
for round in 1 2 3; do
  for v in base rrb N; do
    case $v in base) X="LLMR_GPTOSS_ROUTER_ROWS_BLOCKS=1" E=$R ;; rrb) X="LLMR_GPTOSS_ROUTER_ROWS_BLOCKS=8" E=$R ;; N) X="" E=$EN ;; esac
    env $X timeout 60 $B/bench/throughput --engine $E --model $M20B --streams 2,3,4,5 > /tmp/tp.txt 2>&1
    echo "$v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
    { echo "== $v round $round"; cat /tmp/tp.txt; } >> $O/throughput.txt
  done
done | tee $O/ab.txt
echo "ab ${SECONDS}s (streams: out tok/s / step rate)"
if [ $rc = 0 ]; then
  timeout $((592 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
  echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
  grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-250
fi
echo "total ${SECONDS}s"
