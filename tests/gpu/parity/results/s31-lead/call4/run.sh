#!/bin/bash
# session 31 call 4: the experts' tiled copy in the experts' place (LLMR_GPTOSS_MOE_TILED=2, the default, where every
# reader the settings pick reads it: the F16 form, the tensor-core ring gate_up and the 2-rows-a-warp down at T = 1,
# the expert cache for long prompts), with the xor slot layout. The kernel checks first (stop there on a failure);
# bench/decode and bench/throughput in place / checkpoint layout (=0) / second copy (=1); then the rest of the gate.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 200 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; rc=$?; echo "kernels rc=$rc ${SECONDS}s"
grep -hE "^FAIL|checks, " $O/kernels.txt | cut -c1-300 | head -20; grep -E "tiled copy|tiled weights" $O/kernels.txt | cut -c1-200 | head
[ $rc = 0 ] || { echo "kernel checks failed: stop"; exit 1; }
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
dec() { # name env...
  local n=$1; shift
  env "$@" timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > /tmp/d.txt 2>&1
  echo "decode $n rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ |tiled|VRAM" /tmp/d.txt | cut -c1-200; cat /tmp/d.txt >> $O/dec-$n.txt
}
tp() { # name env...
  local n=$1; shift
  env "$@" timeout 90 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > /tmp/t.txt 2>&1
  echo "throughput $n rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |tiled|VRAM" /tmp/t.txt | cut -c1-220; cat /tmp/t.txt >> $O/tp-$n.txt
}
dec inplace; dec ckpt LLMR_GPTOSS_MOE_TILED=0
tp inplace; tp ckpt LLMR_GPTOSS_MOE_TILED=0
dec inplace2; dec ckpt2 LLMR_GPTOSS_MOE_TILED=0
timeout 380 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "selftest parity batching serving" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-250 | head -10
grep -h "tiled in place\|tiled expert copy\|not tiled" /tmp/g/gate/*.txt 2>/dev/null | sort | uniq -c | head -10
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
echo "total ${SECONDS}s"
