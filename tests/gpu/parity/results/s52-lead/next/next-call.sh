#!/bin/bash
# Prepared in session 52 for the next session (no device time was left to run it): the check that a request beside
# one other gives its lone tokens and log-probabilities bit for bit (next/two-rows-lone.diff, tests only).
# Why it should hold: since c29e2b2 every part of a 2-row step below split_from (1,536) keys runs the batch-1 graph's
# kernel (the attention: gptoss_attention_at) or its row form (gptoss_qkv_rows, gptoss_gemv1_rows_router + the ROUTE 4
# ring, the rows down, gptoss_gemv1_rows for lm_head), each kernel-checked bit for bit against its one-token form;
# the log-probabilities come from one kernel for 1 and B rows. The test runs request 3 alone, then beside request 1
# (started once request 3 has its first token, so their prompts are never packed), compares tokens and logprobs with
# memcmp, and needs the scheduler's counters to show 2-3-row steps.
# Build: git apply tests/gpu/parity/results/s52-lead/next/two-rows-lone.diff; make; tests/gpu/pack.sh --build build
#   --out .gpu-lead/pkg. Run with carry [".gpu-lead/pkg"]. If it passes, land the diff (it is tests only; the gate's
#   batching steps run it, tiny and 20b). If it fails, its message names the first step that differs: a part of the
#   2-row path that is not its lone kernel on that checkpoint (the tiny model's shapes may route a part elsewhere).
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 300 $B/tests/gpu/gptoss_batching > $O/batching-tiny.txt 2>&1; echo "tiny rc=$?: $(tail -1 $O/batching-tiny.txt)"
grep -E "beside request 1|step [0-9]+: token" $O/batching-tiny.txt | cut -c1-300
timeout 300 $B/tests/gpu/gptoss_batching --model $M20B > $O/batching-20b.txt 2>&1; echo "20b rc=$?: $(tail -1 $O/batching-20b.txt)"
grep -E "beside request 1|step [0-9]+: token" $O/batching-20b.txt | cut -c1-300
echo "total ${SECONDS}s"
