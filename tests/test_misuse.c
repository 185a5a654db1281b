/* Misuse of the public API refused with a message, never a crash or a
 * plausible wrong result (tests/test_misuse.sh):
 *   test_misuse CASE   one misuse; the library must stop the program (exit 2
 *                      on every rank, the rule and the value printed once);
 *                      returning is a failure (exit 3)
 * Cases: target (a target past the vocabulary), ignore (-100, PyTorch's
 * ignore index, where the config sets none), ignore-other (the config's
 * ignore index -100 set, a target past the vocabulary still refused),
 * ignore-valid (an ignore index that is a real token id), token (a
 * negative token), micro (a micro-batch past grad_accum); the pooled head
 * of heads.h: head-unallocated (forward before sw_params_allocate),
 * head-null (a NULL input), head-targets (targets of the wrong shape);
 * duplicate (sw_params_add with a name already registered). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starweave.h"

int main(int argc, char **argv)
{
    if (sw_init(&argc, &argv, NULL) != 0) return 99;
    if (argc != 2) { fprintf(stderr, "usage: test_misuse target|ignore|ignore-other|ignore-valid|token|micro|head-*|duplicate\n"); return 99; }
    const char *what = argv[1];
    if (!strcmp(what, "duplicate")) { /* two parameters of one name */
        sw_params_config pc = {.seed = 1, .tiles = 1, .dtype = SW_F32, .grad_accum = 1, .grad_group = SW_GROUP_DP, .lr = 1e-3f};
        sw_params *p = sw_params_new(&pc, NULL);
        sw_param_desc d = {.name = "h0.ln_w", .rows = 1, .cols = 16, .init_value = 1.0f};
        sw_params_add(p, &d);
        snprintf(d.name, sizeof d.name, "h0.ln_b");
        sw_params_add(p, &d);
        snprintf(d.name, sizeof d.name, "h0.ln_w");
        sw_params_add(p, &d); /* must not return */
        return 3;
    }
    if (!strncmp(what, "head-", 5)) { /* a pooled head on the context's rows (dp = the world) */
        sw_mesh *mesh = sw_mesh_create(NULL);
        sw_comm *comm = sw_comm_create(mesh);
        sw_params_config pc = {.seed = 1, .tiles = 1, .dtype = SW_F32, .grad_accum = 1, .grad_group = SW_GROUP_DP, .lr = 1e-3f};
        sw_params *p = sw_params_new(&pc, sw_world_size() > 1 ? comm : NULL);
        sw_ctx x;
        sw_ctx_init(&x, &(sw_ctx_config){.seq = 8, .batch = 4, .tp = 1, .ulysses = 1, .ring = 1, .dp = sw_world_size(),
                                         .grad_accum = 1, .tiles = 1}, sw_world_size() > 1 ? comm : NULL, p);
        sw_seq_head *hd = sw_seq_head_create(&x, &(sw_seq_head_config){.name = "head", .hidden = 16, .outputs = 1, .std = 0.1f});
        sw_tensor *in = sw_tensor_new2d("in", SW_F32, x.Tl, 16), *y = sw_tensor_new2d("y", SW_F32, x.B, 1);
        if (strcmp(what, "head-unallocated")) sw_params_allocate(p);
        if (!strcmp(what, "head-targets")) y = sw_tensor_new2d("y", SW_F32, x.B, 3);
        sw_seq_head_forward(&x, hd, strcmp(what, "head-null") ? in : NULL, y);
        return 3;
    }
    sw_gpt_config c;
    sw_gpt_config_default(&c);
    c.layers = 1, c.hidden = 32, c.heads = 2, c.seq = 8, c.max_pos = 8, c.batch = 2, c.tiles = 1;
    c.dp = sw_world_size();
    if (!strcmp(what, "ignore-other")) c.ignore_index = -100;
    if (!strcmp(what, "ignore-valid")) c.ignore_index = 5; /* sw_gpt_create refuses */
    sw_mesh *mesh = sw_mesh_create(NULL);
    sw_comm *comm = sw_comm_create(mesh);
    sw_gpt *m = sw_gpt_create(&c, c.dp > 1 ? comm : NULL);
    int32_t tok[8 * 2], tgt[8 * 2];
    for (int i = 0; i < 16; i++) tok[i] = i % c.vocab, tgt[i] = (i + 1) % c.vocab;
    int k = 0;
    tgt[2] = c.ignore_index == -100 ? -100 : tgt[2]; /* accepted with the config's ignore index */
    if (!strcmp(what, "target") || !strcmp(what, "ignore-other")) tgt[5] = c.vocab + 1000;
    else if (!strcmp(what, "ignore")) tgt[3] = -100;
    else if (!strcmp(what, "token")) tok[9] = -1;
    else if (!strcmp(what, "micro")) k = 1;
    else { fprintf(stderr, "test_misuse: unknown case %s\n", what); return 99; }
    sw_gpt_load_micro_batch(m, k, tok, tgt); /* must not return */
    printf("test_misuse %s: sw_gpt_load_micro_batch returned\n", what);
    return 3;
}
