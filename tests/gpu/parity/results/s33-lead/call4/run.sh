#!/bin/bash
# Session 33 call 4 (H200): the batch-1 and small-step switches, last tuned on the H100, swept on the H200 (main as
# landed, 4857613). bench/decode at context 128 / 1,024 for each T = 1 switch; bench/throughput at 8 streams for the
# 2-15-row steps' switches; the defaults three times in each sweep (first, middle, last) for the noise.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel ${SECONDS}s"
dec() { env "$@" timeout 40 $B/bench/decode --model /tmp/m20b --contexts 128,1024 --tokens 64 > /tmp/d.txt 2>&1
  echo "decode $* rc=$?: $(grep -E '^ +(128|1024) ' /tmp/d.txt | awk '{printf "%s %s (%s) ", $1, $3, $NF}')"; { echo "== $*"; cat /tmp/d.txt; } >> $O/decode-all.txt; }
dec D=a; dec LLMR_GPTOSS_PDL=1; dec LLMR_GPTOSS_MOE_DP4A=1; dec LLMR_GPTOSS_MOE_DP4A=0; dec LLMR_GPTOSS_ROUTE_RING=1
dec LLMR_GPTOSS_ROUTE_RING=0; dec LLMR_GPTOSS_ROUTER_SPLIT=0; dec D=b; dec LLMR_GPTOSS_FIN_ROWS=0; dec LLMR_GPTOSS_MOE_ASYNC=1
dec LLMR_GPTOSS_MOE_ROWS=4; dec LLMR_GPTOSS_MOE_LUT=0; dec LLMR_GPTOSS_ROUTER_BLOCKS=8; dec LLMR_GPTOSS_MOE_TILED=0
dec LLMR_GPTOSS_DECODE_ATTN=0; dec D=c
echo "decode sweep ${SECONDS}s"
tp() { env "$@" timeout 30 $B/bench/throughput --model /tmp/m20b --streams 8 > /tmp/t.txt 2>&1
  echo "tp8 $* rc=$?: $(grep -E '^ +8 +[0-9]+ +[0-9]+ ' /tmp/t.txt | awk '{printf "%s (%s, p99 %s) ", $5, $NF, $7}')"; { echo "== $*"; cat /tmp/t.txt; } >> $O/tp8-all.txt; }
tp D=a; tp LLMR_GPTOSS_BATCH_MOE_PER_ROW=2; tp LLMR_GPTOSS_BATCH_MOE_PER_ROW=5; tp LLMR_GPTOSS_MOE_MMA_MIN_ROWS=6
tp LLMR_GPTOSS_BATCH_O_ROWS=2; tp LLMR_GPTOSS_BATCH_O_ROWS=8; tp D=b; tp LLMR_GPTOSS_BATCH_TC_MIN=4; tp LLMR_GPTOSS_BATCH_TC_MIN=16
tp LLMR_GPTOSS_BATCH_TC_MIN_QKV=4; tp LLMR_GPTOSS_BATCH_TC_MIN_QKV=8; tp LLMR_GPTOSS_PDL=1; tp D=c
echo "total ${SECONDS}s"
