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
    int simulate_verified; /* --simulate-verified: each layout --verify runs also through the simulated graph */
    const char *sim_build, *sim_calibration, *sim_preset; /* --sim-build, --sim-calibration, --sim-preset */
    const char *sim_layers; /* --sim-layers A,B: --simulate's runs at A and B layers, extrapolated to the model's */
    int sim_la, sim_lb;     /* its A and B (0: each layout simulated at the model's own depth) */
    int sim_estimate;       /* --sim-estimate: sizes the calibration lacks take a regression estimate (sim.sh) */
    int sim_ranks;          /* --sim-ranks N: a larger world simulated as its N-rank stand-in (0: the world) */
} plan_opts;

extern plan_opts plan_o;

/* The planner's flags in a program's cli table (cli.h): the same in gpt_train and dit_train but for the
 * text of --plan and of --check-config (what each program searches and checks) */
#define PLAN_CLI_FLAGS(plan_help, check_help)                                                                            \
    CLI_BOOL("--plan", &plan_o.plan, plan_help),                                                                      \
    CLI_INT("--plan-ranks", &plan_o.ranks, NULL, CLI_INT_MIN, CLI_INT_MAX, "N", "the world (default: plan-ranks-per-node x plan-nodes)"), \
    CLI_INT("--plan-ranks-per-node", &plan_o.ranks_per_node, NULL, CLI_INT_MIN, CLI_INT_MAX, "R", "ranks per node (default: plan-ranks / plan-nodes)"), \
    CLI_INT("--plan-nodes", &plan_o.nodes, NULL, CLI_INT_MIN, CLI_INT_MAX, "N", "nodes (1)"),                          \
    CLI_INT("--plan-mem-mib", &plan_o.mem_mib, NULL, CLI_INT_MIN, CLI_INT_MAX, "N", "memory per rank in MiB (0: no budget)"), \
    CLI_STRING("--plan-machine", &plan_o.machine, NULL, "FILE", "the machine's figures, lines KEY VALUE [SOURCE] (default: this\n" \
               "machine, measured: StarPU's GEMM model or a GEMM run, the link figures\n"                              \
               "BENCHMARKS.md measured)"),                                                                             \
    CLI_INT("--plan-top", &plan_o.top, NULL, CLI_INT_MIN, CLI_INT_MAX, "N", "rows of the table (20)"),                 \
    CLI_STRING("--plan-list", &plan_o.list, NULL, "FILE", "write every candidate layout, its verdict and why"),        \
    CLI_INT("--verify", &plan_o.verify, NULL, CLI_INT_MIN, CLI_INT_MAX, "K", "with --plan: run the top K and --verify-bottom from the bottom for real\n" \
            "(mpirun, at most 4 ranks): predicted beside measured, Spearman's rank\n"                                  \
            "correlation (0)"),                                                                                         \
    CLI_INT("--verify-bottom", &plan_o.verify_bottom, NULL, CLI_INT_MIN, CLI_INT_MAX, "N", "layouts from the bottom of the table --verify runs too (2)"), \
    CLI_INT("--verify-steps", &plan_o.verify_steps, NULL, CLI_INT_MIN, CLI_INT_MAX, "N", "steps of each --verify run (4; the first is not timed)"), \
    CLI_INT("--verify-spread", &plan_o.verify_spread, NULL, CLI_INT_MIN, CLI_INT_MAX, "N", "with --plan: run N layouts spread evenly over the ranked table (the\n" \
            "first, the last, evenly between) instead of --verify's top and bottom"),                                   \
    CLI_BOOL("--simulate-verified", &plan_o.simulate_verified, "with --verify or --verify-spread: each layout run also through the\n" \
             "simulated task graph (calibrated by a real run of its own, as --simulate):\n"                            \
             "estimate, simulated and measured ms/step side by side"),                                                 \
    CLI_INT("--simulate", &plan_o.simulate, NULL, CLI_INT_MIN, CLI_INT_MAX, "N", "with --plan: the top N through the simulated task graph (a simulation\n" \
            "build: --sim-build; each calibrated by a real run here unless\n"                                          \
            "--sim-calibration): ranked by the simulated step beside the estimate (0)"),                                \
    CLI_STRING("--sim-build", &plan_o.sim_build, NULL, "DIR", "the simulation build (default: $SW_SIM_BUILD, else build-sim in the\n" \
               "source tree)"),                                                                                          \
    CLI_STRING("--sim-calibration", &plan_o.sim_calibration, NULL, "DIR", "a calibration of every candidate's sizes (bench/calibrate.sh; host\n" \
               "name $SW_SIM_HOST): no calibration runs"),                                                             \
    CLI_STRING("--sim-preset", &plan_o.sim_preset, NULL, "NAME", "the simulated network: a bench/sim-platform.sh preset (default: the\n" \
               "machine's link figures)"),                                                                             \
    CLI_STRING("--sim-layers", &plan_o.sim_layers, NULL, "A,B", "with --simulate: each layout simulated at A and at B layers (rounded\n" \
               "up to its pipeline's blocks), its step extrapolated linearly to the\n"                                 \
               "model's depth: a deep model in a fraction of the time (default: the\n"                                 \
               "model's own depth)"),                                                                                   \
    CLI_BOOL("--sim-estimate", &plan_o.sim_estimate, "task sizes the calibration lacks take a regression estimate from\n" \
             "the sizes it holds (bench/sim.sh --estimate, each said) instead of\n"                                   \
             "stopping the simulation: worlds no machine here runs"),                                                  \
    CLI_INT("--sim-ranks", &plan_o.sim_ranks, NULL, CLI_INT_MIN, CLI_INT_MAX, "N", "with --simulate: a larger world simulated on N ranks (whole nodes),\n" \
            "each layout's data-parallel group and the global batch cut by\n"                                         \
            "world / N, every rank's shapes kept: a STAND-IN, said (0: the world)"),                                   \
    CLI_BOOL("--check-config", &plan_o.check_config, check_help)

/* after gpt_train's parse (every flag rule checked): the planner or the check; returns the exit status */
int plan_main(const sw_gpt_config *cfg, const char *argv0);
/* dit_train --plan, --check-config (pp: its --pp, the mesh's stages), after its parse; the exit status */
int plan_dit_main(const sw_dit_config *cfg, int pp, const char *argv0);

#endif
