/* sw_tensor: tiles of every split see the parent's data, and switching
 * between splits and modes keeps the data coherent. */
#include <string.h>

#include "testutil.h"

static void set_flag(void *arg) { __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE); }

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    const int64_t R = 37, C = 23;
    float *a = malloc(sizeof(float) * R * C), *b = malloc(sizeof(float) * R * C);
    double *ref = malloc(sizeof(double) * R * C);
    tu_rand(a, R * C, 1, 1.0f);
    sw_tensor *t = tu_tensor("t", R, C, a);
    sw_tensor *u = tu_tensor("u", R, C, NULL);

    /* tile ranges cover the extent exactly, in order */
    int64_t next = 0, ok = 1;
    for (int i = 0; i < 5; i++) {
        int64_t first, count;
        sw_tile_range(R, 5, i, &first, &count);
        ok &= first == next && count > 0;
        next = first + count;
    }
    tu_true("sw_tile_range covers 37 rows in 5 tiles", ok && next == R);

    /* u = t + t through row tiles (t read-only partitioned), then u += t through
     * column tiles: switching u from a row split (W) to a column split (RW). */
    starpu_data_handle_t *tr = sw_tensor_tiles(t, SW_ROWS, 5, STARPU_R);
    for (int i = 0; i < 5; i++) sw_add(tr[i], tr[i], sw_tensor_tiles(u, SW_ROWS, 5, STARPU_W)[i]);
    for (int j = 0; j < 3; j++)
        sw_axpy(1.0f, sw_tensor_tiles(t, SW_COLS, 3, STARPU_R)[j], sw_tensor_tiles(u, SW_COLS, 3, STARPU_RW)[j]);
    /* whole-tensor write of t after two live read-only splits */
    sw_axpy(-1.0f, sw_tensor_whole(u, STARPU_R), sw_tensor_whole(t, STARPU_RW)); /* t = t - 3t = -2t */
    sw_tensor_read_host(u, b);
    for (int64_t i = 0; i < R * C; i++) ref[i] = 3.0 * a[i];
    tu_close("row tiles then column tiles", b, ref, R * C, 1e-6, 0);
    sw_tensor_read_host(t, b);
    for (int64_t i = 0; i < R * C; i++) ref[i] = -2.0 * a[i];
    tu_close("whole write after read-only splits", b, ref, R * C, 1e-6, 0);

    /* column tiles are strided views of the row-major parent: each keeps
     * the full row as its ld, with its share of the columns */
    for (int j = 0; j < 4; j++) {
        starpu_data_handle_t h = sw_tensor_tiles(u, SW_COLS, 4, STARPU_W)[j];
        int64_t first, count;
        sw_tile_range(C, 4, j, &first, &count);
        char what[128];
        snprintf(what, sizeof what, "column tile %d of 4: ld = %d (full row), %lld columns from %lld", j, (int)C,
                 (long long)count, (long long)first);
        tu_true(what, starpu_matrix_get_local_ld(h) == (uint32_t)C && starpu_matrix_get_nx(h) == (uint32_t)count &&
                          starpu_matrix_get_ny(h) == (uint32_t)R);
    }
    /* explicit column sizes (a q | k | v split) and a grid: u = t + t block
     * by block through the split, then u += t through a 3 x 2 grid */
    sw_tensor_write_host(t, a);
    const int64_t qkv[3] = {C - 4, 2, 2};
    starpu_data_handle_t *ts = sw_tensor_split(t, SW_COLS, 3, qkv, STARPU_R);
    for (int j = 0; j < 3; j++) {
        starpu_data_handle_t h = sw_tensor_split(u, SW_COLS, 3, qkv, STARPU_W)[j];
        if (j == 1) tu_true("split tile 1 is 2 columns at offset C-4",
                            starpu_matrix_get_nx(h) == 2 && starpu_matrix_get_ny(h) == (uint32_t)R);
        sw_add(ts[j], ts[j], h);
    }
    starpu_data_handle_t *tg = sw_tensor_grid(t, 3, NULL, 2, NULL, STARPU_R);
    for (int k = 0; k < 6; k++) sw_axpy(1.0f, tg[k], sw_tensor_grid(u, 3, NULL, 2, NULL, STARPU_RW)[k]);
    sw_tensor_read_host(u, b);
    for (int64_t i = 0; i < R * C; i++) ref[i] = 3.0 * a[i];
    tu_close("explicit-size column split then a 3x2 grid", b, ref, R * C, 1e-6, 0);

    /* sw_tensor_invalidate, then a write through tiles: ordered after the
     * accesses pending on the whole tensor before the invalidation. The
     * reader here is an acquire held by the application, as StarPU-MPI holds
     * a detached send's data until the request completes; without the
     * order-only write after the invalidation (src/core/tensor.c), StarPU's
     * partitioning of the "uninitialized" handle skips its switch task and
     * the tiles' writes run at once, under the reader (docs/runtime-notes.md). */
    sw_tensor *v = tu_tensor("v", R, C, a);
    /* as a layer's scratch: tiles written (v += 0 u), then the whole read
     * (after the unpartitioning), invalidated, tiles written again */
    for (int i = 0; i < 2; i++)
        sw_axpy(0.0f, sw_tensor_tiles(u, SW_ROWS, 2, STARPU_R)[i], sw_tensor_tiles(v, SW_ROWS, 2, STARPU_RW)[i]);
    starpu_data_handle_t hv = sw_tensor_whole(v, STARPU_R);
    int held = 0;
    if (starpu_data_acquire_cb(hv, STARPU_R, set_flag, &held)) return 99;
    while (!__atomic_load_n(&held, __ATOMIC_ACQUIRE)) usleep(1000);
    sw_tensor_invalidate(v);
    starpu_data_handle_t *vt = sw_tensor_tiles(v, SW_ROWS, 2, STARPU_W);
    int wrote = 0;
    for (int i = 0; i < 2; i++) sw_zero(vt[i]);
    if (starpu_data_acquire_cb(vt[1], STARPU_R, set_flag, &wrote)) return 99; /* the tiles' writes have run */
    for (int i = 0; i < 500 && !__atomic_load_n(&wrote, __ATOMIC_ACQUIRE); i++) usleep(1000); /* 0.5 s: they may not */
    int early = __atomic_load_n(&wrote, __ATOMIC_ACQUIRE), intact = !memcmp(v->data, a, sizeof(float) * R * C);
    starpu_data_release(hv);
    while (!__atomic_load_n(&wrote, __ATOMIC_ACQUIRE)) usleep(1000);
    starpu_data_release(vt[1]);
    starpu_task_wait_for_all();
    int zeroed = 1;
    for (int64_t i = 0; i < R * C; i++) zeroed &= ((float *)v->data)[i] == 0.0f;
    tu_true("invalidate, then tiles written: the writes wait for the reader held before (not run in 0.5 s, "
            "the data intact), run once it is released",
            !early && intact && zeroed);
    sw_tensor_free(v);
    sw_tensor_free(t);
    sw_tensor_free(u);
    free(a); free(b); free(ref);
    return tu_finish();
}
