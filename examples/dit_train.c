/* dit_train: trains the DiT of the library (dit.h: sw_dit_create; its equations in
 * graphs/models/dit_model.c), a spatial-temporal video diffusion transformer
 * (Open-Sora's STDiT), on deterministic synthetic latents:
 *
 *   latents x0 [frames, height, width, channels] per sample (a smooth pattern),
 *   a conditioning sequence [cond_len, cond_dim] per sample, and per step
 *   noise eps ~ N(0, 1) and a diffusion step t per sample,
 *   x_t = sqrt(a_t) x0 + sqrt(1 - a_t) eps (sw_dit_noise); the model predicts
 *   eps from patchify(x_t), the loss is the MSE against patchify(eps).
 *
 * Every strategy comes from the layers and the step driver (sw_pipeline):
 *   mpirun -np 2 dit_train --ulysses 2     (spatial blocks on a frame split,
 *                                           temporal ones after the all-to-all)
 *   mpirun -np 4 dit_train --tp 2 --sp --ulysses 2 --micro 2 --recompute full
 *   mpirun -np 2 dit_train --pp 2 --micro 4  (pipeline stages: the driver sends
 *                                           sc from the first stage to the others
 *                                           and their parts of its gradient back)
 * Flags: --help. --export DIR (1 rank): the initial parameters, the batch,
 * the losses and the step-1 gradients for tests/torch_dit.py. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <starweave.h>
#include "cli.h"
#include "plan_main.h"
#include "train_loop.h"

/* the flags that are not the model's */
typedef struct opts {
    int steps, pp, counters, memory, save_every, budget;
    const char *trace, *save, *resume;
} opts;

