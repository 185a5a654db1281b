/* GEMM through OpenBLAS or oneDNN (CPU) and cuBLAS (CUDA): C[m,n] = alpha
 * op(A) op(B) + beta C (+ bias row). The CPU kernel runs single-threaded
 * inside the task; parallelism comes from tiling in the graph builders. A
 * and B may be bf16 (both): fp32 accumulation, C fp32 (ops.h). */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "codelet_util.h"
#include "core/gemm_hook.h"
#include "starweave/ops.h"
#ifdef STARWEAVE_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
void omp_set_num_threads(int n); /* libgomp, oneDNN's threading runtime */
#endif

/* ---- the CPU backend ---- */

static sw_gemm_backend backend = SW_GEMM_OPENBLAS;
static const char *const backend_names[] = {"auto", "openblas", "onednn"};

const char *sw_gemm_backend_name(int b) { return b >= 0 && b < 3 ? backend_names[b] : "?"; }
int sw_gemm_backend_parse(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, backend_names[i])) return i;
    return -1;
}
sw_gemm_backend sw_gemm_get_backend(void) { return backend; }

#ifdef STARWEAVE_HAVE_ONEDNN
/* oneDNN's name of the ISA its kernels use */
static const char *onednn_isa(void)
{
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}
#endif

#ifdef STARWEAVE_HAVE_ONEDNN
/* The ISA oneDNN runs has every feature of isa (its values are bit sets). */
static int onednn_has(dnnl_cpu_isa_t isa)
{
    return ((unsigned)dnnl_get_effective_cpu_isa() & (unsigned)isa) == (unsigned)isa;
}
#endif

int sw_gemm_bf16_native(void)
{
#ifdef STARWEAVE_HAVE_ONEDNN
    return backend == SW_GEMM_ONEDNN && onednn_has(dnnl_cpu_isa_avx512_core_bf16);
#else
    return 0;
#endif
}

int sw_gemm_set_backend(sw_gemm_backend b, char *msg, size_t n)
{
#ifdef STARWEAVE_HAVE_ONEDNN
    if (b == SW_GEMM_AUTO) b = onednn_has(dnnl_cpu_isa_avx512_core) ? SW_GEMM_ONEDNN : SW_GEMM_OPENBLAS;
#else
    if (b == SW_GEMM_AUTO) b = SW_GEMM_OPENBLAS;
    if (b == SW_GEMM_ONEDNN) {
        if (msg && n) snprintf(msg, n, "gemm onednn: built without oneDNN (install libdnnl-dev and configure --with-gemm=onednn)");
        return -1;
    }
#endif
    if (b != SW_GEMM_OPENBLAS && b != SW_GEMM_ONEDNN) {
        if (msg && n) snprintf(msg, n, "gemm backend %d: must be auto, openblas or onednn", (int)b);
        return -1;
    }
    backend = b;
    return (int)b;
}

void sw_gemm_describe(char *buf, size_t n)
{
#ifdef STARWEAVE_HAVE_ONEDNN
    if (backend == SW_GEMM_ONEDNN) {
        const dnnl_version_t *v = dnnl_version();
        snprintf(buf, n, "onednn (oneDNN %d.%d.%d, %s, bf16 %s)", v->major, v->minor, v->patch, onednn_isa(),
                 sw_gemm_bf16_native() ? "native" : "widened to fp32");
        return;
    }
#endif
    char name[32] = "OpenBLAS", version[32] = "?"; /* openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." */
    const char *config = openblas_get_config(), *core = openblas_get_corename();
    if (config) sscanf(config, "%31s %31s", name, version);
    snprintf(buf, n, "openblas (%s %s, %s, bf16 widened to fp32)", name, version, core ? core : "?");
}

/* sw_init chooses the backend through these (src/core/gemm_hook.h) */
static int set_backend(int b, char *msg, size_t n) { return sw_gemm_set_backend((sw_gemm_backend)b, msg, n); }
static const sw_gemm_hooks gemm_hooks = {sw_gemm_backend_parse, set_backend, sw_gemm_describe};
__attribute__((constructor)) static void register_gemm_hooks(void) { sw_gemm_hooks_register(&gemm_hooks); }
#ifdef STARWEAVE_USE_CUDA
#include <starpu_cublas_v2.h>

#include "simd.h"
#endif

struct gemm_args {
    int transA, transB;
    float alpha, beta;
};

