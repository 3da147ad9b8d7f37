#!/bin/bash
# session 21 call 6: where a 64-row step's dense parts go (q/k/v 1.02 + o_proj 0.76 ms against ~0.4 ms of their bf16
# weights at copy bandwidth): every kernel of bench/throughput at 64 streams, summed (nsys when present, else ncu's
# per-kernel durations over a short window of batched steps).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
which nsys ncu; ls /usr/local/cuda/bin | grep -i nsys; ls /opt/nvidia 2>/dev/null
NSYS=$(which nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [ -n "$NSYS" ]; then
  timeout 200 $NSYS profile -o /tmp/tp --force-overwrite true --trace cuda $B/bench/throughput --model /tmp/m20b --streams 64 > $O/nsys-run.txt 2>&1
  echo "nsys rc=$? ${SECONDS}s"
  $NSYS stats --report cuda_gpu_kern_sum --format csv /tmp/tp.nsys-rep > $O/kern-sum.csv 2>&1; echo "stats rc=$?"
  head -45 $O/kern-sum.csv | cut -c1-260
else
  timeout 400 ncu --launch-skip 250000 --launch-count 1500 --csv --metrics gpu__time_duration.sum $B/bench/throughput --model /tmp/m20b --streams 64 > $O/ncu-durations.csv 2>&1
  echo "ncu rc=$? ${SECONDS}s"
  grep -c gpu__time_duration $O/ncu-durations.csv
fi
echo "total ${SECONDS}s"
