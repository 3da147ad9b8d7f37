#!/bin/bash
# Session 55 call 5. Call 4: the pairs kernel with no two-row passes takes 8-13 us more than the rows launch for the
# same work (2 rows 26.9 -> 35.0 us, 6 rows 70.9 -> 84.1), which the pairs then only win back. Where: both launches
# timed with the ring's diagnostics (1 the copies alone, 2 the arithmetic alone, 3 without the split) at 2 and 6 rows,
# and the two grids' CTAs printed. No A/B.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 150 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1
echo "rows-checks rc=$? ${SECONDS}s"
grep -E "^FAIL|checks,|timing gate_up" $O/rows-checks.txt | cut -c1-260
