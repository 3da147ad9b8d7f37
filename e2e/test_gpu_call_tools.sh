#!/usr/bin/env bash
# The call-script helpers of tests/gpu that need no GPU, as a call script meets them:
# - decode_ab.sh: --help, bad arguments named, and its per-run lines and table of means over a stand-in bench/decode
#   that prints what the real one does (its table and its "decode step ... ms GPU" lines);
# - throughput_ab.sh: the same over a stand-in bench/throughput (its table and the scheduler's steps by rows);
# - sass_load_waits.py: the waits it finds in a small SASS listing (a load used at once; one used after a wave);
# - stall_regions.py: the stall shares, the top instructions and the regions of a small ncu source page, plain and xz;
# - ncu_source.sh: --help and bad arguments named (without ncu it stops before profiling).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d /tmp/llmr-calltools-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
. e2e/lib/check.sh
S=tests/gpu/decode_ab.sh
mkdir -p "$tmp/m" && echo '{}' > "$tmp/m/config.json" && touch "$tmp/a.so" "$tmp/b.so"
# the stand-in: engine a steps 1.750 / 1.800 ms, b 1.715 / 1.770, b with LLMR_X=1 1.700 / 1.760
cat > "$tmp/decode" <<'SH'
#!/usr/bin/env bash
s1=1.750 s2=1.800
case "$2" in *b.so) s1=1.715 s2=1.770 ;; esac
[ "${LLMR_X:-}" = 1 ] && s1=1.700 s2=1.760
echo " context  prefill t/s   decode t/s   ms/token   ITL p50   ITL p99     GB/token   roofline t/s % roofline"
echo "     128        10137        563.0       1.78      1.76      1.99        3.727           1130      49.8%"
echo "    1024        28240        551.2       1.81      1.81      1.98        3.771           1117      49.4%"
echo "context 128: a token 1.776 ms = decode step $s1 ms GPU + sampling 0.016 ms GPU + 3.0 us host between them (256 steps)"
echo "context 1024: a token 1.814 ms = decode step $s2 ms GPU + sampling 0.014 ms GPU + 3.1 us host between them (256 steps)"
SH
chmod +x "$tmp/decode"
check "--help" 0 "decode_ab.sh [--bench FILE]" -- "$S" --help
check "unknown option" 2 "unknown option --frob" -- "$S" --frob
check "no bench" 2 "no bench/decode at" -- "$S" --bench "$tmp/none" --model "$tmp/m" a="$tmp/a.so" a
check "no runs" 2 "no runs named" -- "$S" --bench "$tmp/decode" --model "$tmp/m" a="$tmp/a.so"
check "a run without an engine" 2 "run 'c' names no engine" -- "$S" --bench "$tmp/decode" --model "$tmp/m" a="$tmp/a.so" c
check "a missing engine" 2 "engine $tmp/none.so is missing" -- "$S" --bench "$tmp/decode" --model "$tmp/m" a="$tmp/none.so" a
AB=("$S" --bench "$tmp/decode" --model "$tmp/m" --log "$tmp/log" a="$tmp/a.so" b="$tmp/b.so" bx="$tmp/b.so:LLMR_X=1" a b bx b a)
check "a run's line" 0 "b rc=0: 128: 563.0 (49.8%) 1024: 551.2 (49.4%) step 1.715 step 1.770" -- "${AB[@]}"
check "the first engine's means" 0 "a                      1.7500           1.8000  (2 runs)" -- "${AB[@]}"
check "a change against the first" 0 "b               1.7150 -2.00%    1.7700 -1.67%  (2 runs)" -- "${AB[@]}"
check "settings reach the run" 0 "bx              1.7000 -2.86%    1.7600 -2.22%  (1 runs)" -- "${AB[@]}"
check "the log" 0 "== bx" -- cat "$tmp/log"
# throughput_ab.sh, over a stand-in bench/throughput: engine a's 8-15-row steps 6.00 ms, b's 5.70, b with LLMR_X=1 5.40
T=tests/gpu/throughput_ab.sh
cat > "$tmp/throughput" <<'SH'
#!/usr/bin/env bash
r2=800.0 r8=1500.0 m=6.00
case "$2" in *b.so) r2=808.0 r8=1530.0 m=5.70 ;; esac
[ "${LLMR_X:-}" = 1 ] && r8=1560.0 m=5.40
echo "streams    prompt    output    wall s  out tok/s   ITL p50   ITL p99  step t/s    GB/step    roofline  % roof"
echo "      2       226       278      0.82      673.2      2.50      2.70     $r2       4.87        1731   46.2%"
echo "      8       320       274      1.88     1167.4      5.24      5.70    $r8       9.34        3609   42.3%"
echo ""
echo "2 streams, wall 0.82 s: prefill 0.03 s GPU (1 slices, 452 tokens, 30.7 ms/slice); decode steps 0.80 s GPU"
echo "    rows   steps mean rows   ms/step     GPU s"
echo "       1     217       1.0      1.69      0.37"
echo "     2-3     169       2.0      2.55      0.43"
echo "8 streams, wall 1.88 s: prefill 0.10 s GPU (3 slices, 2560 tokens, 33.0 ms/slice); decode steps 1.70 s GPU"
echo "    rows   steps mean rows   ms/step     GPU s"
echo "     2-3      20       2.5      2.80      0.06"
echo "    8-15     250       8.0      $m      1.50"
SH
chmod +x "$tmp/throughput"
check "throughput_ab --help" 0 "throughput_ab.sh [--bench FILE]" -- "$T" --help
check "throughput_ab no bench" 2 "no bench/throughput at" -- "$T" --bench "$tmp/none" --model "$tmp/m" a="$tmp/a.so" a
TB=("$T" --bench "$tmp/throughput" --model "$tmp/m" --log "$tmp/tlog" a="$tmp/a.so" b="$tmp/b.so" bx="$tmp/b.so:LLMR_X=1" a b bx b a)
check "throughput_ab a run's line" 0 "b rc=0: 2: 673.2 / 808.0; 8: 1167.4 / 1530.0;" -- "${TB[@]}"
check "throughput_ab the rates' means" 0 "b                 808.0 +1.0% / 673.2 +0.0%    1530.0 +2.0% / 1167.4 +0.0%  (2 runs)" -- "${TB[@]}"
check "throughput_ab the steps by rows" 0 "8: 8-15                      6.00       5.70 -5.0%      5.40 -10.0%" -- "${TB[@]}"
check "throughput_ab the log" 0 "== bx" -- cat "$tmp/tlog"
# sass_load_waits.py
W=tests/gpu/sass_load_waits.py
cat > "$tmp/k.s" <<'SASS'
        /*0000*/                   LDG.E.U16 R4, desc[UR8][R2.64] ;
        /*0010*/                   SHF.L.U32 R5, R4, 0x10, RZ ;
        /*0020*/                   LDG.E.128 R8, desc[UR8][R6.64] ;
        /*0030*/                   LDG.E.128 R12, desc[UR8][R6.64+0x10] ;
        /*0040*/                   STS.128 [R20], R8 ;
        /*0050*/                   EXIT ;
