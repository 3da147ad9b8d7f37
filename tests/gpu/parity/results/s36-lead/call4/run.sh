#!/bin/bash
# Session 36 call 4 (H200), main as landed: where a 4,096-token prompt's time goes, kernel by kernel (ncu, duration and
# DRAM bytes of every launch; the engine's warm-up off, bench/prefill's own untimed run then one timed run: the
# second half of the launches is the timed prompt), without the expert cache and with it. Session 35 put ~13 ms of
# the experts' part beside the two GEMMs (split, SwiGLU, combine), ~0.35 ms a layer above their bytes.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for c in 0 2; do
  LLMR_GPTOSS_WARMUP=0 LLMR_GPTOSS_EXPERT_CACHE=$c timeout 240 ncu --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    $B/bench/prefill --model /tmp/m20b --lengths 4096 --reps 1 > /tmp/ncu.csv 2> /tmp/ncu.err
  echo "ncu cache=$c rc=$? ${SECONDS}s $(grep -c '"gpu__time_duration.sum"' /tmp/ncu.csv) launches"; tail -2 /tmp/ncu.err | cut -c1-200
  grep -E '^"[0-9]' /tmp/ncu.csv | xz -9 > $O/ncu-cache$c.csv.xz
done
echo "total ${SECONDS}s"
