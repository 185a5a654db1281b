/* tests/ckpt_model: a custom model that gives its checkpoints no fields
 * (nmodel 0), so nothing but each tensor's own global shape says whether a
 * checkpoint fits it: the registry's per-tensor shape check must refuse a
 * checkpoint of another width (tests/test_checkpoint.sh).
 *   ckpt_model save DIR ROWS COLS   a [4, COLS] and a [ROWS, 8] tensor, saved as step 1
 *   ckpt_model load DIR ROWS COLS   the same registry, DIR's latest loaded: prints
 *                                   "loaded step N" (a refusal exits 2) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starweave/checkpoint.h"
#include "starweave/runtime.h"

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[1], "save") && strcmp(argv[1], "load"))) {
        fprintf(stderr, "usage: ckpt_model save|load DIR ROWS COLS\n");
        return 99;
    }
    int rows = atoi(argv[3]), cols = atoi(argv[4]);
    sw_options opt;
    sw_options_default(&opt);
    if (sw_init(&argc, &argv, &opt) != 0) return 1;
    sw_params_config pc = {.seed = 1, .tiles = 1, .dtype = SW_F32, .grad_accum = 1, .bucket_mb = 25.0f,
                           .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .adam_eps = 1e-8f};
    sw_params *p = sw_params_new(&pc, NULL);
    /* "wide": its columns are the width, its rows fixed -- only the column check sees a change */
    sw_params_add(p, &(sw_param_desc){.name = "wide", .rows = 4, .cols = cols, .init_std = 0.02f});
    sw_params_add(p, &(sw_param_desc){.name = "tall", .rows = rows, .cols = 8, .init_std = 0.02f});
    sw_params_allocate(p);
    if (!strcmp(argv[1], "save")) {
        sw_checkpoint_save(p, NULL, 0, argv[2], 1);
        printf("saved step 1\n");
    } else {
        printf("loaded step %d\n", sw_checkpoint_load(p, NULL, 0, argv[2]));
    }
    sw_params_destroy(p);
    sw_shutdown();
    return 0;
}
