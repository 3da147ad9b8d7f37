#!/bin/bash
# Session 51, call 8: the full gate on exactly the build to land after the session's review mends (main efef643 + the
# routed ring's route struct built by one helper, mr_route_finish, and the kernel tests' random experts drawn, uploaded
# and tiled by one helper, dev_experts_make: host code and tests only, the kernels' code unchanged).
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-250
echo "total ${SECONDS}s"
