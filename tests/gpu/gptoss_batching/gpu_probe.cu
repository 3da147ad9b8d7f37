/* gpu_probe.cu — tells the batching test (plain C) whether a CUDA device is usable here. */
#include <cuda_runtime.h>
#include <stdio.h>

extern "C" int batching_gpu_available(char *why, size_t n) {
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
