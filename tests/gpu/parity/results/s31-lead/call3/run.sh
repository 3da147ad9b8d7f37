#!/bin/bash
# session 31 call 3: the full gate on main with every F16 launch on the tiled copy and the auto copy (the default:
# taken by the tiny / small / 20b-2l models, left off by the full-size 20b beside its expert cache on an 80 GB card);
# then bench/decode: the defaults, and the T = 1 experts on the batched kernels (LLMR_GPTOSS_MOE_MMA_T1=1) without
# and with the tiled copy (=1), to see what the streaming kernel's T = 1 costs now.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 450 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-250 | head -10
grep -h "tiled expert copy" /tmp/g/gate/*.txt 2>/dev/null | sort | uniq -c | head -10
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
dec() { # name env...
  local n=$1; shift
  env "$@" timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > /tmp/d.txt 2>&1
  echo "decode $n rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ |tiled" /tmp/d.txt | cut -c1-200; cat /tmp/d.txt >> $O/dec-$n.txt
}
dec default
dec t1 LLMR_GPTOSS_MOE_MMA_T1=1
dec t1-tiled LLMR_GPTOSS_MOE_MMA_T1=1 LLMR_GPTOSS_MOE_TILED=1
echo "total ${SECONDS}s"
