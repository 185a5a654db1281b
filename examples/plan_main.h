/* gpt_train --plan and --check-config (docs/planner.md), and dit_train's: the
 * planner's command line, its flags filled by the program's table. */
#ifndef SW_EXAMPLES_PLAN_MAIN_H
#define SW_EXAMPLES_PLAN_MAIN_H

#include "starweave.h"

typedef struct plan_opts {
    int plan;            /* --plan: rank the layouts of the model's flags and stop */
    int check_config;    /* --check-config: gpt_train's own validation of the flags for --plan-ranks, and stop */
    int ranks, ranks_per_node, nodes; /* the world (--plan-ranks, or ranks per node x nodes) */
    int mem_mib;         /* --plan-mem-mib: memory per rank (0: no budget) */
    const char *machine; /* --plan-machine FILE (sw_plan_machine_read) */
    int top;             /* rows of the table (--plan-top) */
    const char *list;    /* --plan-list FILE: every candidate, its verdict and flags */
    int verify, verify_bottom, verify_steps; /* --verify K: run the top K and verify_bottom from the bottom */
    int verify_spread;   /* --verify-spread N: N layouts spread evenly over the ranked table (first and last) */
    int simulate;        /* --simulate N: the top N through the simulated task graph (docs/simulation.md) */
    const char *sim_build, *sim_calibration, *sim_preset; /* --sim-build, --sim-calibration, --sim-preset */
} plan_opts;

extern plan_opts plan_o;

/* after gpt_train's parse (every flag rule checked): the planner or the check; returns the exit status */
int plan_main(const sw_gpt_config *cfg, const char *argv0);
/* dit_train --plan, --check-config (pp: its --pp, the mesh's stages), after its parse; the exit status */
int plan_dit_main(const sw_dit_config *cfg, int pp, const char *argv0);

#endif
