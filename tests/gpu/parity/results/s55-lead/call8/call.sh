#!/bin/bash
# Session 55 call 8: call 7's gate passed every step but one kernel check, the router split's weights (rel L2 1.35e-6
# against a fixed 1e-6): the checks added before it draw more random numbers, so it met new inputs. Its bound now
# follows the logits' measured difference (softmax: each weight moves by at most w 2 max |dl|). The engine is call 7's,
# byte for byte; this runs the kernel step of the gate again on this build.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 200 tests/gpu/gate.sh --build $B --out /tmp/g --steps kernels > $O/gate-kernels.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-kernels.txt
grep -h "FAIL\|router split" /tmp/g/gate/kernels.txt 2>/dev/null | head -8 | cut -c1-250