static void gemm_dims(void *buffers[], const struct gemm_args *g, int *m, int *n, int *k)
{
    *m = (int)(g->transA ? SW_COLS_OF(buffers[0]) : SW_ROWS_OF(buffers[0]));
    *k = (int)(g->transA ? SW_ROWS_OF(buffers[0]) : SW_COLS_OF(buffers[0]));
    *n = (int)(g->transB ? SW_ROWS_OF(buffers[1]) : SW_COLS_OF(buffers[1]));
}

static int is_bf16(void *buf) { return STARPU_MATRIX_GET_ELEMSIZE(buf) == sizeof(uint16_t); }

/* A bf16 operand's values widened (exactly) into a contiguous fp32 copy
 * (the caller frees it), *ld set. */
static float *widened(const uint16_t *s, int rows, int cols, int *ld)
{
    float *t = malloc(sizeof(float) * (size_t)(rows * cols > 0 ? rows * cols : 1));
    STARPU_ASSERT_MSG(t, "gemm: no memory to widen a bf16 operand");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) t[r * cols + c] = sw_f32_from_bf16(s[r * *ld + c]);
    *ld = cols;
    return t;
}

#ifdef STARWEAVE_HAVE_ONEDNN
/* oneDNN matmul primitives (fp32, or bf16 inputs with fp32 accumulation
 * and output), created once per shape and kept per worker thread with the
 * stream and memory objects they run on: creating one costs tens of
 * microseconds (the first, milliseconds), which every task would pay
 * without the cache, while a training step repeats a few dozen shapes.
 * alpha is the output scale, beta a sum post-op; strides give the
 * transposes and leading dimensions. */
typedef struct {
    int m, n, k, lda, ldb, ldc, transA, transB, bf16;
    float alpha, beta;
} mm_key;
typedef struct {
    mm_key key;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;
} mm_entry;
enum { MM_CACHE = 128 };
typedef struct {
    dnnl_stream_t stream;
    int used, next; /* entries in use; the next to replace when full */
    mm_entry e[MM_CACHE];
} mm_cache;

static dnnl_engine_t mm_engine;
static pthread_once_t mm_once = PTHREAD_ONCE_INIT;
static pthread_key_t mm_key_tls;
static int mm_warned_ref; /* said once that oneDNN fell back to its reference code */

