#!/bin/bash
# Session 54, call 4: the full gate on exactly the build that lands the one-wave check (gptoss_moe_ring_rows_grid and
# test_moe_ring_one_wave: every rows launch of the gate_up ring within the CTAs the GPU holds, by the occupancy API) and
# the rows kernels' bit-for-bit checks at 5 and 6 rows (the 20b's shapes); the launch's grid is call 3's, through one
# helper (mr_ctas_per_row). The kernels step runs the new checks; their lines are printed.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 470 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -6 | cut -c1-250
grep -h "one wave\|moe rows T=[56]" /tmp/g/gate/*.txt | cut -c1-250 | head -12
cp /tmp/g/gate/kernels*.txt $O/ 2>/dev/null
echo "total ${SECONDS}s"