/* ---- --export DIR (one rank): raw little-endian row-major files and an index ---- */
static FILE *xindex;
static const char *xdir;
static void export_raw(const char *kind, const char *name, int64_t rows, int64_t cols, const void *data)
{
    char file[128], path[1200];
    snprintf(file, sizeof file, "%s.%s.f32", kind, name);
    snprintf(path, sizeof path, "%s/%s", xdir, file);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, sizeof(float), (size_t)(rows * cols), f) != (size_t)(rows * cols) || fclose(f)) {
        fprintf(stderr, "dit_train: --export: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    fprintf(xindex, "%s %s %lld %lld %s\n", kind, name, (long long)rows, (long long)cols, file);
}

/* ---- the memory report: the model's bytes beside StarPU's allocator ---- */
/* Main-RAM bytes StarPU's allocator counts once every submitted task has run:
 * the home buffer of every tensor is starpu_malloc'ed with STARPU_MALLOC_COUNT
 * (sw_init sets a main-RAM limit, under which StarPU counts; an offload budget
 * leaves the home buffers out), and StarPU's own buffers are counted too. */
static double ram_used(void)
{
    sw_node_memory ram;
    starpu_task_wait_for_all();
    return sw_memory_nodes(&ram, 1) == 1 ? ram.used : 0; /* node 0: main RAM */
}
static void parse_flags(int argc, char **argv, sw_dit_config *c, opts *o)
{
    int bf16, rec, seed;
    sw_dit_config_default(c);
    const cli_flag flags[] = {
        CLI_HEADING("model (the sequence: frames x patches, split over ulysses x ring ranks in whole frames)"),
        CLI_INT("--frames", &c->frames, "4", 1, CLI_INT_MAX, "F", "latent frames"),
        CLI_INT("--height", &c->height, "8", 1, CLI_INT_MAX, "H", "latent height"),
        CLI_INT("--width", &c->width, "8", 1, CLI_INT_MAX, "W", "latent width"),
        CLI_INT("--channels", &c->channels, "4", 1, CLI_INT_MAX, "C", "latent channels"),
        CLI_INT("--patch", &c->patch, "2", 1, CLI_INT_MAX, "P", "patch size, must divide --height and --width"),
        CLI_INT("--hidden", &c->hidden, "32", 2, CLI_INT_MAX, "h", "hidden size, even, divisible by --heads"),
        CLI_INT("--heads", &c->heads, "4", 1, CLI_INT_MAX, "A", "attention heads"),
        CLI_INT("--layers", &c->layers, "2", 1, SW_DIT_MAX_LAYERS, "L", "blocks"),
        CLI_INT("--cond-len", &c->cond_len, "6", 1, CLI_INT_MAX, "L", "conditioning positions (cross-attention's keys)"),
        CLI_INT("--cond-dim", &c->cond_dim, "16", 1, CLI_INT_MAX, "D", "conditioning features"),
        CLI_FLOAT("--init-std", &c->init_std, "0.02", 0, CLI_NO_MAX, "S", "the weights' N(0, S)"),
        CLI_FLOAT("--adaln-std", &c->adaln_std, "0", 0, CLI_NO_MAX, "S", "the adaLN weights N(0, S) instead of adaLN-Zero's zeros\n"
                  "(tests)"),
        CLI_CHOICE("--dtype", &bf16, "fp32", "fp32|bf16",
                   "bf16: the linears' GEMMs on bf16 operands (fp32 accumulation,\n"
                   "fp32 master weights)"),
        CLI_HEADING("training"),
        CLI_INT("--batch", &c->batch, "4", 1, CLI_INT_MAX, "B", "samples per step"),
        CLI_INT("--steps", &o->steps, "10", 1, CLI_INT_MAX, "N", "training steps; prints the loss per step, then the last\n"
                "step's gradients (grad NAME sumsq abssum)"),
        CLI_FLOAT("--lr", &c->lr, "1e-3", 0, CLI_NO_MAX, "LR", "AdamW learning rate"),
        CLI_INT("--seed", &seed, "1234", 0, CLI_INT_MAX, "S", "seed of the init and the data"),
        CLI_HEADING("parallelism (launch with mpirun -np the product of the degrees)"),
        CLI_INT("--tp", &c->tp, "1", 1, CLI_INT_MAX, "T", "tensor-parallel degree, must divide --heads"),
        CLI_BOOL("--sp", &c->sp, "sequence parallelism (with --tp)"),
        CLI_INT("--ulysses", &c->ulysses, "1", 1, CLI_INT_MAX, "U", "DeepSpeed-Ulysses degree"),
        CLI_INT("--ring", &c->ring, "1", 1, CLI_INT_MAX, "R", "Ring attention degree"),
        CLI_INT("--dp", &c->dp, "1", 1, CLI_INT_MAX, "D", "data-parallel degree"),
        CLI_INT("--zero", &c->zero, "0", 0, 3, "N", "ZeRO stage over dp (and ulysses x ring)"),
        CLI_INT("--pp", &o->pp, "1", 1, CLI_INT_MAX, "P", "pipeline stages of layers / P blocks, 1F1B's in-flight quota over\n"
                "the --micro K micro-batches"),
        CLI_INT("--pp-virtual", &c->pp_virtual, "1", 1, CLI_INT_MAX, "V", "interleaved chunks per stage"),
        CLI_INT("--micro", &c->micro, "1", 1, CLI_INT_MAX, "K", "micro-batches per step; K x dp must divide --batch"),
        CLI_HEADING("activation memory"),
        CLI_CHOICE("--recompute", &rec, "selective", "none|selective|full", "what backward recomputes"),
        CLI_INT("--recompute-every", &c->recompute_every, "1", 1, CLI_INT_MAX, "K", "full: keep the input of every K-th block"),
        CLI_BOOL("--offload", &c->offload, "each block's saved set to the offload node after its forward, back\n"
                 "for its backward (with --recompute full: the kept block inputs,\n"
                 "Open-Sora's checkpoint offload)"),
        CLI_INT("--offload-budget-mb", &o->budget, "0", 0, CLI_INT_MAX, "N", "with --offload, the MiB of main RAM StarPU may fill\n"
                "(0: no limit)"),
        CLI_HEADING("reports, checkpoints"),
        CLI_BOOL("--counters", &o->counters, "the traffic model beside the bytes sent, and the counters of what ran"),
        CLI_BOOL("--memory-report", &o->memory, "per rank the whole model's bytes from the shapes beside what\n"
                 "StarPU's allocator counts in main RAM, at creation and what the steps\n"
                 "added (the layers' scratch); per rank and block the saved activations,\n"
                 "the memory model's and the registered tensors' bytes; the blocks', the\n"
                 "registry's and the scratch's bytes; per StarPU memory node the peak and\n"
                 "the bytes moved"),
        CLI_STRING("--trace", &o->trace, NULL, "FILE", "every task and request of every rank, FILE (Chrome/Perfetto\n"
                   "JSON), FILE.paje, FILE.overlap.json; prints the overlap of\n"
                   "communication with compute per rank and step"),
        CLI_STRING("--save", &o->save, NULL, "DIR", "a checkpoint after the last step (and every --save-every N steps)"),
        CLI_INT("--save-every", &o->save_every, "0", 0, CLI_INT_MAX, "N", "also every N steps (0: only at the end)"),
        CLI_STRING("--resume", &o->resume, NULL, "DIR", "continue after DIR's latest checkpoint (the same model; another\n"
                   "layout is re-sharded; bit for bit under the same one: the data are\n"
                   "functions of the seed and the step)"),
        CLI_STRING("--export", &xdir, NULL, "DIR", "(1 rank) what tests/torch_dit.py checks"),
        CLI_HEADING("planner (docs/planner.md): the best layout of the model's flags, nothing trained"),
        PLAN_CLI_FLAGS("rank every legal layout (tp, sp, ulysses, ring, dp, ZeRO, pp, chunks,\n"
                       "micro-batches, recomputation) by predicted ms/step, with its memory per\n"
                       "rank (the exact model); exit 2 when none fits the budget",
                       "validate the flags for --plan-ranks ranks as a run would (the flags'\n"
                       "rules, the world, every rank's model described) and stop: exit 0 or 2"),
        CLI_END};
    cli_parse("dit_train", "[mpirun -np N] dit_train [options]",
              "A spatial-temporal video diffusion transformer (Open-Sora's STDiT) on synthetic latents.\n", flags, argc, argv);
    c->seed = (uint64_t)seed, c->dtype = bf16 ? SW_BF16 : SW_F32;
    c->recompute = sw_recompute_parse((const char *[]){"none", "selective", "full"}[rec]);
}

/* every rule before any collective, on every rank (exit 2); world: the ranks (--check-config: before sw_init,
 * the planner's world) */
static void check_flags(const sw_dit_config *c, const opts *o, int world)
{
    char msg[512];
    if (o->budget && !c->offload) sw_usage_error("--offload-budget-mb needs --offload");
    /* the model's and the layout's rules, the planner's too (sw_plan_dit_check) */
    if (sw_dit_config_check(c, o->pp, msg, sizeof msg) != 0) sw_usage_error("%s", msg);
    if (xdir && world != 1) sw_usage_error("--export runs on one rank (%d)", world);
    if (o->save_every && !o->save) sw_usage_error("--save-every N needs --save DIR and N >= 0 (%d)", o->save_every);
    if (xdir && o->resume) sw_usage_error("--export starts from the initial parameters: not with --resume");
}

/* the run: the model, the global data (every rank the same; the loads take each rank's part) */
typedef struct run {
    sw_dit *m;
    const sw_dit_config *c;
    sw_patch_dims pd;
    int64_t vol;                                     /* floats per sample's latents */
    float *x0, *eps, *xt, *tok, *tgt, *cond, *tv, *losses;
} run;

/* latents x0[b][f][i][j][c], a smooth pattern per sample; the conditioning [cond_len batch, cond_dim] in
 * [s, b] order, loaded once */
static void make_data(run *r, int steps)
{
    const sw_dit_config *c = r->c;
    const int F = c->frames, H = c->height, W = c->width, C = c->channels, P = c->patch, batch = c->batch;
    const int cond_len = c->cond_len, cond_dim = c->cond_dim, ppc = P * P * C;
    const int64_t vol = (int64_t)F * H * W * C, ntok = (int64_t)F * (H / P) * (W / P) * batch;
    r->pd = (sw_patch_dims){.frames = F, .height = H, .width = W, .channels = C, .patch = P}, r->vol = vol;
    float *x0 = r->x0 = malloc(sizeof(float) * (size_t)(vol * batch)), *cond;
    r->eps = malloc(sizeof(float) * (size_t)(vol * batch)), r->xt = malloc(sizeof(float) * (size_t)(vol * batch));
    r->tok = malloc(sizeof(float) * (size_t)(ntok * ppc)), r->tgt = malloc(sizeof(float) * (size_t)(ntok * ppc));
    cond = r->cond = malloc(sizeof(float) * (size_t)cond_len * batch * cond_dim);
    r->tv = malloc(sizeof(float) * (size_t)batch), r->losses = malloc(sizeof(float) * (size_t)steps);
    if (!x0 || !r->eps || !r->xt || !r->tok || !r->tgt || !cond || !r->tv || !r->losses) sw_usage_error("out of memory");
    for (int b = 0; b < batch; b++)
        for (int64_t i = 0; i < vol; i++) {
            int ch = (int)(i % C), j = (int)(i / C % W), y = (int)(i / C / W % H), f = (int)(i / C / W / H);
            x0[b * vol + i] = sinf(0.7f * (float)f + 0.5f * (float)y - 0.3f * (float)j + 1.3f * (float)ch + 0.9f * (float)b) *
                              cosf(0.2f * (float)(y * j) + 0.1f * (float)b);
        }
    for (int s = 0; s < cond_len; s++)
        for (int b = 0; b < batch; b++)
            for (int ch = 0; ch < cond_dim; ch++)
                cond[((int64_t)s * batch + b) * cond_dim + ch] = sinf(0.37f * (float)(s + 1) * (float)(ch + 1) + 1.1f * (float)b);
    sw_dit_load_cond(r->m, cond);
}

/* --export: the config, the initial parameters, the latents and the conditioning */
static void export_start(run *r, int steps)
{
    const sw_dit_config *c = r->c;
    sw_params *p = sw_dit_params(r->m);
    if (mkdir(xdir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "dit_train: --export: mkdir %s: %s\n", xdir, strerror(errno));
        exit(1);
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/index.txt", xdir);
    if (!(xindex = fopen(path, "w"))) fprintf(stderr, "dit_train: --export: %s: %s\n", path, strerror(errno)), exit(1);
    fprintf(xindex, "# kind name rows cols file (raw little-endian float32, row-major)\n");
    fprintf(xindex, "config frames=%d height=%d width=%d channels=%d patch=%d hidden=%d heads=%d layers=%d "
                    "cond_len=%d cond_dim=%d batch=%d steps=%d freq=%d lr=%.9g weight_decay=0.01 clip=1 "
                    "beta1=0.9 beta2=0.999 eps=1e-8 norm_eps=1e-6\n",
            c->frames, c->height, c->width, c->channels, c->patch, c->hidden, c->heads, c->layers, c->cond_len,
            c->cond_dim, c->batch, steps, SW_DIT_FREQ, (double)c->lr);
    for (int i = 0; i < sw_params_count(p); i++) {
        const sw_param_desc *pdsc = sw_params_desc(p, i);
        float *v = malloc(sw_tensor_bytes(sw_params_value(p, i)));
        sw_tensor_read_host(sw_params_value(p, i), v);
        export_raw("param", pdsc->name, pdsc->rows, pdsc->cols, v);
        free(v);
    }
    export_raw("data", "latents", c->batch, r->vol, r->x0);
    export_raw("data", "cond", (int64_t)c->cond_len * c->batch, c->cond_dim, r->cond);
}

/* the training loop's part (train_loop.h): the step's noise and x_t, patchified (host, untimed) */
static void batch(void *rp, int step)
{
    run *r = rp;
    const int B = r->c->batch;
    sw_dit_noise(r->c->seed, step, B, r->vol, r->x0, r->eps, r->xt, r->tv);
    if (xdir) {
        char n[32];
        snprintf(n, sizeof n, "noise_%d", step), export_raw("data", n, B, r->vol, r->eps);
        snprintf(n, sizeof n, "t_%d", step), export_raw("data", n, B, 1, r->tv);
    }
    sw_patchify(&r->pd, B, r->xt, r->tok);
    sw_patchify(&r->pd, B, r->eps, r->tgt); /* the target: the true noise, patchified like x_t */
}
static void load(void *rp, int step)
{
    run *r = rp;
    (void)step;
    for (int k = 0; k < r->c->micro; k++) sw_dit_load_micro_batch(r->m, k, r->tok, r->tgt, r->tv);
}
static void step_dit(void *rp, int step) { sw_dit_step(((run *)rp)->m, step); }
static float loss_dit(void *rp)
{
    float l;
    sw_tensor_read_host(sw_dit_loss(((run *)rp)->m), &l);
    return l;
}
/* --export: the losses, and step 1's gradients (clipped: clip_grad 1) */
static void after(void *rp, int step, float loss)
{
    run *r = rp;
    sw_params *p = sw_dit_params(r->m);
    r->losses[step - 1] = loss;
    if (xdir && step == 1)
        for (int i = 0; i < sw_params_count(p); i++) {
            int64_t first;
            sw_tensor *g = sw_params_reduced_grad(p, i, &first);
            float *v = malloc(sw_tensor_bytes(g));
            sw_tensor_read_host(g, v);
            export_raw("grad", sw_params_desc(p, i)->name, g->rows, g->cols, v);
            free(v);
        }
}

/* --memory-report, on every rank: the whole model's bytes beside StarPU's allocator, at creation and after the steps */
static void memory_report(run *r, const opts *o, double ram_before, double ram_created, double model_created)
{
    /* What a step adds that creation did not: the layers' scratch (sw_scratch_bytes, made on first use; the
     * ZeRO pools and buckets, the gradients and AdamW moments are the registry's, made at creation). The
     * collectives' temporaries are StarPU's, freed by the step's end. Not modelled: with offload, the
     * main-RAM copies StarPU still holds of the offload node's tensors (its cache, evicted on demand). */
    const sw_ctx *x = sw_dit_ctx(r->m);
    const double ram_after = ram_used() - ram_before, lazy = sw_scratch_bytes(x);
    printf("memory: rank %d created: allocator %.0f bytes, model %.0f bytes%s\n", sw_rank(), ram_created, model_created,
           o->budget ? " (under an offload budget StarPU does not count the home buffers)" : "");
    printf("memory: rank %d after %d steps: allocator grew %.0f bytes, model %.0f bytes (the layers' scratch%s)\n",
           sw_rank(), o->steps, ram_after - ram_created, lazy,
           r->c->offload ? "; not modelled: the main-RAM copies StarPU keeps of the offloaded tensors" : "");
    /* each block's saved bytes, the library's model beside what it registered (0 and 0 on another stage) */
    for (int l = 0; l < r->c->layers; l++) {
        sw_block_memory b = sw_dit_saved_bytes(r->m, l);
        printf("memory: rank %d block %d saved model %.0f bytes registered %.0f bytes\n", sw_rank(), l, b.model_bytes,
               b.registered_bytes);
    }
    printf("memory: rank %d blocks (residual stream, saved sets, gradient) model %.0f bytes; parameter state %.0f "
           "bytes; layers' scratch %.0f bytes\n", sw_rank(), sw_dit_blocks_bytes(r->m),
           sw_params_bytes(sw_dit_params(r->m)), sw_scratch_bytes(x));
    sw_node_memory nodes[8]; /* StarPU's memory nodes: peak use, and the bytes moved in and out */
    for (int k = 0, n = sw_memory_nodes(nodes, 8); k < n; k++)
        printf("memory: rank %d %s: peak %.2f MiB used (of %.0f), in %.2f MiB, out %.2f MiB\n", sw_rank(),
               nodes[k].name, nodes[k].peak / SW_MIB, nodes[k].total / SW_MIB, nodes[k].bytes_in / SW_MIB,
               nodes[k].bytes_out / SW_MIB);
}

int main(int argc, char **argv)
{
    sw_dit_config c;
    opts o = {0};
    parse_flags(argc, argv, &c, &o);
    if (plan_o.check_config) check_flags(&c, &o, 1); /* dit_train's verdict: its rules, then the world's (below) */
    if (plan_o.plan || plan_o.check_config) return plan_dit_main(&c, o.pp, argv[0]); /* no training */
    sw_options opt;
    sw_options_default(&opt);
    opt.offload = c.offload; /* an offload memory node for the blocks' saved sets */
    opt.offload_budget_mb = o.budget; /* main RAM StarPU may fill (0: no limit) */
    if (sw_init(&argc, &argv, &opt) != 0) return 1;
    check_flags(&c, &o, sw_world_size());
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){.tp = c.tp, .ulysses = c.ulysses, .ring = c.ring, .dp = c.dp, .pp = o.pp});
    sw_comm *world = sw_comm_create(mesh), *comm = sw_world_size() > 1 ? world : NULL; /* NULL: one rank */
    const double ram_before = o.memory ? ram_used() : 0; /* what StarPU counts before the model */
    run r = {.c = &c, .m = sw_dit_create(&c, comm)};
    make_data(&r, o.steps);
    if (xdir) export_start(&r, o.steps);
    /* the whole model at creation: its bytes from the shapes alone, and what StarPU's allocator counts */
    const double model_created = sw_dit_bytes(r.m), ram_created = o.memory ? ram_used() - ram_before : 0;
    /* checkpoints (checkpoint.h): the registry's parameters and AdamW moments, re-sharded when the
     * layout differs; the model's fields must match (the tensors' global shapes are checked too) */
    sw_ckpt_field fields[8];
    train_loop t = {.prog = "dit_train", .steps = o.steps, .model = &r, .batch = batch, .load = load, .step = step_dit,
                    .loss = loss_dit, .after = after, .pipe = sw_dit_pipeline(r.m), .params = sw_dit_params(r.m), .fields = fields,
                    .nfields = sw_dit_checkpoint_fields(r.m, fields), .save = o.save, .save_every = o.save_every,
                    .resume = o.resume, .trace = o.trace, .pp = o.pp, .micro = c.micro, .pp_virtual = c.pp_virtual,
                    .show_ms = 1};
    train_loop_resume(&t, 1);
    if (o.memory) sw_memory_watch(1); /* the peak and bytes moved of StarPU's memory nodes, from the first step */
    train_loop_run(&t); /* simulated, it ends with the line bench/sim.sh and dit_train --plan --simulate read */
    /* the last step's reduced, clipped gradients (the digests of test_dit_model.sh) */
    train_print_grads(sw_dit_params(r.m), sw_dit_ctx(r.m));
    if (sw_rank() == 0 && t.timed) printf("mean step time (steps %d .. %d): %.1f ms\n", t.step0 + 2, o.steps, t.total_ms / t.timed);
    if (xdir) {
        export_raw("loss", "losses", o.steps, 1, r.losses);
        if (fclose(xindex)) return fprintf(stderr, "dit_train: --export: index.txt\n"), 1;
    }
    train_loop_report(&t);
    if (o.memory) memory_report(&r, &o, ram_before, ram_created, model_created);
    if (o.counters) train_traffic_report(sw_dit_pipeline(r.m), comm, o.steps); /* the model beside what was sent */
    free(r.x0), free(r.eps), free(r.xt), free(r.tok), free(r.tgt), free(r.cond), free(r.tv), free(r.losses);
    sw_dit_destroy(r.m), sw_comm_destroy(world), sw_mesh_destroy(mesh), sw_shutdown();
    return 0;
}