#define DNNL_OK(call)                                                                                                  \
    do {                                                                                                               \
        dnnl_status_t st_ = (call);                                                                                    \
        STARPU_ASSERT_MSG(st_ == dnnl_success, "%s failed (oneDNN status %d)", #call, (int)st_);                       \
    } while (0)

static void mm_entry_free(mm_entry *e)
{
    dnnl_primitive_destroy(e->prim);
    dnnl_memory_destroy(e->a);
    dnnl_memory_destroy(e->b);
    dnnl_memory_destroy(e->c);
}

/* at a worker thread's exit */
static void mm_cache_free(void *p)
{
    mm_cache *c = p;
    for (int i = 0; i < c->used; i++) mm_entry_free(&c->e[i]);
    dnnl_stream_destroy(c->stream);
    free(c);
}

static void mm_init(void)
{
    DNNL_OK(dnnl_engine_create(&mm_engine, dnnl_cpu, 0));
    STARPU_ASSERT_MSG(pthread_key_create(&mm_key_tls, mm_cache_free) == 0, "gemm: pthread_key_create failed");
}

static void mm_create(mm_entry *e, const mm_key *k)
{
    const dnnl_data_type_t in = k->bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t ma, mb, mc;
    const dnnl_dims_t da = {k->m, k->k}, db = {k->k, k->n}, dc = {k->m, k->n};
    const dnnl_dims_t sa = {k->transA ? 1 : k->lda, k->transA ? k->lda : 1};
    const dnnl_dims_t sb = {k->transB ? 1 : k->ldb, k->transB ? k->ldb : 1}, sc = {k->ldc, 1};
    DNNL_OK(dnnl_memory_desc_init_by_strides(&ma, 2, da, in, sa));
    DNNL_OK(dnnl_memory_desc_init_by_strides(&mb, 2, db, in, sb));
    DNNL_OK(dnnl_memory_desc_init_by_strides(&mc, 2, dc, dnnl_f32, sc));
    dnnl_matmul_desc_t md;
    DNNL_OK(dnnl_matmul_desc_init(&md, &ma, &mb, NULL, &mc));
    dnnl_primitive_attr_t attr;
    DNNL_OK(dnnl_primitive_attr_create(&attr));
    if (k->alpha != 1.0f) DNNL_OK(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha));
    if (k->beta != 0.0f) {
        dnnl_post_ops_t po;
        DNNL_OK(dnnl_post_ops_create(&po));
        DNNL_OK(dnnl_post_ops_append_sum(po, k->beta));
        DNNL_OK(dnnl_primitive_attr_set_post_ops(attr, po));
        dnnl_post_ops_destroy(po);
    }
    dnnl_primitive_desc_t pd;
    DNNL_OK(dnnl_primitive_desc_create(&pd, &md, attr, mm_engine, NULL));
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
        !strncmp(impl, "ref", 3) && !__atomic_exchange_n(&mm_warned_ref, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "starweave: warning: oneDNN runs its reference matmul (%s) for a %s GEMM %dx%dx%d "
                        "(transA %d, transB %d, ld %d/%d/%d): slow; --gemm openblas avoids it\n",
                impl, k->bf16 ? "bf16" : "fp32", k->m, k->n, k->k, k->transA, k->transB, k->lda, k->ldb, k->ldc);
    DNNL_OK(dnnl_primitive_create(&e->prim, pd));
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    DNNL_OK(dnnl_memory_create(&e->a, &ma, mm_engine, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_memory_create(&e->b, &mb, mm_engine, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_memory_create(&e->c, &mc, mm_engine, DNNL_MEMORY_NONE));
    e->key = *k;
}

static void onednn_matmul(const mm_key *k, const void *A, const void *B, float *C)
{
    pthread_once(&mm_once, mm_init);
    mm_cache *c = pthread_getspecific(mm_key_tls);
    if (!c) {
        omp_set_num_threads(1); /* StarPU owns the cores: one OpenMP thread per worker */
        c = calloc(1, sizeof *c);
        STARPU_ASSERT_MSG(c, "gemm: no memory for the matmul cache");
        DNNL_OK(dnnl_stream_create(&c->stream, mm_engine, dnnl_stream_default_flags));
        pthread_setspecific(mm_key_tls, c);
    }
    mm_entry *e = NULL;
    for (int i = 0; i < c->used && !e; i++)
        if (!memcmp(&c->e[i].key, k, sizeof *k)) e = &c->e[i];
    if (!e) {
        if (c->used < MM_CACHE) e = &c->e[c->used++];
        else e = &c->e[c->next], c->next = (c->next + 1) % MM_CACHE, mm_entry_free(e);
        mm_create(e, k);
    }
    DNNL_OK(dnnl_memory_set_data_handle(e->a, (void *)A));
    DNNL_OK(dnnl_memory_set_data_handle(e->b, (void *)B));
    DNNL_OK(dnnl_memory_set_data_handle(e->c, C));
    const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, e->b}, {DNNL_ARG_DST, e->c}};
    DNNL_OK(dnnl_primitive_execute(e->prim, c->stream, 3, args));
    DNNL_OK(dnnl_stream_wait(c->stream));
}
#endif

void sw_gemm_cpu(int transA, int transB, int m, int n, int k, float alpha, const void *A, int lda, const void *B,
                 int ldb, float beta, float *C, int ldc, sw_dtype dtype)
{
    STARPU_ASSERT_MSG(dtype == SW_F32 || dtype == SW_BF16, "sw_gemm_cpu: operands must be fp32 or bf16");
    const int bf16 = dtype == SW_BF16;
    /* bf16 operands the chosen backend cannot multiply as bf16 (OpenBLAS;
     * oneDNN on a CPU without AVX512-BF16) are widened, exactly, to fp32
     * copies: the backend the user chose computes the product either way */
    const int widen = bf16 && !sw_gemm_bf16_native();
    float *ta = NULL, *tb = NULL;
    if (widen) {
        A = ta = widened(A, transA ? k : m, transA ? m : k, &lda);
        B = tb = widened(B, transB ? n : k, transB ? k : n, &ldb);
        sw_counter_add(SW_COUNT_GEMM_WIDENED, 1);
    }
#ifdef STARWEAVE_HAVE_ONEDNN
    /* empty products (a zero dimension) stay with BLAS's C = beta C */
    if (backend == SW_GEMM_ONEDNN && m > 0 && n > 0 && k > 0) {
        /* a key's padding bytes are compared: zero them */
        mm_key key;
        memset(&key, 0, sizeof key);
        key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb, key.ldc = ldc;
        key.transA = !!transA, key.transB = !!transB, key.bf16 = bf16 && !widen, key.alpha = alpha, key.beta = beta;
        onednn_matmul(&key, A, B, C);
        sw_counter_add(SW_COUNT_GEMM_ONEDNN, 1);
    } else
#endif
    {
        cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, m, n, k,
                    alpha, A, lda, B, ldb, beta, C, ldc);
        sw_counter_add(SW_COUNT_GEMM_OPENBLAS, 1);
    }
    if (bf16) sw_counter_add(SW_COUNT_GEMM_BF16, 1);
    free(ta);
    free(tb);
}

