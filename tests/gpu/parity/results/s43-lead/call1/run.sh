#!/bin/bash
# Prepared in session 42 (not run: its device time was spent). tiled-pointers-walk.diff (compile-checked: the 8-row
# launch mxfp4_mma_stream_kernel<1,2,2,1,0,1> 64 registers, no spill; the prompt form <4,2,1,1,0,1> loses its spills):
# mma_load_tiled walks its pointers (tw[r] += 64, ts += 32 after each load) instead of indexing them by the super-chunk
# c, since a lane loads its super-chunks in order. Session 42 call 3's source page of the 8-row gate_up: the next
# loads' 64-bit address arithmetic is ~32 of ~244 warp-instructions a super-chunk (LEA / IADD3 / IMAD.X pairs from c),
# and the launch follows its instruction count (session 41). The same loads, so the same bits.
# Predicted: ~-6% of the 8-row launches' instructions, the 8-row MXFP4 launches -3-5%, 8 streams' step rate +2-3%,
# 16 streams +2-4%.
# Preparation: build main; git clone /work/main /tmp/base (main as it is) and make there; git apply
# tests/gpu/parity/results/s42-lead/next/tiled-pointers-walk.diff in main; make; tests/gpu/pack.sh --out .gpu-lead/pkg
# --alt base:/tmp/base; carry .gpu-lead/pkg. ~9 minutes; the batch-1 source pages last, with what time is left.
O=$OUT; rm -rf /tmp/B; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -f /tmp/m20b/config.json ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 60 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks.txt 2>&1
echo "moe-mma-checks rc=$? $(grep -c '^ok' $O/mma-checks.txt) ok, $(grep -c FAIL $O/mma-checks.txt) FAIL ${SECONDS}s"
grep -E "time experts T=8 " $O/mma-checks.txt | cut -c1-200
EB=/tmp/B/alt/base/engines/gptoss_cuda/libgptoss_cuda.so; EN=$B/engines/gptoss_cuda/libgptoss_cuda.so
for v in new base base new; do
  E=$EN; [ $v = base ] && E=$EB
  LLMR_GPTOSS_BATCH_PROFILE=1 timeout 60 $B/bench/throughput --engine $E --model /tmp/m20b --streams 8,16,64 > /tmp/tp.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(grep -E '^ +(8|16|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')$(awk 'NF == 11 && $3 ~ /\./ && $2 >= 20 {printf "| %s: %s ms MoE %s ", $1, $4, $10}' /tmp/tp.txt)"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput-ab.txt
done
LLMR_GPTOSS_EXPERT_CACHE=0 timeout $((470 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
G0=$!
timeout $((475 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels selftest parity batching serving" > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
# The batch-1 kernels' source pages (what next: loads consumed right after they are issued, session 42 item 1).
timeout $((585 - SECONDS)) ncu --set full --import-source no --launch-skip 300 -c 6 -o /tmp/rep1 \
  $B/bench/decode --engine $EN --model /tmp/m20b --contexts 128 --tokens 32 > /tmp/ncu1.log 2>&1
echo "ncu batch-1 rc=$? ${SECONDS}s"
ncu -i /tmp/rep1.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $O/source-b1.csv.xz
ncu -i /tmp/rep1.ncu-rep --print-details all 2>&1 | xz -9 > $O/ncu-b1.txt.xz
echo "total ${SECONDS}s"
