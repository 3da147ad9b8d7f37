/* gpu_probe.cuh — whether a CUDA device is usable here, for the GPU test drivers written in plain C:
 * each driver's gpu_probe.cu wraps gpu_probe() in an extern "C" function of its own name. 1 with the
 * device's name in why, or 0 with the reason (no device, driver too old, ...). */
#ifndef LLMR_TESTS_GPU_PROBE_CUH
#define LLMR_TESTS_GPU_PROBE_CUH

#include <cuda_runtime.h>
#include <stdio.h>

static int gpu_probe(char *why, size_t n) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(why, n, "no usable CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 0;
    }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) snprintf(why, n, "%s (cc %d.%d)", p.name, p.major, p.minor);
    return 1;
}

#endif