static void sgemm_cpu(void *a, void *b, const struct gemm_args *g, int m, int n, int k, float alpha, float beta,
                      float *c, int ldc)
{
    sw_gemm_cpu(g->transA, g->transB, m, n, k, alpha, (const void *)STARPU_MATRIX_GET_PTR(a), (int)SW_LD_OF(a),
                (const void *)STARPU_MATRIX_GET_PTR(b), (int)SW_LD_OF(b), beta, c, ldc, is_bf16(a) ? SW_BF16 : SW_F32);
}

static void gemm_cpu(void *buffers[], void *cl_arg)
{
    struct gemm_args g;
    starpu_codelet_unpack_args(cl_arg, &g);
    int m, n, k;
    gemm_dims(buffers, &g, &m, &n, &k);
    sgemm_cpu(buffers[0], buffers[1], &g, m, n, k, g.alpha, g.beta, SW_F32_OF(buffers[2]), (int)SW_LD_OF(buffers[2]));
}

/* buffers: A, B, bias[1,n], C */
static void gemm_bias_cpu(void *buffers[], void *cl_arg)
{
    struct gemm_args g;
    starpu_codelet_unpack_args(cl_arg, &g);
    int m, n, k;
    gemm_dims(buffers, &g, &m, &n, &k);
    const float *bias = SW_F32_OF(buffers[2]);
    float *c = SW_F32_OF(buffers[3]);
    int64_t ldc = SW_LD_OF(buffers[3]);
    for (int i = 0; i < m; i++) memcpy(c + i * ldc, bias, sizeof(float) * (size_t)n);
    sgemm_cpu(buffers[0], buffers[1], &g, m, n, k, 1.0f, 1.0f, c, (int)ldc);
}

#ifdef STARWEAVE_USE_CUDA
/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS
 * gets B first, with the worker's handle (bound to its stream by
 * starpu_cublas_init). fp32 throughout: cuBLAS's default math mode uses no
 * TF32. */
