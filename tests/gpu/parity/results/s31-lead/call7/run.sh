#!/bin/bash
# session 31 call 7: the F16 form's decode through magnitude tables scaled per block (mxfp4_lut_scaled; no HMUL2 where a
# warp's block scales lie within 2^+-13 of the expert's shift). The expert checks (the tables off bit for bit the tables
# on), then bench/throughput 8 / 32 / 64 streams, tables on / off (LLMR_GPTOSS_MOE_F16_TABLES=0), A B A B.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 60 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/moe-mma.txt 2>&1; rc=$?; echo "moe-mma-checks rc=$rc ${SECONDS}s"
grep -hE "^FAIL|checks, |tables off" $O/moe-mma.txt | cut -c1-220
[ $rc = 0 ] || exit 1
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for v in 1 0; do
  LLMR_GPTOSS_MOE_F16_TABLES=$v timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > /tmp/t.txt 2>&1
  echo "throughput tables=$v run $r rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " /tmp/t.txt | cut -c1-220
  grep -E "^ +64 +[0-9]+ +64.0" /tmp/t.txt; cat /tmp/t.txt >> $O/tp-tables$v.txt
done; done
echo "total ${SECONDS}s"
