#!/bin/bash
# Prepared in session 41 (not run: its device time was spent). rows-norm-split-loads-first.diff (compile-checked: 63
# registers, no spill, where main's rows_norm_split_kernel spills 4 bytes): the combine + next norm + split kernel
# loads all of its row (x and the 4 pairs' rows of y) before its first store of x. Today each element's load-add-store
# is one memory round trip, since the store to x may alias the loads as far as the compiler knows (session 41 found
# and fixed the same in the router: 14.66 -> 13.74 us at 8 rows). The same sums in the same order: the same bits
# (tests/gpu/gptoss_kernels --batch-checks: rows_norm_split against moe_combine + rmsnorm + split, bit for bit).
# Session 41 call 2 measured the kernel at 13.8 us a layer at 64 rows (331 us a step, 3.7%); session 40 5.5 us a
# layer at 8 rows. Predicted: 64 rows ~13.8 -> ~8 us (64-row step -0.14 ms, ~+1.5%), 8 rows ~5.5 -> ~2.5 us (~+1%).
# Preparation: build main; git clone /work/main /tmp/base (main as it is) and make there; git apply
# tests/gpu/parity/results/s41-lead/next/rows-norm-split-loads-first.diff in main; make; tests/gpu/pack.sh --out
# .gpu-lead/pkg --alt base:/tmp/base; carry .gpu-lead/pkg. ~8 minutes with the gate.
O=$OUT; rm -rf /tmp/B; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -f /tmp/m20b/config.json ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 120 $B/tests/gpu/gptoss_kernels --batch-checks > $O/batch-checks.txt 2>&1
echo "batch-checks rc=$? $(tail -1 $O/batch-checks.txt) ${SECONDS}s"; grep -E "FAIL|rows_norm_split" $O/batch-checks.txt | head -6 | cut -c1-160
EB=/tmp/B/alt/base/engines/gptoss_cuda/libgptoss_cuda.so; EN=$B/engines/gptoss_cuda/libgptoss_cuda.so
for s in 8 64; do for v in new base; do
  E=$EN; [ $v = base ] && E=$EB
  timeout 60 ncu --clock-control none -k regex:rows_norm_split_kernel --launch-skip 2000 -c 200 --csv \
    --metrics gpu__time_duration.sum $B/bench/throughput --engine $E --model /tmp/m20b --streams $s > /tmp/d-$v-$s.csv 2>&1
  echo "ncu rows_norm_split $v $s streams rc=$? ${SECONDS}s: $(grep gpu__time_duration /tmp/d-$v-$s.csv | awk -F'","' '{gsub(/"/,"",$NF); gsub(/,/,"",$NF); s+=$NF; n++; u=$(NF-1)} END {printf "%d launches, mean %.3f %s", n, s/n, u}')"
  xz -c /tmp/d-$v-$s.csv > $O/ncu-rns-$v-$s.csv.xz
done; done
for v in new base base new; do
  E=$EN; [ $v = base ] && E=$EB
  LLMR_GPTOSS_BATCH_PROFILE=1 timeout 60 $B/bench/throughput --engine $E --model /tmp/m20b --streams 8,64 > /tmp/tp.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(grep -E '^ +(8|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')$(awk 'NF == 11 && $3 ~ /\./ && $2 >= 20 {printf "| %s: %s ms MoE %s ", $1, $4, $10}' /tmp/tp.txt)"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput-ab.txt
done
LLMR_GPTOSS_EXPERT_CACHE=0 timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
G0=$!
timeout $((592 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels selftest parity batching serving" > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