static void gemm_cublas(const struct gemm_args *g, int m, int n, int k, void *a, void *b, float beta, float *C,
                        int ldc)
{
    const void *A = (const void *)STARPU_MATRIX_GET_PTR(a), *B = (const void *)STARPU_MATRIX_GET_PTR(b);
    const int lda = (int)SW_LD_OF(a), ldb = (int)SW_LD_OF(b);
    const cublasOperation_t opB = g->transB ? CUBLAS_OP_T : CUBLAS_OP_N, opA = g->transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t st;
    if (is_bf16(a)) /* bf16 inputs, fp32 output and accumulation (tensor cores) */
        st = cublasGemmEx(starpu_cublas_get_local_handle(), opB, opA, n, m, k, &g->alpha, B, CUDA_R_16BF, ldb, A,
                          CUDA_R_16BF, lda, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    else
        st = cublasSgemm(starpu_cublas_get_local_handle(), opB, opA, n, m, k, &g->alpha, (const float *)B, ldb,
                         (const float *)A, lda, &beta, C, ldc);
    if (st != CUBLAS_STATUS_SUCCESS) STARPU_CUBLAS_REPORT_ERROR(st);
    sw_counter_add(SW_COUNT_GEMM_CUBLAS, 1);
    if (is_bf16(a)) sw_counter_add(SW_COUNT_GEMM_BF16, 1);
}

static void gemm_cuda(void *buffers[], void *cl_arg)
{
    struct gemm_args g;
    starpu_codelet_unpack_args(cl_arg, &g);
    int m, n, k;
    gemm_dims(buffers, &g, &m, &n, &k);
    gemm_cublas(&g, m, n, k, buffers[0], buffers[1], g.beta, SW_F32_OF(buffers[2]), (int)SW_LD_OF(buffers[2]));
}

static void gemm_bias_cuda(void *buffers[], void *cl_arg)
{
    struct gemm_args g;
    starpu_codelet_unpack_args(cl_arg, &g);
    int m, n, k;
    gemm_dims(buffers, &g, &m, &n, &k);
    float *c = SW_F32_OF(buffers[3]);
    const int64_t ldc = SW_LD_OF(buffers[3]);
    SW_CUDA_CHECK(sw_cuda_bias_rows(c, ldc, SW_F32_OF(buffers[2]), sw_vec_inc(buffers[2]), m, n,
                                    starpu_cuda_get_local_stream()));
    gemm_cublas(&g, m, n, k, buffers[0], buffers[1], 1.0f, c, (int)ldc);
}
#endif

SW_PERFMODEL(gemm_model, "sw_gemm");
SW_PERFMODEL(gemm_bias_model, "sw_gemm_bias");

/* C's mode depends on beta: with STARPU_VARIABLE_NBUFFERS the modes come
 * from each starpu_task_insert call (a fixed codelet mode must match). */
static struct starpu_codelet gemm_cl = {
    .cpu_funcs = {gemm_cpu},
    .cpu_funcs_name = {"gemm_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {gemm_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &gemm_model,
    .name = "gemm",
};

static struct starpu_codelet gemm_bias_cl = {
    .cpu_funcs = {gemm_bias_cpu},
    .cpu_funcs_name = {"gemm_bias_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {gemm_bias_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 4,
    .modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W},
    .model = &gemm_bias_model,
    .name = "gemm_bias",
};

/* op(A)[m,k] op(B)[k,n] -> C[m,n]; A and B both fp32 or both bf16, C fp32.
 * The kernel takes m and k from A, n from B and C only by its ld: without
 * this check a missing transpose left part of C unwritten. */
static void check_operands(const char *op, starpu_data_handle_t A, int transA, starpu_data_handle_t B, int transB,
                           starpu_data_handle_t C)
{
    SW_REQUIRE_MATRIX(op, A);
    SW_REQUIRE_MATRIX(op, B);
    SW_REQUIRE_MATRIX(op, C);
    const unsigned long m = transA ? starpu_matrix_get_nx(A) : starpu_matrix_get_ny(A),
                        k = transA ? starpu_matrix_get_ny(A) : starpu_matrix_get_nx(A),
                        k2 = transB ? starpu_matrix_get_nx(B) : starpu_matrix_get_ny(B),
                        n = transB ? starpu_matrix_get_ny(B) : starpu_matrix_get_nx(B);
    if (k != k2)
        sw_failf(__FILE__, __LINE__, "%s: op(A) [%lu,%lu] and op(B) [%lu,%lu] do not chain (%lu != %lu)", op, m, k, k2,
                 n, k, k2);
    if (starpu_matrix_get_ny(C) != m || starpu_matrix_get_nx(C) != n)
        sw_failf(__FILE__, __LINE__, "%s: C [%lu,%lu] is not the shape of op(A) op(B) [%lu,%lu]", op, SW_DIMS(C), m,
                 n);
    const size_t ea = starpu_matrix_get_elemsize(A), eb = starpu_matrix_get_elemsize(B),
                 ec = starpu_matrix_get_elemsize(C);
    if (!(ea == eb && (ea == 4 || ea == 2) && ec == 4))
        sw_failf(__FILE__, __LINE__,
                 "%s: A and B must both be fp32 or both bf16, C fp32 (element sizes %zu, %zu, %zu)", op, ea, eb, ec);
}

static double gemm_flops(starpu_data_handle_t A, int transA, starpu_data_handle_t B, int transB)
{
    double m = transA ? starpu_matrix_get_nx(A) : starpu_matrix_get_ny(A);
    double k = transA ? starpu_matrix_get_ny(A) : starpu_matrix_get_nx(A);
    double n = transB ? starpu_matrix_get_ny(B) : starpu_matrix_get_nx(B);
    return 2.0 * m * n * k;
}

void sw_gemm(starpu_data_handle_t A, int transA, starpu_data_handle_t B, int transB,
             starpu_data_handle_t C, float alpha, float beta)
{
    struct gemm_args g = {transA, transB, alpha, beta};
    check_operands("sw_gemm", A, transA, B, transB, C);
    SW_INSERT(&gemm_cl, STARPU_R, A, STARPU_R, B, beta == 0.0f ? STARPU_W : STARPU_RW, C,
              STARPU_VALUE, &g, sizeof g, STARPU_FLOPS, gemm_flops(A, transA, B, transB));
}

void sw_gemm_bias(starpu_data_handle_t A, int transA, starpu_data_handle_t B, int transB,
                  starpu_data_handle_t bias, starpu_data_handle_t C)
{
    struct gemm_args g = {transA, transB, 1.0f, 1.0f};
    check_operands("sw_gemm_bias", A, transA, B, transB, C);
    SW_ONE_PER_COL("sw_gemm_bias", bias, C);
    SW_INSERT(&gemm_bias_cl, STARPU_R, A, STARPU_R, B, STARPU_R, bias, STARPU_W, C, STARPU_VALUE, &g,
              sizeof g, STARPU_FLOPS, gemm_flops(A, transA, B, transB));
}
