#!/bin/bash
# Session 49, call 1: L2 residency of the KV cache, the greedy sampling in one launch, and the standing at 1-3 streams.
# Alts: "kvl" = main + kv-evict-last.diff (the batch-1 attention's K/V loads and qkv's K/V stores with an L2
# evict-last policy; run as "kvp" with LLMR_GPTOSS_L2_PERSIST_MB=16, the L2 set aside for persisting lines); "smp" =
# main + sample-one-launch.diff (a lone row's greedy argmax in one launch, the last block merging the parts, writing
# the id into the pinned host word itself: one launch and the 4-byte copy fewer a token).
# Predicted: kvl/kvp 0 to -0.8% a step (nothing if ncu finds the attention's K/V already L2 hits); smp: the token
# (bench's "a token", not the step) -4-10 us, -0.25-0.6%.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
timeout 150 tests/gpu/decode_ab.sh --log $O/decode-ab.txt main=$EN kvl=$A/kvl/$E kvp=$A/kvl/$E:LLMR_GPTOSS_L2_PERSIST_MB=16 \
  smp=$A/smp/$E main kvl kvp smp smp kvp kvl main main smp | tee /tmp/ab.txt
grep -h "a token" $O/decode-ab.txt | head -40 > $O/token-split.txt
echo "ab ${SECONDS}s"
for v in main kvl kvp; do
  EE=$EN X=; [ $v != main ] && EE=$A/kvl/$E; [ $v = kvp ] && X=16
  LLMR_GPTOSS_L2_PERSIST_MB=$X timeout 60 ncu --clock-control none --cache-control none -k regex:attention_split \
    --launch-skip 240 -c 48 --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct \
    $B/bench/decode --engine $EE --model $M20B --contexts 128 --tokens 16 > /tmp/ncu-$v.csv 2>&1
  echo "ncu $v: $(awk -F'","' '/attention_split/ { m = $(NF-2); v = $NF; gsub(/[",]/, "", v); s[m] += v; n[m]++ }
    END { for (k in s) printf "%s %.1f; ", k, s[k] / n[k] }' /tmp/ncu-$v.csv)"
done | tee $O/ncu.txt
echo "ncu ${SECONDS}s"
timeout 200 $B/bench/throughput --engine $EN --model $M20B --streams 1,2,3,8,64 > $O/throughput.txt 2>&1
echo "throughput rc=$? ${SECONDS}s"; grep -E "^ +(1|2|3|8|64) +[0-9]+ +[0-9]+ " $O/throughput.txt
echo "total ${SECONDS}s"
