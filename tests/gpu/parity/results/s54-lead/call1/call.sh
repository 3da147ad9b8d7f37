#!/bin/bash
# Session 54, call 1: session 53's prepared call as it was written (e5-tiles2.diff applied, then make and pack.sh;
# run with carry [".gpu-lead/pkg"]). Its outputs are in this folder.
exec bash tests/gpu/parity/results/s53-lead/next/call.sh
