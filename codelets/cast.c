/* Casts between fp32 and bf16 (--dtype bf16: the GEMM operands). The
 * direction follows the element sizes of the two buffers (4 -> 2: round to
 * nearest even, 2 -> 4: exact, see bf16.h); both have the same shape and
 * may be strided tiles. */
#include "bf16.h"
#include "codelet_util.h"
#include "starweave/ops.h"
#ifdef STARWEAVE_USE_CUDA
#include "cuda/kernels.h"
#endif

#define ELEM_OF(buf) STARPU_MATRIX_GET_ELEMSIZE(buf)

static void cast_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t lds = SW_LD_OF(buffers[0]), ldd = SW_LD_OF(buffers[1]);
    if (ELEM_OF(buffers[0]) == sizeof(float)) {
        const float *s = SW_F32_OF(buffers[0]);
        uint16_t *d = (uint16_t *)STARPU_MATRIX_GET_PTR(buffers[1]);
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) d[r * ldd + c] = sw_bf16_from_f32(s[r * lds + c]);
        sw_counter_add(SW_COUNT_CAST_BF16, R * C);
    } else {
        const uint16_t *s = (const uint16_t *)STARPU_MATRIX_GET_PTR(buffers[0]);
        float *d = SW_F32_OF(buffers[1]);
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) d[r * ldd + c] = sw_f32_from_bf16(s[r * lds + c]);
    }
}

