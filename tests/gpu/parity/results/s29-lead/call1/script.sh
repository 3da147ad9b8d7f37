#!/bin/bash
# session 29 call 1: (1) the router finish's phases in o_proj's last block (s28 finish-timing-diagnostic.diff, both
# modes, 6 launches each, 3 runs); (2) session 28's step 59 as three separate engines (a: one acq_rel atomic, b: the
# bulk copy in 4 pieces, c: the top-4's writes by lanes 0..3) beside main's, bench/decode A B C D x 3 at 128 / 1,024,
# which now also prints where a token's wall time goes (GPU step, GPU sampling, the host between them); (3) the SASS
# of the T = 1 tensor-core gate_up and of down, for reading offline.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/B/alt
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
for r in 1 2 3; do
  timeout 60 $A/diag/tests/gpu/gptoss_kernels --moe-decode-timing > /tmp/diag-$r.txt 2>&1; echo "diag run $r rc=$? ${SECONDS}s"
  grep -E "^FAIL" /tmp/diag-$r.txt | cut -c1-200
done
grep -hE "diag finish|timing o_proj" /tmp/diag-*.txt | cut -c1-260; cp /tmp/diag-1.txt $O/diag-1.txt
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2 3; do for v in main:$B/engines va:$A/va/engines vb:$A/vb/engines vc:$A/vc/engines; do
  n=${v%%:*}; so=${v#*:}/gptoss_cuda/libgptoss_cuda.so
  timeout 60 $B/bench/decode --model /tmp/m20b --engine $so --contexts 128,1024 > /tmp/decode-$n-r$r.txt 2>&1
  echo "decode $n run $r rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ |^context" /tmp/decode-$n-r$r.txt
done; done
for n in main va vb vc; do cat /tmp/decode-$n-r*.txt > $O/decode-$n.txt; done
CO=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
$CO -sass $B/engines/gptoss_cuda/libgptoss_cuda.so > /tmp/sass-all.txt 2>&1; echo "sass rc=$? lines $(wc -l < /tmp/sass-all.txt)"
awk '/Function : /{p = ($0 ~ /moe_gate_up_ring_kernelILi2ELb1E/ || $0 ~ /moe_down_decode_kernelILi1ELi2ELb1ELi90E/)} p' /tmp/sass-all.txt | xz -6 > $O/sass.txt.xz
grep -E "Function : " /tmp/sass-all.txt | grep -E "ring_kernel|down_decode" | head -20
echo "total ${SECONDS}s"