SASS
check "a load used at once" 0 "0010: SHF.L.U32 R5, R4, 0x10, RZ" -- "$W" "$tmp/k.s"
check "its count" 0 "reads the load at 0000 (0 loads issued since, 1 in flight)" -- "$W" "$tmp/k.s"
check "a store after a wave" 0 "reads the load at 0020 (1 loads issued since, 2 in flight)" -- "$W" "$tmp/k.s"
echo "not SASS" > "$tmp/x.s"
check "not a listing" 2 "has no SASS instructions" -- "$W" "$tmp/x.s"
check "a missing file" 2 "No such file" -- "$W" "$tmp/none.s"
# stall_regions.py
R=tests/gpu/stall_regions.py
cat > "$tmp/src.csv" <<'CSV'
"Kernel Name","void k(int)",
"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","Instructions Executed","stall_barrier","stall_long_sb","stall_wait","stall_barrier (Not Issued)"
"0x7f0000000000","      LDG.E R4, desc[UR8][R2.64]","2","2","100","0","0","2","0"
"0x7f0000000010","      FFMA R5, R4, R4, RZ","6","6","100","0","6","0","0"
"0x7f0000000020","      BAR.SYNC.DEFER_BLOCKING 0x0","0","0","100","0","0","0","0"
"0x7f0000000030","      @P0 BRA 0x7f0000000000","12","12","100","12","0","0","0"
CSV
check "the stall shares" 0 "4 instructions, 20 samples: barrier=60.0% long_sb=30.0% wait=10.0%" -- "$R" "$tmp/src.csv"
check "the top instruction" 0 "    30  60.0% x100      @P0 BRA 0x7f0000000000" -- "$R" --top 1 "$tmp/src.csv"
check "its reasons" 0 "barrier:12" -- "$R" --top 1 "$tmp/src.csv"
check "a region" 0 "loop            40.0% of samples,       200 warp-instructions: long_sb:75% wait:25%" -- \
  "$R" --top 0 --cuts 0,20 --names loop,sync "$tmp/src.csv"
python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.compress(open(sys.argv[1], "rb").read()))' "$tmp/src.csv" "$tmp/src.csv.xz"
check "an xz page" 0 "sync            60.0% of samples" -- "$R" --top 0 --cuts 0,20 --names loop,sync "$tmp/src.csv.xz"
check "cuts unnamed" 2 "--cuts must ascend and --names name each of them" -- "$R" --cuts 0,20 --names loop "$tmp/src.csv"
check "not a source page" 2 "not an ncu source page" -- "$R" "$tmp/k.s"
# ncu_source.sh
N=tests/gpu/ncu_source.sh
check "ncu_source --help" 0 "ncu_source.sh [--skip N] [--out DIR] NAME REGEX -- COMMAND..." -- "$N" --help
check "ncu_source bad arguments" 2 "want NAME REGEX -- COMMAND" -- "$N" gu gate_up
check "ncu_source a bad name" 2 "NAME 'a/b' is not a plain file name" -- "$N" a/b gate_up -- true
exit $fail