#ifdef STARWEAVE_USE_CUDA
static void cast_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    void *s = (void *)STARPU_MATRIX_GET_PTR(buffers[0]), *d = (void *)STARPU_MATRIX_GET_PTR(buffers[1]);
    if (ELEM_OF(buffers[0]) == sizeof(float)) sw_counter_add(SW_COUNT_CAST_BF16, R * C);
    SW_CUDA_CHECK(ELEM_OF(buffers[0]) == sizeof(float)
                      ? sw_cuda_cast_to_bf16((const float *)s, SW_LD_OF(buffers[0]), (uint16_t *)d,
                                             SW_LD_OF(buffers[1]), R, C, starpu_cuda_get_local_stream())
                      : sw_cuda_cast_from_bf16((const uint16_t *)s, SW_LD_OF(buffers[0]), (float *)d,
                                               SW_LD_OF(buffers[1]), R, C, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(cast_model, "sw_cast");
static struct starpu_codelet cast_cl = {
    .cpu_funcs = {cast_cpu},
    .cpu_funcs_name = {"cast_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {cast_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &cast_model,
    .name = "cast",
};

void sw_cast(starpu_data_handle_t src, starpu_data_handle_t dst)
{
    SW_SAME_SHAPE("sw_cast", src, dst);
    const size_t es = starpu_matrix_get_elemsize(src), ed = starpu_matrix_get_elemsize(dst);
    if (!((es == 4 && ed == 2) || (es == 2 && ed == 4)))
        sw_failf(__FILE__, __LINE__, "sw_cast: fp32 <-> bf16 only (element sizes %zu -> %zu)", es, ed);
    SW_INSERT(&cast_cl, STARPU_R, src, STARPU_W, dst);
}

starpu_data_handle_t sw_cast_bf16_temp(starpu_data_handle_t src)
{
    starpu_data_handle_t t;
    starpu_matrix_data_register(&t, -1, 0, starpu_matrix_get_nx(src), starpu_matrix_get_nx(src),
                                starpu_matrix_get_ny(src), sizeof(uint16_t));
    sw_cast(src, t);
    return t;
}

/* ---- bf16 packed two per fp32 element (ZeRO-3's bf16 gathers) ---- */

/* pack: buffers[0] fp32 [R, C], buffers[1] fp32-typed [R, C/2] holding bf16
 * pairs; unpack: buffers[0] the packed [R, C/2], buffers[1] bf16 [R, C]. In
 * both the packed rows are the bf16 rows' bytes. */
static void pack_cpu_dir(void *buffers[], int unpack)
{
    const int64_t R = SW_ROWS_OF(buffers[unpack]), C = SW_COLS_OF(buffers[unpack]); /* the bf16 or fp32 side */
    const int64_t ld16 = 2 * SW_LD_OF(buffers[!unpack]);
    if (unpack) {
        const uint16_t *s = (const uint16_t *)STARPU_MATRIX_GET_PTR(buffers[0]);
        uint16_t *d = (uint16_t *)STARPU_MATRIX_GET_PTR(buffers[1]);
        const int64_t ldd = SW_LD_OF(buffers[1]);
        for (int64_t r = 0; r < R; r++) memcpy(d + r * ldd, s + r * ld16, sizeof(uint16_t) * (size_t)C);
        return;
    }
    const float *s = SW_F32_OF(buffers[0]);
    uint16_t *d = (uint16_t *)STARPU_MATRIX_GET_PTR(buffers[1]);
    const int64_t lds = SW_LD_OF(buffers[0]);
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) d[r * ld16 + c] = sw_bf16_from_f32(s[r * lds + c]);
    sw_counter_add(SW_COUNT_CAST_BF16, R * C);
}

static void pack_cpu(void *buffers[], void *cl_arg) { (void)cl_arg, pack_cpu_dir(buffers, 0); }
static void unpack_cpu(void *buffers[], void *cl_arg) { (void)cl_arg, pack_cpu_dir(buffers, 1); }

#ifdef STARWEAVE_USE_CUDA
static void pack_cuda_dir(void *buffers[], int unpack)
{
    const int64_t R = SW_ROWS_OF(buffers[unpack]), C = SW_COLS_OF(buffers[unpack]); /* the bf16 or fp32 side */
    const int64_t ld16 = 2 * SW_LD_OF(buffers[!unpack]);
    void *s = (void *)STARPU_MATRIX_GET_PTR(buffers[0]), *d = (void *)STARPU_MATRIX_GET_PTR(buffers[1]);
    if (unpack) {
        SW_CUDA_CHECK(cudaMemcpy2DAsync(d, sizeof(uint16_t) * (size_t)SW_LD_OF(buffers[1]), s,
                                        sizeof(uint16_t) * (size_t)ld16, sizeof(uint16_t) * (size_t)C, (size_t)R,
                                        cudaMemcpyDeviceToDevice, starpu_cuda_get_local_stream()));
        return;
    }
    sw_counter_add(SW_COUNT_CAST_BF16, R * C);
    SW_CUDA_CHECK(sw_cuda_cast_to_bf16((const float *)s, SW_LD_OF(buffers[0]), (uint16_t *)d, ld16, R, C,
                                       starpu_cuda_get_local_stream()));
}

static void pack_cuda(void *buffers[], void *cl_arg) { (void)cl_arg, pack_cuda_dir(buffers, 0); }
static void unpack_cuda(void *buffers[], void *cl_arg) { (void)cl_arg, pack_cuda_dir(buffers, 1); }
#endif

SW_PERFMODEL(pack_model, "sw_bf16_pack");
static struct starpu_codelet pack_cl = {
    .cpu_funcs = {pack_cpu},
    .cpu_funcs_name = {"pack_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {pack_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &pack_model,
    .name = "bf16_pack",
};

SW_PERFMODEL(unpack_model, "sw_bf16_unpack");
static struct starpu_codelet unpack_cl = {
    .cpu_funcs = {unpack_cpu},
    .cpu_funcs_name = {"unpack_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {unpack_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &unpack_model,
    .name = "bf16_unpack",
};

/* [r, c] against the packed [r, c/2], element sizes (4 or 2, 4) */
static void check_packed(const char *fn, starpu_data_handle_t full, size_t full_elem, starpu_data_handle_t packed)
{
    const uint32_t r = starpu_matrix_get_ny(full), c = starpu_matrix_get_nx(full);
    if (starpu_matrix_get_elemsize(full) != full_elem || starpu_matrix_get_elemsize(packed) != 4 || c % 2 ||
        starpu_matrix_get_ny(packed) != r || starpu_matrix_get_nx(packed) != c / 2)
        sw_failf(__FILE__, __LINE__, "%s: [%u, %u] of %zu-byte elements against packed [%u, %u] of %zu-byte ones: "
                 "must be [r, c] and [r, c/2] of 4-byte ones, c even", fn, r, c, starpu_matrix_get_elemsize(full),
                 starpu_matrix_get_ny(packed), starpu_matrix_get_nx(packed), starpu_matrix_get_elemsize(packed));
}

void sw_bf16_pack(starpu_data_handle_t src, starpu_data_handle_t dst)
{
    check_packed("sw_bf16_pack", src, 4, dst);
    SW_INSERT(&pack_cl, STARPU_R, src, STARPU_W, dst);
}

void sw_bf16_unpack(starpu_data_handle_t src, starpu_data_handle_t dst)
{
    check_packed("sw_bf16_unpack", dst, 2, src);
    SW_INSERT(&unpack_cl, STARPU_R, src, STARPU_W, dst);
}
