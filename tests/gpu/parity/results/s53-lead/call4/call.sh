#!/bin/bash
# Session 53, call 4: the review item left by sessions 51-52, gemv1_kernel<true> and gemv1_rows_kernel<R, true> summing
# the block's router partial row through one helper (gemv1_partial_row, linear.cu; the same sums in the same order).
# The batch-1 kernel's code changed (register numbering), so bench/decode A/B against main as the alt "old" (A B B A
# B A), which is also the batch-1 standing; then the full gate on exactly this build.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 150 tests/gpu/decode_ab.sh --log $O/decode-ab.txt old=$B/../alt/old/engines/gptoss_cuda/libgptoss_cuda.so new=$EN \
  old new new old new old > $O/ab.txt 2>&1
echo "ab rc=$? ${SECONDS}s"; tail -12 $O/ab.txt
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -6 | cut -c1-250
echo "total ${SECONDS}s"
