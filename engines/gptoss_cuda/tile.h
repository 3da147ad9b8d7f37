/* tile.h — the register tile shared by the SIMT tiled matmuls (linear.cu, moe.cu).
 *
 * A 256-thread block computes a 64 x 64 output tile; thread (tx, ty) = (tid % 16, tid / 16) owns the
 * 4 x 4 outputs at rows ty + 16i and columns tx + 16j. Per 32-wide k step both operands sit in shared
 * memory k-major with one float of padding per row (xs[k][row], ws[k][col]), so the loads below hit 16
 * distinct banks. Kept in one place so both kernels do the same fp32 arithmetic in the same order. */
#ifndef GPTOSS_CUDA_TILE_H
#define GPTOSS_CUDA_TILE_H

#define GPTOSS_TILE 64 /* rows and columns of a block's output tile */
#define GPTOSS_TILE_K 32 /* k per shared-memory step */

/* acc[i][j] += sum over the 32 k of xs[k][ty + 16i] * ws[k][tx + 16j] (fmaf, k ascending). */
static __device__ __forceinline__ void gptoss_tile_fma(const float (*xs)[GPTOSS_TILE + 1],
                                                       const float (*ws)[GPTOSS_TILE + 1], int tx, int ty,
                                                       float acc[4][4]) {
#pragma unroll 8
    for (int kk = 0; kk < GPTOSS_TILE_K; kk++) {
        float xv[4], wv[4];
#pragma unroll
        for (int i = 0; i < 4; i++) xv[i] = xs[kk][ty + 16 * i];
#pragma unroll
        for (int j = 0; j < 4; j++) wv[j] = ws[kk][tx + 16 * j];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc[i][j] = fmaf(xv[i], wv[j], acc[i][j]);
    }
}

#endif
