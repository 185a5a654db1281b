/* Tensor (+ sequence) and data parallel GPT, and gradient accumulation,
 * against the single-rank model, under mpirun: every rank builds both the
 * single-rank model (no communication, the whole batch at once) and the
 * parallel one over all ranks (tp = ranks / dp), trains both for 3 steps
 * on the same global batches, and compares the loss of every step (relative 1e-5),
 * and every gradient of the last step (max |parallel - single| <= 1e-4
 * max |single| per tensor, the single-rank gradient cut to this rank's
 * slice by sw_gpt_slice). The losses of steps 2.. check the updates too.
 * The tested model runs whole steps through the step driver (sw_gpt_step,
 * as gpt_train does, on every layout: the gradients compared are those its
 * update used); the single-rank reference runs micro-batch by micro-batch
 * through sw_gpt_forward / sw_gpt_backward / sw_gpt_update, so the two
 * step paths are checked against each other.
 * (Parameters are not compared one by one: AdamW turns the rounding noise
 * of a gradient that is exactly 0 in theory -- the key bias, to which
 * softmax is invariant -- into a full +-lr step.)
 *
 * With context parallelism (--ulysses U, --ring R) also the attention FLOPs
 * each rank submitted: equal over the ring ranks within 1 % with zigzag,
 * and without it the imbalance is printed (last / first ring rank).
 *
 * --recompute MODE [--recompute-every K] (activation memory): the parallel
 * model recomputes as asked and the reference is the same layout with
 * selective recomputation; before every step the tested model gets the
 * reference's parameters, so that each step's loss and every gradient are
 * compared from the same point: bit for bit with full, relative 1e-6 with
 * none (AdamW would turn rounding noise into lr-sized moves otherwise, see
 * below).
 *
 * --dtype bf16 (both models): each step from the single rank's parameters
 * too; losses relative 1e-5, gradients 2^-7 (bf16's precision, see below).
 *
 * --device cuda (GPU builds): one CUDA worker per rank; the tested model's
 * tasks run on CUDA workers, the reference's on CPU workers (each op that
 * has a CUDA implementation; sw_set_task_where before each model's
 * submissions, which is when a task takes it). Skipped (exit 77, a SKIP line
 * from every rank) where a rank has no CUDA or no CPU worker.
 *
 * usage: test_tp [--model gpt2|llama] [--sp] [--tp-recompute-allgather] [--kv-heads K] [--heads A]
 *                [--dropout P] [--steps N] [--dp D] [--grad-accum K] [--zero 1|2|3] [--zero-prefetch K]
 *                [--ulysses U] [--ring R] [--no-zigzag] [--seq S]
 *                [--recompute MODE] [--recompute-every K] [--dtype bf16] [--pp P] [--pp-inflight Q]
 *                [--layers L] [--batch B] [--ignore-index N]
 *                [--device cuda]
 *                (tp = the number of ranks / (dp * ulysses * ring * pp))
 *
 * --ignore-index N: about a third of the targets are N (uneven over ranks
 * and micro-batches); both models ignore them, so the loss is the mean over
 * the counted rows of the global batch on every layout.
 *
 * --pp P (pipeline stages): each rank
 * compares the gradients of the parameters its stage holds; the loss
 * every rank reads is the one the last stage sent; the third step runs
 * the order computed from the second's measured costs
 * (sw_pipeline_replan, as in gpt_train). */
#include <string.h>

#include "config.h"

#include "testutil.h"

static void batch(const sw_gpt_config *c, int step, int32_t *tok, int32_t *tgt)
{
    uint64_t s = c->seed * 7919 + (uint64_t)step;
    for (int i = 0; i < c->seq * c->batch; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        tok[i] = (int32_t)(s % (uint64_t)c->vocab);
        tgt[i] = (int32_t)((s >> 20) % (uint64_t)c->vocab);
        /* --ignore-index: about a third of the targets ignored, unevenly over ranks and micro-batches */
        if (c->ignore_index != SW_CE_IGNORE_NONE && (s >> 40) % 3 == 0) tgt[i] = c->ignore_index;
    }
}

