#!/bin/bash
# Session 33 call 1 (H200): precise rows for short prompts in packed prefill (gptoss_tc_mlp's second fp16 part).
# The kernels' checks (test_tc_moe_f16_precise among them), the tiny batching check (its packed case with mode 2),
# the 20b batching check with LLMR_GPTOSS_PREFILL_PACK=2 and =3, then bench/throughput with packing 1 / 2 / 3, A B C A B C.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 & MK=$!
timeout 200 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s: $(tail -1 $O/kernels.txt)"
grep -E "precise|^FAIL" $O/kernels.txt | cut -c1-200
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
for v in 2 3; do
  LLMR_GPTOSS_PREFILL_PACK=$v timeout 150 $B/tests/gpu/gptoss_batching --model /tmp/m20b > $O/b20-pack$v.txt 2>&1
  echo "batching-20b pack=$v rc=$? ${SECONDS}s: $(tail -1 $O/b20-pack$v.txt)"; grep -E "^FAIL" $O/b20-pack$v.txt | cut -c1-300
done
for r in 1 2; do for v in 1 2 3; do
  LLMR_GPTOSS_PREFILL_PACK=$v timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > /tmp/tp.txt 2>&1
  echo "pack=$v run $r rc=$? ${SECONDS}s: $(grep -E '^ +(8|32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s (%s, p99 %s) ", $1, $5, $NF, $7}')"
  grep -E "^64 streams, wall" /tmp/tp.txt | cut -c1-110; { echo "== pack=$v run $r"; cat /tmp/tp.txt; } >> $O/tp-all.txt
done; done
timeout 120 $B/tests/gpu/gptoss_batching --mkmodel $B/bin/llmr-mkmodel > $O/batching-tiny.txt 2>&1
echo "batching tiny rc=$? ${SECONDS}s: $(tail -1 $O/batching-tiny.txt)"; grep -E "^FAIL|packed prefill" $O/batching-tiny.txt | cut -c1-200
echo "total ${SECONDS}s"
