/* Element-wise adds and the column sum (codelets/add.c). colsum runs one
 * thread per column over the rows in order, in double: the CPU's sum. */
#include "cuda_util.cuh"

__global__ void add_kernel(const float *x, int64_t ldx, const float *y, int64_t ldy, float *z, int64_t ldz,
                           int64_t R, int64_t C)
{
    SW_FOR_ROWS(r, R)
    SW_FOR_COLS(c, C) z[r * ldz + c] = x[r * ldx + c] + y[r * ldy + c];
}

__global__ void axpy_kernel(float alpha, const float *x, int64_t ldx, float *y, int64_t ldy, int64_t R, int64_t C)
{
    SW_FOR_ROWS(r, R)
    SW_FOR_COLS(c, C) y[r * ldy + c] += alpha * x[r * ldx + c];
}

__global__ void bias_add_kernel(float *x, int64_t ldx, const float *b, int64_t incb, int64_t R, int64_t C)
{
    SW_FOR_ROWS(r, R)
    SW_FOR_COLS(c, C) x[r * ldx + c] += b[c * incb];
}

__global__ void colsum_kernel(const float *x, int64_t ldx, float *y, int64_t incy, int64_t R, int64_t C, float alpha,
                              float beta)
{
    SW_FOR_ALL(c, C) {
        double acc = 0.0;
        for (int64_t r = 0; r < R; r++) acc += (double)x[r * ldx + c];
        /* beta == 0: y is write-only, its old contents (maybe NaN) are not read */
        if (beta == 0.0f) y[c * incy] = (float)((double)alpha * acc);
        else y[c * incy] = (float)((double)beta * y[c * incy] + (double)alpha * acc);
    }
}

__global__ void copy_flat_kernel(const float *x, int64_t ldx, int64_t C, float *y, int64_t ldy, int64_t CY,
                                 int64_t n, int accumulate)
{
    SW_FOR_ALL(i, n) {
        float *d = y + (i / CY) * ldy + i % CY;
        const float v = x[(i / C) * ldx + i % C];
        *d = accumulate ? *d + v : v;
    }
}

extern "C" cudaError_t sw_cuda_add(const float *x, int64_t ldx, const float *y, int64_t ldy, float *z, int64_t ldz,
                                   int64_t R, int64_t C, cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(add_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, x, ldx, y, ldy, z, ldz, R, C);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_axpy(float alpha, const float *x, int64_t ldx, float *y, int64_t ldy, int64_t R,
                                    int64_t C, cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(axpy_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, alpha, x, ldx, y, ldy, R, C);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_bias_add(float *x, int64_t ldx, const float *b, int64_t incb, int64_t R, int64_t C,
                                        cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(bias_add_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, x, ldx, b, incb, R, C);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_colsum(const float *x, int64_t ldx, float *y, int64_t incy, int64_t R, int64_t C,
                                      float alpha, float beta, cudaStream_t s)
{
    if (C <= 0) return cudaSuccess;
    SW_LAUNCH(colsum_kernel, sw_grid1d(C, SW_THREADS), SW_THREADS, 0, s, x, ldx, y, incy, R, C, alpha, beta);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_copy_flat(const float *x, int64_t ldx, int64_t R, int64_t C, float *y, int64_t ldy,
                                         int64_t RY, int64_t CY, int accumulate, cudaStream_t s)
{
    (void)RY;
    const int64_t n = R * C;
    if (n <= 0) return cudaSuccess;
    SW_LAUNCH(copy_flat_kernel, sw_grid1d(n, SW_THREADS), SW_THREADS, 0, s, x, ldx, C, y, ldy, CY, n, accumulate);
    return cudaGetLastError();
}