/* one step of the tested model as gpt_train submits it: every micro-batch
 * of this rank loaded (its columns of the global [seq, batch] tokens),
 * then the step driver's whole step (sw_gpt_step: every micro-batch's
 * forward and backward, the reduction, the update), on any layout, pp 1
 * included -- the gradients compared are those the update used */
static void step_driver(sw_gpt *m, int step, const int32_t *tok, const int32_t *tgt)
{
    for (int k = 0; k < sw_gpt_get_config(m)->grad_accum; k++) sw_gpt_load_micro_batch(m, k, tok, tgt);
    sw_gpt_step(m, step);
}

/* one step of the reference: without stages, micro-batch by micro-batch
 * through the per-micro-batch API (sw_gpt_forward, sw_gpt_backward), the
 * update only where asked; with stages (the same layout, recomputation)
 * the driver's step. Returns whether the update ran. */
static int step_reference(sw_gpt *m, int step, const int32_t *tok, const int32_t *tgt, int update)
{
    const sw_gpt_config *c = sw_gpt_get_config(m);
    if (c->pp > 1) {
        step_driver(m, step, tok, tgt);
        return 1;
    }
    /* an ignore index counts the rows of every micro-batch at micro-batch 0: all loaded first */
    for (int k = 0; k < c->grad_accum && c->ignore_index != SW_CE_IGNORE_NONE; k++)
        sw_gpt_load_micro_batch(m, k, tok, tgt);
    for (int k = 0; k < c->grad_accum; k++) {
        if (c->ignore_index == SW_CE_IGNORE_NONE) sw_gpt_load_micro_batch(m, k, tok, tgt);
        else sw_gpt_set_micro_batch(m, k);
        sw_gpt_forward(m, step);
        sw_gpt_backward(m, step);
    }
    if (update) sw_gpt_update(m, step);
    return update;
}

/* max |got - ref| / max |ref| of one tensor */
static double rel_err(const float *got, const float *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (!(e <= num)) num = e; /* NaN propagates */
        if (fabs(ref[i]) > den) den = fabs(ref[i]);
    }
    return den > 0 ? num / den : num;
}

/* the worst gradient, summed over dp as the update used it (with ZeRO-1/2/3
 * this rank's rows of it); same: ref has par's layout, gradients compared
 * as they are */
static double compare(sw_gpt *single, sw_gpt *par, int tp_rank, int same, char *worst_name, size_t len)
{
    const sw_gpt_config *c = sw_gpt_get_config(par);
    double worst = 0;
    for (int i = 0; i < sw_gpt_num_params(c); i++) {
        int64_t row0 = 0;
        if (!sw_params_held(sw_gpt_params(par), i)) continue; /* another pipeline stage's */
        /* the same layout with ZeRO-2/3: both models' shards (they keep no whole gradient) */
        int shards = same && c->zero;
        sw_tensor *full = shards ? sw_gpt_reduced_grad(single, i, &row0) : sw_gpt_grad(single, i);
        sw_tensor *mine = same && !shards ? sw_gpt_grad(par, i) : sw_gpt_reduced_grad(par, i, &row0);
        if (shards) row0 = 0;
        float *f = tu_read(full), *got = tu_read(mine);
        int64_t lrows, lcols; /* this rank's TP slice (ZeRO-2/3 keep no whole gradient: its shape) */
        sw_gpt_local_shape(c, tp_rank, i, &lrows, &lcols);
        float *want = malloc(sizeof(float) * (size_t)(lrows * lcols));
        if (!want) { perror("malloc"); exit(99); }
        if (same) memcpy(want, f, sw_tensor_bytes(full));
        else sw_gpt_slice(c, tp_rank, i, f, want);
        double e = rel_err(got, want + row0 * mine->cols, sw_tensor_numel(mine));
        if (!(e <= worst)) {
            worst = e;
            snprintf(worst_name, len, "%s", mine->name);
        }
        free(f); free(got); free(want);
    }
    return worst;
}

/* --device cuda where a rank lacks a CUDA or a CPU worker: every rank says
 * SKIP (rank 0 with the reason) and the test exits 77 */
