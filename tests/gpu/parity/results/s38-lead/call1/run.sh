#!/bin/bash
# Prepared in session 37 for the next session's first GPU call (not run: session 37's device time was spent).
# e5m2-experts.diff (compile-checked: the new kernel 64 registers, no spills; applies to main after 3d92559): the batched
# step's experts from a byte-per-weight copy (docs/performance.md, "What is next (session 37)", item 1). At load
# (LLMR_GPTOSS_MOE_E5=1; 0, the diff's default, keeps main's behaviour) every layer's tiled experts are copied once more
# as the F16 form's fp16 values' high bytes (gptoss_mxfp4_tile_e5; 19.1 GB on the 20b), and the pre-staged F16 launches
# (16-64 rows) read them (mxfp4_mma_stream_e5_kernel): no scale bytes, tables or vote in the loop, 4 ALU operations a
# decoded word instead of 13, the same fp16 values in the same k order, so the same bits (a new kernel check against
# the tiled launches, in --moe-mma-checks). Predicted: one 20b layer's experts at T = 64 0.285 -> ~0.20-0.22 ms
# (--moe-timing prints it beside the tiled form), the 64-row MoE block 7.6 -> 5.5-6 ms, 64 streams +15-25%; at 16 rows
# less or a loss (twice the bytes), hence LLMR_GPTOSS_MOE_E5_MIN_ROWS (16; 32 measured too). The prompt kernel
# (gptoss_mxfp4_prompt_gemm) reads the copy too where it exists (LLMR_GPTOSS_PROMPT_E5=0 turns that off): its E5
# instantiations hold one super-chunk of 64 bytes a lane in registers (112-146 registers, no spills, no wgmma
# serialization: the bytes are pinned after each wait, else ptxas reported C7519/C7520), the same bits (a new check in
# --tc-checks). Its 512-token launches are latency-bound on their dependency chains (session 37 call 5), so predicted:
# short prompts' experts 10-20% faster without the expert cache (256 tokens 9.8 ms of experts).
# Preparation: build main into build/; cp -a the tree to /tmp/e5, git apply tests/gpu/parity/results/s37-lead/next/
# e5m2-experts.diff there, make; tests/gpu/pack.sh --out .gpu-lead/pkg --alt e5:/tmp/e5; carry .gpu-lead/pkg.
# If it wins: default LLMR_GPTOSS_MOE_E5 to 2 (auto, as the expert cache), then the full gate with and without the cache.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/B/alt/e5; SECONDS=0
timeout 280 $A/tests/gpu/gptoss_kernels --tc-checks > $O/tc-checks.txt 2>&1 &
TC=$!
timeout 200 $A/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks.txt 2>&1
echo "moe-mma-checks rc=$? $(tail -1 $O/mma-checks.txt) ${SECONDS}s"; grep -E "FAIL|e5m2" $O/mma-checks.txt | head -12 | cut -c1-200
wait $TC; echo "tc-checks rc=$? $(tail -1 $O/tc-checks.txt) ${SECONDS}s"; grep -E "FAIL|e5m2" $O/tc-checks.txt | head -8 | cut -c1-200
timeout 120 $A/tests/gpu/gptoss_kernels --moe-timing 16 32 64 128 > $O/moe-timing.txt 2>&1
echo "moe-timing rc=$? ${SECONDS}s"; grep -o "time experts T=[0-9]*\|the same with the tiled weights[^;]*\|the e5m2 copy[^;]*" $O/moe-timing.txt
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
E=$A/engines/gptoss_cuda/libgptoss_cuda.so
for r in 1 2; do for v in off on on32; do
  X=0; MR=16; case $v in on) X=1 ;; on32) X=1; MR=32 ;; esac
  LLMR_GPTOSS_MOE_E5=$X LLMR_GPTOSS_MOE_E5_MIN_ROWS=$MR timeout 90 $B/bench/throughput --engine $E --model /tmp/m20b \
    --streams 8,32,64 > /tmp/tp.txt 2>&1
  echo "$v run $r rc=$? ${SECONDS}s: $(grep -E '^ +(8|32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s (%s) ", $1, $5, $NF}')"
  grep -E "^64 streams, wall|e5m2|VRAM" /tmp/tp.txt | cut -c1-140 | head -3; { echo "== $v run $r"; cat /tmp/tp.txt; } >> $O/throughput.txt
done; done
for r in 1 2; do for v in off on noprompt; do
  X=1; PE=1; case $v in off) X=0 ;; noprompt) PE=0 ;; esac
  LLMR_GPTOSS_MOE_E5=$X LLMR_GPTOSS_PROMPT_E5=$PE LLMR_GPTOSS_EXPERT_CACHE=0 timeout 60 $B/bench/prefill --engine $E \
    --model /tmp/m20b --lengths 256,512,1024,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "prefill $v $r rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s | ", $1, $2}') ${SECONDS}s"
  { echo "== $v $r"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done
LLMR_GPTOSS_MOE_E5=1 timeout 200 $A/tests/gpu/gptoss_batching --engine $E --model /tmp/m20b > $O/batching-e5.txt 2>&1
echo "batching 20b with the e5m2 copy rc=$? $(tail -1 $O/batching-e5.txt) ${SECONDS}s"
echo "total ${SECONDS}s"
