/* gpu_probe.cu — tells the batching test (plain C) whether a CUDA device is usable here. */
#include "tests/gpu/gpu_probe.cuh"

extern "C" int batching_gpu_available(char *why, size_t n) { return gpu_probe(why, n); }
