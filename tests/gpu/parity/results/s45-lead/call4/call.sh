#!/bin/bash
# Session 45, call 4 (the last ~260 s of device time: measurements only, no gate): next/'s four attention forms
# (next/next-call.sh's header says what each changes and predicts) against main 69058d3: their SASS, ncu durations
# and bench/decode A/B. Whichever wins still needs the full gate on its own build before it lands.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
eng_of() { case $1 in main) echo "$EN" ;; *) echo "/tmp/B/alt/$1/engines/gptoss_cuda/libgptoss_cuda.so" ;; esac; }
K=_Z22attention_split_kernelPKf9gptoss_kvPKtiPKiiiiPfi
for v in main kd vl vlk vlqk; do cuobjdump -sass -fun $K $(eng_of $v) > /tmp/sass-$v.txt 2>&1 || echo "sass $v failed"; done
tar -C /tmp -cJf $O/sass-attention.tar.xz sass-main.txt sass-kd.txt sass-vl.txt sass-vlk.txt sass-vlqk.txt
for v in main kd vl vlk vlqk; do
  S=$(timeout 40 tests/gpu/ncu_durations.sh --csv /tmp/n.csv "attention_split" -- \
    $B/bench/decode --engine $(eng_of $v) --model $M20B --contexts 128 --tokens 16)
  echo "ncu $v rc=$? ${SECONDS}s: $S"
  { echo "== $v"; cat /tmp/n.csv; } >> /tmp/ncu-dur.csv
done
xz -9 < /tmp/ncu-dur.csv > $O/ncu-dur.csv.xz
for v in main vlk vl vlqk kd kd vlqk vl vlk main; do
  timeout 30 $B/bench/decode --engine $(eng_of $v) --model $M20B --contexts 128,1024 --tokens 256 > /tmp/d.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(awk '$1 ~ /^(128|1024)$/ {printf "%s: %s (%s) ", $1, $3, $NF} /^context .* a token/ {printf "step %s ", $10}' /tmp/d.txt)"
  { echo "== $v"; cat /tmp/d.txt; } >> $O/decode-ab.txt
done
echo "total ${SECONDS}s"
