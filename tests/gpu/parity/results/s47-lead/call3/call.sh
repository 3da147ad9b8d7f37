#!/bin/bash
# Session 47, call 3 (measurements only, main 54b8fe6): where the T = 1 gate_up, down and o_proj + router finish
# kernels' warps stall, instruction by instruction (ncu's source counters: warp-state samples per SASS line), in the
# decode step as it runs (real clocks, caches as the step leaves them), one launch each at context 128. Call 2 showed
# that which pipe an instruction takes does not decide these loops' time; this reads where their time goes instead.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
run() { # NAME REGEX
  timeout 120 ncu --set full --import-source no --cache-control none --clock-control none --kernel-name-base demangled -k "regex:$2" \
    --launch-skip 240 -c 1 -o /tmp/$1 $B/bench/decode --engine $EN --model $M20B --contexts 128 --tokens 16 \
    > $O/ncu-$1.log 2>&1
  echo "ncu $1 rc=$? ${SECONDS}s"
  ncu -i /tmp/$1.ncu-rep --page source --csv --print-source sass > /tmp/$1-source.csv 2> $O/$1-source.err
  echo "source $1 rc=$? lines $(wc -l < /tmp/$1-source.csv)"
  ncu -i /tmp/$1.ncu-rep --page details > $O/$1-details.txt 2>&1
  xz -9 -c /tmp/$1-source.csv > $O/$1-source.csv.xz
  xz -9 -c /tmp/$1.ncu-rep > $O/$1.ncu-rep.xz
}
run gate-up 'gate_up_ring'
run down 'moe_down_decode'
run oproj 'gemv1_kernel<(1|true)'
head -3 /tmp/gate-up-source.csv | cut -c1-600
ls -la $O; echo "total ${SECONDS}s"
