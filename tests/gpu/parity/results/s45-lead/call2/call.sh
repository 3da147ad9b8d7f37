#!/bin/bash
# Session 45, call 2: the engine as it would land (main + ring-tiled-offsets + the 4-row T = 1 down as the default, both
# measured in call 1) with one more same-bits change: the batch-1 attention's table row (64 page ids) and sink loaded
# with the position, before anything waits on them (two fewer dependent round trips; session 43's page). Alt "base":
# the same engine without the attention change. Predicted: attention_split_kernel 7.3 -> ~6.3-6.7 us, batch-1 step
# -0.8-1.5%. Then the full gate on exactly this build, and the standing.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
EB=/tmp/B/alt/base/engines/gptoss_cuda/libgptoss_cuda.so
env_of() { case $1 in d2) echo "LLMR_GPTOSS_DOWN_R4=0" ;; *) echo "LLMR_NONE=0" ;; esac; }
eng_of() { if [ "$1" = base ]; then echo "$EB"; else echo "$EN"; fi; }
for v in new base d2 d2 base new new d2 base base new d2; do
  env $(env_of $v) timeout 60 $B/bench/decode --engine $(eng_of $v) --model $M20B --contexts 128,1024 --tokens 256 > /tmp/d.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(awk '$1 ~ /^(128|1024)$/ {printf "%s: %s (%s) ", $1, $3, $NF} /^context .* a token/ {printf "step %s ", $10}' /tmp/d.txt)"
  { echo "== $v"; cat /tmp/d.txt; } >> $O/decode-ab.txt
done
for v in base new; do
  S=$(timeout 90 tests/gpu/ncu_durations.sh --csv /tmp/n.csv "attention_split|moe_down" -- \
    $B/bench/decode --engine $(eng_of $v) --model $M20B --contexts 128 --tokens 16)
  echo "ncu $v rc=$? ${SECONDS}s: $S"
  { echo "== $v"; cat /tmp/n.csv; } >> /tmp/ncu-dur.csv
done
xz -9 < /tmp/ncu-dur.csv > $O/ncu-dur.csv.xz
for v in new base; do
  timeout 90 $B/bench/throughput --engine $(eng_of $v) --model $M20B --streams 1,8,32,64 > /tmp/t.txt 2>&1
  echo "throughput $v rc=$? ${SECONDS}s"; grep -E "^ +(1|8|32|64) +[0-9]+ +[0-9]+ " /tmp/t.txt
  { echo "== $v"; cat /tmp/t.txt; } >> $O/throughput.txt
done
timeout $((585 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
