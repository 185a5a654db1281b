/* Submit helpers refuse mismatched shapes before submitting (tests/test_shapes.sh).
 *   test_shapes valid   every checked helper with matching shapes (vectors as [1,n]
 *                       and [n,1]): submitted, run, exit 0
 *   test_shapes CASE    one mismatched call: the helper must refuse it (sw_failf: the
 *                       message, exit 2); returning is a failure (exit 3) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starweave.h"

#define MAXH 64
static starpu_data_handle_t handles[MAXH];
static void *buffers[MAXH];
static int nh;

/* a zeroed [rows, cols] matrix of elem-byte elements in main RAM */
static starpu_data_handle_t matrix_of(unsigned rows, unsigned cols, size_t elem)
{
    if (nh == MAXH) { fprintf(stderr, "test_shapes: too many handles\n"); exit(99); }
    void *p = calloc((size_t)rows * cols, elem);
    if (!p) { perror("calloc"); exit(99); }
    starpu_matrix_data_register(&handles[nh], STARPU_MAIN_RAM, (uintptr_t)p, cols, cols, rows, elem);
    buffers[nh] = p;
    return handles[nh++];
}
static starpu_data_handle_t m(unsigned rows, unsigned cols) { return matrix_of(rows, cols, sizeof(float)); }

static const sw_rng_key key = {0};
static const sw_adamw_args adamw = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1};

static int valid(void)
{
    /* x [8,16]; per-row vectors [8,1] or [1,8]; per-column [1,16] or [16,1] */
    starpu_data_handle_t x = m(8, 16), y = m(8, 16), z = m(8, 16);
    sw_gemm(m(8, 4), 0, m(4, 16), 0, y, 1.0f, 0.0f);
    sw_gemm(m(4, 8), 1, m(16, 4), 1, y, 1.0f, 1.0f);
    sw_gemm_bias(m(8, 4), 0, m(16, 4), 1, m(16, 1), z);
    sw_add(x, y, z);
    sw_axpy(2.0f, x, y);
    sw_bias_add(x, m(1, 16));
    sw_bias_add(x, m(16, 1));
    sw_copy_flat(x, m(1, 128), 0);
    sw_colsum(x, m(1, 16), 1.0f, 0.0f);
    sw_gelu_fwd(x, y);
    sw_gelu_bwd(x, y);
    sw_softmax_fwd(x, y);
    sw_softmax_bwd(x, y, z);
    sw_dropout_fwd(x, y, 0.1f, &key);
    sw_layernorm_fwd(x, m(1, 16), m(16, 1), y, m(8, 1), m(1, 8), 1e-5f);
    sw_layernorm_bwd(y, x, m(1, 16), m(8, 1), m(8, 1), z, m(1, 16), m(1, 16), 0);
    sw_rmsnorm_fwd(x, m(1, 16), y, m(8, 1), 1e-5f);
    sw_rmsnorm_bwd(y, x, m(1, 16), m(8, 1), z, m(1, 16), 1);
    sw_cast(x, matrix_of(8, 16, 2));
    sw_adamw(x, y, z, m(8, 16), &adamw);
    sw_copy(z, x);
    starpu_task_wait_for_all();
    return 0;
}

/* one mismatched call per case; each helper must not return */
static int refused(const char *c)
{
    if (!strcmp(c, "gemm")) sw_gemm(m(64, 128), 0, m(256, 32), 0, m(64, 32), 1.0f, 0.0f);
    else if (!strcmp(c, "gemm_transpose")) sw_gemm(m(64, 128), 0, m(32, 128), 0, m(64, 32), 1.0f, 0.0f);
    else if (!strcmp(c, "gemm_c")) sw_gemm(m(64, 128), 0, m(128, 32), 0, m(64, 64), 1.0f, 0.0f);
    else if (!strcmp(c, "gemm_bias")) sw_gemm_bias(m(64, 128), 0, m(128, 32), 0, m(1, 16), m(64, 32));
    else if (!strcmp(c, "gemm_types")) sw_gemm(matrix_of(64, 128, 2), 0, m(128, 32), 0, m(64, 32), 1.0f, 0.0f);
    else if (!strcmp(c, "add")) sw_add(m(64, 128), m(64, 64), m(64, 128));
    else if (!strcmp(c, "axpy")) sw_axpy(1.0f, m(64, 128), m(128, 64));
    else if (!strcmp(c, "bias_add")) sw_bias_add(m(64, 128), m(1, 64));
    else if (!strcmp(c, "copy_flat")) sw_copy_flat(m(64, 128), m(1, 1000), 0);
    else if (!strcmp(c, "colsum")) sw_colsum(m(64, 128), m(1, 64), 1.0f, 0.0f);
    else if (!strcmp(c, "gelu")) sw_gelu_fwd(m(64, 128), m(64, 127));
    else if (!strcmp(c, "softmax")) sw_softmax_bwd(m(64, 128), m(64, 128), m(63, 128));
    else if (!strcmp(c, "dropout")) sw_dropout_fwd(m(64, 128), m(128, 64), 0.1f, &key);
    else if (!strcmp(c, "layernorm")) sw_layernorm_fwd(m(64, 128), m(1, 128), m(1, 128), m(64, 128), m(128, 1), m(64, 1), 1e-5f);
    else if (!strcmp(c, "rmsnorm")) sw_rmsnorm_bwd(m(64, 128), m(64, 128), m(1, 64), m(64, 1), m(64, 128), m(1, 128), 0);
    else if (!strcmp(c, "cast")) sw_cast(m(64, 128), matrix_of(64, 64, 2));
    else if (!strcmp(c, "adamw")) sw_adamw(m(64, 128), m(64, 128), m(64, 128), m(128, 64), &adamw);
    else if (!strcmp(c, "copy")) sw_copy(m(64, 128), m(64, 64));
    else {
        fprintf(stderr, "test_shapes: unknown case '%s'\n", c);
        return 99;
    }
    printf("test_shapes: %s: the mismatched call was submitted, not refused\n", c);
    starpu_task_wait_for_all();
    return 3;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_shapes valid|CASE\n");
        return 99;
    }
    sw_options opt;
    sw_options_default(&opt);
    opt.quiet = 1;
    if (sw_init(&argc, &argv, &opt) != 0) return 99;
    const int rc = !strcmp(argv[1], "valid") ? valid() : refused(argv[1]);
    for (int i = 0; i < nh; i++) {
        starpu_data_unregister(handles[i]);
        free(buffers[i]);
    }
    if (rc == 0) printf("PASS every checked helper accepts matching shapes (vectors either way) and runs\n");
    sw_shutdown();
    return rc;
}
