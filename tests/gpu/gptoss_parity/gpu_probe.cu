/* gpu_probe.cu — tells the parity driver (plain C) whether a CUDA device is usable here. */
#include "tests/gpu/gpu_probe.cuh"

extern "C" int parity_gpu_available(char *why, size_t n) { return gpu_probe(why, n); }
