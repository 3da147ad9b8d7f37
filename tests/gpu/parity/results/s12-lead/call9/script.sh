#!/bin/bash
# session 12 call 9: kernel checks after the row-shift clamp (rows of fp32-subnormal magnitude)
B=$PWD/.gpu-lead/build; $B/tests/gpu/gptoss_kernels > $OUT/kernels.txt 2>&1
