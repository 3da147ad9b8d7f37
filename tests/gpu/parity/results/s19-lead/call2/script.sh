#!/bin/bash
# session 19 call 2: why the MoE block in one launch is slower end to end (call 1: 548 -> 518-525 tok/s at 128) while
# faster back to back (37.6 -> 35.5 us): bench/decode BLOCK=0 / default / without the cooperative attribute; the
# per-launch profile (no graph) of both; ncu durations of the MoE kernels in the engine (cold weights) for both.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== LLMR_GPTOSS_MOE_BLOCK=0"; LLMR_GPTOSS_MOE_BLOCK=0 timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
  echo "=== default"; timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
  echo "=== LLMR_GPTOSS_MOE_BLOCK_COOP=0"; LLMR_GPTOSS_MOE_BLOCK_COOP=0 timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
for b in 0 1; do LLMR_GPTOSS_MOE_BLOCK=$b LLMR_GPTOSS_PROFILE=1 timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128 --tokens 32 > $O/prof$b.txt 2>&1; done
grep -iE "gate|down|total|token" $O/prof0.txt | head -20; echo ---; grep -iE "gate|down|total|token" $O/prof1.txt | head -20
for b in 0 1; do
  LLMR_GPTOSS_MOE_BLOCK=$b timeout 150 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum -k regex:"moe_gate_up_ring|moe_down_decode|gemv1|qkv_decode" --launch-skip 200 --launch-count 200 $B/bench/decode --model /tmp/m20b --contexts 128 --tokens 8 > $O/ncu$b.txt 2>&1
  echo "ncu block=$b rc=$?"
  python3 - $O/ncu$b.txt <<'PY'
import re,sys,collections
d=collections.defaultdict(list); name=None
for line in open(sys.argv[1]):
    m=re.match(r'\s+(\S+?)(\(|<)',line)
    if m and ('kernel' in line or '(' in line) and 'gpu__time' not in line: name=line.strip()[:60]
    m2=re.search(r'gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)',line)
    if m2 and name:
        v=float(m2.group(2).replace(',',''))
        if m2.group(1)=='ns': v/=1000
        elif m2.group(1)=='ms': v*=1000
        d[name].append(v)
for k,v in d.items(): print(f"{len(v):4d} x {sum(v)/len(v):8.2f} us  {k}")
PY
done
rm -rf /tmp/m20b
echo "total ${SECONDS}s"
