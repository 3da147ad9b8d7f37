#!/bin/bash
# session 30 call 5: pattern.cu (loads only; the batched expert kernel's weight access against a tile-contiguous one)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
.gpu-lead/pkg/pattern | tee $OUT/pattern.txt