static int cuda_missing(void)
{
    char why[200];
    snprintf(why, sizeof why, "--device cuda needs a CUDA worker and a CPU worker (rank 0 has %d CUDA, %d CPU workers; %s)",
             sw_ncuda(), sw_ncpus(),
#ifdef STARWEAVE_USE_CUDA
             "no usable GPU"
#else
             "built without CUDA, configure --enable-cuda"
#endif
    );
    return !tu_all_ranks_can(sw_ncuda() > 0 && sw_ncpus() > 0, why);
}

int main(int argc, char **argv)
{
    /* known before sw_init: it sets how many CUDA workers start */
    int cuda = 0;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--device")) cuda = !strcmp(argv[i + 1], "cuda");
    tu_init_ncuda(&argc, &argv, cuda ? 1 : -1); /* one GPU, whatever $STARPU_NCUDA says (make check sets 0) */
    if (cuda && cuda_missing()) {
        sw_shutdown();
        return 77;
    }
    /* where each model's tasks may run (0: anywhere, the default) */
    const unsigned ref_where = cuda ? STARPU_CPU : 0, par_where = cuda ? STARPU_CUDA : 0;
    int world = sw_world_size(), steps = 3, dp = 1, accum = 1;
    sw_gpt_config c;
    sw_gpt_config_default(&c);
    c.layers = 2; c.hidden = 64; c.heads = 8; c.vocab = 500; /* padded to 512 for tp = 1, 2, 4 alike */ c.seq = 16; c.max_pos = 16; c.batch = 4;
    c.tiles = 2; c.seed = 77; c.weight_decay = 0.01f;
    /* AdamW's first step moves every weight by about +-lr whatever the size
     * of its gradient; with eps 1e-8 the sign of gradients that are rounding
     * noise (the key bias's is exactly 0 in theory) decides a 1e-3 move, and
     * that differs between any two summation orders (measured: step-3
     * gradients 1.6e-4 apart after one such step, 8e-7 at step 1). eps 1e-6
     * damps moves driven by noise below 1e-6 and keeps the rest. */
    c.adam_eps = 1e-6f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";
        if (!strcmp(a, "--sp")) c.sp = 1;
        else if (!strcmp(a, "--tp-recompute-allgather")) c.tp_recompute_allgather = 1;
        else if (!strcmp(a, "--kv-heads")) c.kv_heads = atoi(v), i++;
        else if (!strcmp(a, "--model")) c.model = sw_model_parse(v), i++;
        else if (!strcmp(a, "--clip-grad")) c.clip_grad = (float)atof(v), i++;
        else if (!strcmp(a, "--heads")) c.heads = atoi(v), i++;
        else if (!strcmp(a, "--dropout")) c.dropout = (float)atof(v), i++;
        else if (!strcmp(a, "--ignore-index")) c.ignore_index = atoi(v), i++;
        else if (!strcmp(a, "--steps")) steps = atoi(v), i++;
        else if (!strcmp(a, "--dp")) dp = atoi(v), i++;
        else if (!strcmp(a, "--grad-accum")) accum = atoi(v), i++;
        else if (!strcmp(a, "--pp")) c.pp = atoi(v), i++;
        else if (!strcmp(a, "--layers")) c.layers = atoi(v), i++;
        else if (!strcmp(a, "--batch")) c.batch = atoi(v), i++;
        else if (!strcmp(a, "--pp-inflight")) c.pp_inflight = atoi(v), i++;
        else if (!strcmp(a, "--pp-virtual")) c.pp_virtual = atoi(v), i++;
        else if (!strcmp(a, "--zero-bubble")) c.zero_bubble = 1;
        else if (!strcmp(a, "--zero")) c.zero = atoi(v), i++;
        else if (!strcmp(a, "--zero-prefetch")) c.zero_prefetch = atoi(v), i++;
        else if (!strcmp(a, "--ulysses")) c.ulysses = atoi(v), i++;
        else if (!strcmp(a, "--ring")) c.ring = atoi(v), i++;
        else if (!strcmp(a, "--no-zigzag")) c.zigzag = 0;
        else if (!strcmp(a, "--dtype")) c.dtype = !strcmp(v, "bf16") ? SW_BF16 : SW_F32, i++;
        else if (!strcmp(a, "--seq")) c.seq = c.max_pos = atoi(v), i++;
        else if (!strcmp(a, "--recompute")) c.recompute = sw_recompute_parse(v), i++;
        else if (!strcmp(a, "--recompute-every")) c.recompute_every = atoi(v), i++;
        else if (!strcmp(a, "--device") && !strcmp(v, "cuda")) i++; /* read above */
        else { fprintf(stderr, "test_tp: unknown argument %s\n", a); return 99; }
    }
    int same = c.recompute != SW_RECOMPUTE_SELECTIVE; /* the reference: this layout, selective */
    /* restart every step from the reference's parameters: recompute modes,
     * and bf16, where a rounding difference in an AdamW step moves a weight
     * across a bf16 rounding boundary (measured: gradients of step 3 0.4 %
     * apart after updates, 1.9e-6 from the same parameters) */
    int restart = same || c.dtype == SW_BF16;
    double loss_tol = same ? 1e-6 : 1e-5, grad_tol = same ? 1e-6 : 1e-4;
    /* full recomputation resubmits selective's forward tasks on the same
     * tiles: the same arithmetic, so bit-identical is what is asserted; none
     * sums the attention backward in another order (measured 5.1e-7 at worst) */
    if (c.recompute == SW_RECOMPUTE_FULL) loss_tol = grad_tol = 0;
    /* bf16 GEMM operands: where the two layouts' fp32 activations differ in
     * the last bit (summation order), a cast may round them to neighbouring
     * bf16 values, one bf16 step (2^-8 relative) apart; a gradient then
     * differs by such a step of one of its terms (measured: 3.3e-3 of max |g|
     * at worst, 2e-6 typically). The bound is bf16's precision, 2^-7. */
    if (c.dtype == SW_BF16) grad_tol = 1.0 / 128;
    sw_gpt_config single_cfg = c;
    single_cfg.zero = 0;
    single_cfg.ulysses = single_cfg.ring = single_cfg.pp = 1;
    single_cfg.pp_inflight = 0;
    single_cfg.pp_virtual = 0;
    single_cfg.recompute = SW_RECOMPUTE_SELECTIVE;
    single_cfg.recompute_every = 1;
    int cp = c.ulysses * c.ring;
    c.tp = world / (dp * cp * c.pp);
    c.dp = dp;
    c.grad_accum = accum;
    if (same) {
        single_cfg = c;
        single_cfg.recompute = SW_RECOMPUTE_SELECTIVE;
        single_cfg.recompute_every = 1;
    }
    single_cfg.zero_bubble = 0; /* the reference: one unit per backward */
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){c.tp, c.ulysses, c.ring, dp, c.pp});
    sw_comm *comm = sw_comm_create(mesh);
    int tp_rank = sw_mesh_rank(mesh, SW_GROUP_TP);
    sw_set_task_where(ref_where);
    sw_gpt *single = sw_gpt_create(&single_cfg, same && world > 1 ? comm : NULL);
    sw_set_task_where(par_where);
    sw_gpt *par = sw_gpt_create(&c, world > 1 ? comm : NULL);
    const sw_gpt_config *pc = sw_gpt_get_config(par);
    char what[256];
    char rec[64] = "";
    if (same)
        snprintf(rec, sizeof rec, ", recompute %s every %d vs selective", sw_recompute_name(c.recompute),
                 c.recompute_every);
    char zero_name[16] = "";
    if (c.zero) snprintf(zero_name, sizeof zero_name, " (ZeRO-%d)", c.zero);
    char pipe[64] = "";
    if (c.pp > 1) snprintf(pipe, sizeof pipe, " x pp %d (in flight %d)", c.pp, sw_pipeline_inflight(sw_gpt_pipeline(par)));
    snprintf(what, sizeof what, "%s: tp %d%s%s x ulysses %d x ring %d%s x dp %d%s%s, grad-accum %d, heads %d, kv-heads %d, dropout %g%s%s",
             sw_model_name(c.model), c.tp, c.sp ? " + sp" : "", c.tp_recompute_allgather ? " (re-gather in backward)" : "", c.ulysses, c.ring,
             c.ring > 1 && !c.zigzag ? " (no zigzag)" : "", dp, zero_name, pipe, accum, pc->heads,
             pc->kv_heads, c.dropout, rec, cuda ? ", on CUDA vs the reference on CPU" : "");

    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(c.seq * c.batch)), *tgt = malloc(sizeof(int32_t) * (size_t)(c.seq * c.batch));
    if (!tok || !tgt) { perror("malloc"); return 99; }
    char name[64] = "", line[768];
    for (int step = 1; step <= steps; step++) {
        batch(&c, step, tok, tgt);
        int last = step == steps;
        for (int i = 0; restart && i < sw_gpt_num_params(pc); i++) {
            if (!sw_params_held(sw_gpt_params(par), i)) continue; /* another pipeline stage's */
            float *p = tu_read(sw_gpt_param(single, i)), *mine = malloc(sw_tensor_bytes(sw_gpt_param(par, i)));
            if (!mine) { perror("malloc"); return 99; }
            int64_t lrows, lcols; /* this rank's TP slice, of which ZeRO-3 holds rows from row0 at rest */
            sw_gpt_local_shape(pc, tp_rank, i, &lrows, &lcols);
            float *local = malloc(sizeof(float) * (size_t)(lrows * lcols));
            if (!local) { perror("malloc"); return 99; }
            int64_t row0 = sw_params_value_first_row(sw_gpt_params(par), i);
            if (same) memcpy(mine, p, sw_tensor_bytes(sw_gpt_param(par, i))); /* the same layout: the same rows */
            else sw_gpt_slice(pc, tp_rank, i, p, local), memcpy(mine, local + row0 * lcols, sw_tensor_bytes(sw_gpt_param(par, i)));
            free(local);
            sw_tensor_write_host(sw_gpt_param(par, i), mine);
            free(p), free(mine);
        }
        sw_set_task_where(ref_where);
        int ref_updated = step_reference(single, step, tok, tgt, !last);
        sw_set_task_where(par_where); /* the rest of the step is par's */
        step_driver(par, step, tok, tgt); /* updated too (with restart, its parameters are reset next step) */
        float ls = sw_gpt_read_loss(single), lp = sw_gpt_read_loss(par);
        double e = fabs((double)lp - ls) / fabs((double)ls);
        snprintf(line, sizeof line, "%s: step %d loss %.9g vs %s %.9g (relative %.2g, bound %g)", what, step,
                 lp, same ? "selective" : "single rank", ls, e, loss_tol);
        tu_check_ranks(line, e <= loss_tol);
        /* as gpt_train's loop: with stages, after the second step its measured costs give the order of the
         * third (sw_pipeline_replan, collective: both models on every rank, in the same order) */
        starpu_task_wait_for_all();
        sw_pipeline_replan(sw_gpt_pipeline(single));
        sw_pipeline_replan(sw_gpt_pipeline(par));
        if (c.clip_grad > 0 && !last && !restart) { /* both updated: the global norm each computed */
            float ns, np;
            sw_tensor_read_host(sw_params_grad_norm2(sw_gpt_params(single)), &ns);
            sw_tensor_read_host(sw_params_grad_norm2(sw_gpt_params(par)), &np);
            double en = fabs((double)np - ns) / ns;
            snprintf(line, sizeof line, "%s: step %d squared gradient norm %.9g vs %.9g (relative %.2g, bound 1e-5)",
                     what, step, np, ns, en);
            tu_check_ranks(line, en <= 1e-5 && sqrtf(ns) > c.clip_grad); /* and it clips */
        }
        if (!restart && !last) continue;
        /* par's gradients are those its update used (ZeRO-1/2/3: this rank's reduced rows; clipping: scaled in
         * place): the reference updated once too where its step did not -- with ZeRO in the same layout for
         * its shards, with --clip-grad for the scale */
        if (!ref_updated && (c.clip_grad > 0 || (same && c.zero))) sw_gpt_update(single, step);
        double eg = compare(single, par, tp_rank, same, name, sizeof name);
        snprintf(line, sizeof line,
                 "%s: every gradient of step %d (tp rank %d's slices or ZeRO shards): worst %s, max err / max |g| "
                 "%.2g (bound %g)",
                 what, step, tp_rank, name[0] ? name : "none (all bit-identical)", eg, grad_tol);
        tu_check_ranks(line, eg <= grad_tol);
    }
    /* saved activations: the tensors each builder registered for a block =
     * the model, to the byte, on both models (test_memory measures them
     * through StarPU's allocator); with sp and the re-gather in backward (or
     * tp 1), this rank keeps the single rank's bytes / (tp * ring * dp *
     * grad_accum), to the byte (bytes are integers: a missing tensor shows) */
    for (int l = 0; l < c.layers; l++) {
        sw_block_memory ms = sw_gpt_saved_bytes(single, l), mp = sw_gpt_saved_bytes(par, l);
        /* full recomputation: blocks other than every K-th keep nothing (model 0) */
        snprintf(line, sizeof line, "%s: layer %d saved bytes: registered %.0f, model %.0f (single rank: %.0f, %.0f)", what,
                 l, mp.registered_bytes, mp.model_bytes, ms.registered_bytes, ms.model_bytes);
        tu_check_ranks(line, ms.registered_bytes == ms.model_bytes && mp.registered_bytes == mp.model_bytes);
        if (((c.sp && c.tp_recompute_allgather) || c.tp == 1) && c.ulysses == 1 && !same &&
            sw_params_runs_unit(sw_gpt_params(par), l)) {
            /* a rank keeps 1/tp of its micro-batch's activations of 1/ring of the sequence, a micro-batch is
             * 1/(dp*grad_accum) of the batch */
            double zb = 0; /* Zero Bubble's split (tp 1): the output gradients kept for the W units, which the
                            * reference does not keep -- fc2 and proj [T, h], fc [T, F] (SwiGLU 2F), qkv [T, h + 2 kv d] */
            if (c.zero_bubble) {
                double T = (double)c.seq * (c.batch / (dp * accum)), h = pc->hidden, d = h / pc->heads;
                zb = 4 * T * (3 * h + 2 * pc->kv_heads * d + (pc->model == SW_MODEL_LLAMA ? 2 : 1) * (double)pc->ffn);
            }
            double share = (mp.registered_bytes - zb) * c.tp * c.ring * dp * accum;
            snprintf(line, sizeof line,
                     "%s: layer %d saved bytes x tp x ring x dp x grad-accum = %.0f, single rank's %.0f", what, l,
                     share, ms.registered_bytes);
            tu_check_ranks(line, share == ms.registered_bytes);
        }
    }

    if (c.ring > 1) {
        /* attention FLOPs of the ring ranks (every rank of a ring group submits its own tiles) */
        double mine = sw_gpt_attention_flops(par), *all = malloc(sizeof(double) * (size_t)world);
        if (!all) { perror("malloc"); return 99; }
        MPI_Allgather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, MPI_COMM_WORLD);
        double lo = all[0], hi = all[0];
        for (int r = 0; r < world; r++) lo = all[r] < lo ? all[r] : lo, hi = all[r] > hi ? all[r] : hi;
        int first = sw_mesh_world_rank(mesh, 0, 0, 0, 0), last = sw_mesh_world_rank(mesh, 0, 0, c.ring - 1, 0);
        snprintf(line, sizeof line, "%s: attention FLOPs per rank %.4g .. %.4g (spread %.2f %%), last / first ring "
                 "rank %.2fx", what, lo, hi, 100 * (hi - lo) / hi, all[last] / all[first]);
        tu_check_ranks(line, c.zigzag ? (hi - lo) / hi <= 0.01 : all[last] > all[first]);
        free(all);
    }
    free(tok); free(tgt);
    sw_gpt_destroy(single);
    sw_gpt_destroy(par);
    sw_comm_destroy(comm);
    sw_mesh_destroy(mesh);
    return tu_finish_all();
}
