/** @file
 * The planner (docs/planner.md): every legal layout of a decoder model
 * (gpt.h) over a world of ranks, its memory per rank from the exact
 * memory model, a fast estimate of its step time from the FLOPs, the
 * traffic model and a machine's measured rates, ranked.
 *
 * Legality is the programs': sw_plan_check is sw_gpt_config_check (the
 * rules gpt_train refuses flags by), sw_mesh_check (the world size) and the
 * pipeline's schedule rules, so a layout the planner lists is one gpt_train
 * runs. Memory is sw_gpt_plan_rank's (the model sw_gpt_create checks,
 * equal to StarPU's allocator to the byte: tests/test_memory.sh); traffic
 * the same function's (the layers' traffic models, equal to the bytes
 * counted: tests/test_comm.sh). The estimate is a formula (docs/planner.md
 * gives it); it is deterministic for a given machine. gpt_train --plan
 * --simulate runs the top layouts through the simulated task graph. */
#ifndef STARWEAVE_PLAN_H
#define STARWEAVE_PLAN_H

#include <stdio.h>
#include "starweave/dit_model.h"
#include "starweave/gpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The machine the estimate prices: rates and where each figure comes from
 * (the source strings say "measured ..." or "typed ..."). */
typedef struct sw_plan_machine {
    double gemm_gflops;     /**< one CPU worker's fp32 GEMM rate (GFLOP/s) */
    double cores;           /**< cores per node the ranks of a node share */
    ///@{
    double intra_gbs, intra_us; /**< link between ranks of a node: GB/s, latency per message (us) */
    ///@}
    ///@{
    double inter_gbs, inter_us; /**< between nodes */
    ///@}
    double task_us;         /**< runtime cost per task (StarPU's submission and scheduling, us) */
    double gemm_half_rows;  /**< a GEMM of this many rows (M) runs at half gemm_gflops: rate(M) = gemm_gflops M /
                                 (M + gemm_half_rows), M the rows of a tile (0: no dependence on M) */
    double adam_ns;         /**< ns per parameter of one worker's optimizer update, a memory-bound pass (0: left out) */
    double p2p_spin;        /**< cores a rank's StarPU-MPI progression thread takes while a point-to-point receive
                                 is posted (pipeline, Ring): it polls without sleeping (0: left out) */
    double elem_ns;         /**< ns per element of one worker's memory-bound pass over a [rows, hidden] activation
                                 (an RMSNorm forward): the blocks' norms and residual adds (0: left out) */
    double coll_offload;    /**< 1: the data-parallel collectives progress beside the workers (MPI's own algorithms,
                                 NCCL), so they overlap the compute even with one worker per rank; 0: their reduction
                                 tasks take the workers (StarPU-MPI's ring and direct algorithms) */
    double gemm_shared;     /**< the fraction of gemm_gflops a worker keeps while every core of its node runs a GEMM
                                 (cores sharing a physical core's units: hyperthreads), applied where a node's workers
                                 fill its cores (0 or 1: not modelled) */
    double attn_gflops;     /**< one worker's rate of the flash attention tiles (forward and backward: the
                                 backward recomputes the probabilities), their FLOPs as the estimate counts
                                 them (0: the GEMM rate) */
    double attn_probs_gflops; /**< the same of the tiles that keep the probabilities (recompute none; 0:
                                   attn_gflops) */
    double ce_ns;           /**< ns per logit of one worker's cross-entropy passes, forward and backward (0: left out) */
    double act_ns;          /**< ns per element of one worker's MLP activation (GELU, SwiGLU), forward and backward
                                 (0: left out) */
    double adaln_ns;        /**< ns per element of one worker's adaLN modulation and gated residual (the DiT's
                                 blocks), forward and backward of both (0: left out) */
    double copy_ns;         /**< ns per element of one worker's pass of the gradient buckets' copies (the GPT's
                                 micro-batches summed, or all-reduced without ZeRO: sw_params_buckets_bytes), one
                                 copy and one add averaged (0: left out) */
    ///@{
    char gemm_src[200], cores_src[120], intra_src[200], inter_src[200], task_src[160], rows_src[200], adam_src[200], spin_src[200],
        elem_src[200], coll_src[200], shared_src[240], attn_src[200], attn_probs_src[200], ce_src[200],
        act_src[200], adaln_src[200], copy_src[200]; /**< where each comes from */
    ///@}
} sw_plan_machine;

/** A machine file: lines "KEY VALUE [SOURCE...]", '#' comments; keys
 * gemm_gflops, cores, intra_gbs, intra_us, inter_gbs, inter_us, task_us,
 * gemm_half_rows, adam_ns, p2p_spin, elem_ns, coll_offload (0 or 1), gemm_shared (at most 1),
 * attn_gflops, attn_probs_gflops, ce_ns, act_ns, adaln_ns, copy_ns;
 * SOURCE (the rest of the line) says where the figure comes from ("typed in
 * FILE" when absent). Keys not given keep m's values. Returns 0, or -1 with
 * the reason in msg. */
int sw_plan_machine_read(sw_plan_machine *m, const char *path, char *msg, size_t n);
/** This machine: the GEMM rate from StarPU's history model of sw_gemm where
 * one is found (dir: a perfmodel directory, e.g. $STARPU_PERF_MODEL_DIR,
 * else $STARPU_HOME/.starpu/sampling, else ~/.starpu/sampling), else
 * measured now (sw_gemm_cpu, one thread, 256 x hidden x hidden in the
 * forward and both backward forms, on operands read from memory,
 * extrapolated to many rows); attn_gflops and attn_probs_gflops from the
 * history models of the attention tiles (sw_attn_fwd and _bwd,
 * sw_attn_probs_fwd and _bwd) where dir or $STARPU_PERF_MODEL_DIR has all
 * four: a calibration's rates, those its simulated graph runs the tiles
 * at (a home's sampling directory is not read for them: it holds every
 * run's tiles); gemm_half_rows measured now (the same GEMMs
 * at 16 and 256 rows); adam_ns measured now (an AdamW loop
 * over 4M parameters, not the codelet: sw_plan_machine_kernels measures
 * the codelet); elem_ns measured now (an RMSNorm forward over 4M
 * elements); task_us measured now (2000 StarPU tasks, each reading two
 * tiles and writing a temporary of its own: needs the runtime, sw_init);
 * the cores counted; the links bench/sim-platform.sh's
 * vm-measured figures (2 ranks through shared memory, BENCHMARKS.md);
 * p2p_spin typed (1 core); coll_offload 0 (gpt_train's default collectives
 * reduce on the workers); gemm_shared measured now (the 256-row GEMM while
 * every other core runs one, each such load bound to a core of its own).
 * About a second in all; on a loaded machine the figures are the load's.
 * After sw_init. */
void sw_plan_machine_here(sw_plan_machine *m, const char *dir, int hidden);
/** The model's other kernels on this machine, as the library's codelets run
 * them on a worker (best of 5 after a first): attn_gflops (sw_attn_fwd and
 * sw_attn_bwd at head_dim over min(seq, 1024) causal rows),
 * attn_probs_gflops (sw_attn_probs_fwd and _bwd, the same) -- both kept
 * where sw_plan_machine_here took them from a calibration --, ce_ns (the
 * cross-entropy's passes over 256 rows of min(vocab, 8192) logits), act_ns
 * (GELU, or SwiGLU where swiglu, forward and backward over 256 x ffn),
 * adaln_ns (the DiT's modulation and gated residual, forward and backward,
 * over 1024 x ffn / 4 of 4 sequences), copy_ns (sw_copy_flat's copy and
 * add over 16M elements) and adam_ns (the AdamW codelet over 4M
 * parameters). Some tenths of a second.
 * Nothing in simulation (codelets do not run there). After sw_init. */
void sw_plan_machine_kernels(sw_plan_machine *m, int head_dim, int seq, int ffn, int vocab, int swiglu);
/** Prints every figure of m and its source, one line each, after prefix. */
void sw_plan_machine_print(const sw_plan_machine *m, FILE *f, const char *prefix);

/** The world: ranks per node times nodes (the mesh puts tp, the innermost
 * group, on the nearest ranks). */
typedef struct sw_plan_world {
    ///@{
    int ranks_per_node, nodes; /**< ranks per node, nodes */
    ///@}
} sw_plan_world;

/** What the search varies (each a list, -1 ends it; NULL/empty: the
 * defaults in sw_plan_space_default). */
typedef struct sw_plan_space {
    int zero[5];        /**< ZeRO stages (0 1 2 3) */
    int recompute[4];   /**< SW_RECOMPUTE_* (none selective full) */
    int virtual_[4];    /**< chunks per stage with pp > 1 (1 2) */
    int max_accum;      /**< micro-batches per step: powers of 2 up to it (8) */
    int sp;             /**< 1: try --sp with tp > 1 (1) */
    int inflight;       /**< 1: with pp > 1 also GPipe's quota (pp-inflight = grad-accum) beside 1F1B (1) */
} sw_plan_space;
/** The defaults above. */
void sw_plan_space_default(sw_plan_space *s);

/** One layout, its verdict and its estimate. */
typedef struct sw_plan_entry {
    sw_gpt_config cfg;  /**< the model's flags with the layout's degrees */
    int legal;          /**< sw_plan_check's verdict */
    int fits;           /**< need <= the budget */
    char why[256];      /**< refused: the rule; dropped: the bytes */
    double need;        /**< the most bytes any rank needs (sw_gpt_memory.need) */
    int need_rank;      /**< that rank */
    double ms;          /**< predicted ms per step */
    ///@{
    double compute_ms, comm_ms, bubble_ms, overhead_ms; /**< its parts (exposed communication only) */
    ///@}
    double cores_ms;    /**< the node's cores' bound where its ranks' threads outnumber them (0: none); ms is at
                             least it */
    double traffic;     /**< bytes the busiest rank sends per step (the traffic model) */
} sw_plan_entry;

/** The rules a layout must satisfy: sw_gpt_config_check (cfg's kv_heads,
 * vocab_padded and ffn filled), sw_mesh_check against world ranks, and the
 * pipeline's sw_schedule_check (graphs/schedule.h: the function
 * sw_pipeline_create refuses by; chunks per stage at most SW_PP_MAX_CHUNKS,
 * a schedule that fits the in-flight quotas, Zero Bubble's split where
 * cfg asks for it). 0, or -1 with the rule in msg. */
int sw_plan_check(sw_gpt_config *cfg, int world, char *msg, size_t n);

/** Every candidate layout of base (its model and batch; its degrees
 * ignored) over the world: the products tp ulysses ring dp pp = ranks, and
 * the space's choices; *count set. Each candidate judged (legal, why);
 * the legal ones' memory computed on every rank (sw_gpt_plan_rank; at most
 * 64 ranks, else each stage's first and last rank) and, where they fit
 * budget_bytes (0: no budget), estimated. Sorted: fitting by predicted
 * time, then not fitting by need, then illegal. Duplicates (sp with tp 1,
 * ZeRO with a gradient group of 1) are left out. After sw_init. free() it. */
sw_plan_entry *sw_plan_layouts(const sw_gpt_config *base, const sw_plan_world *w, const sw_plan_space *s,
                       const sw_plan_machine *m, double budget_bytes, int *count);

/** The gpt_train flags of a layout ("--tp 2 --sp --dp 2 --zero 1 ..."; the
 * degrees, ZeRO, pipeline, micro-batches and recomputation). */
void sw_plan_flags(const sw_gpt_config *c, char *out, size_t n);

/* ------------------------------------------------------------- the DiT */

/** One DiT layout (dit_train's flags), its verdict and its estimate. */
typedef struct sw_plan_dit_entry {
    sw_dit_config cfg;  /**< the model's flags with the layout's degrees */
    int pp;             /**< pipeline stages (dit_train --pp: the mesh's, not in sw_dit_config) */
    int legal;          /**< sw_plan_dit_check's verdict */
    int fits;           /**< need <= the budget */
    char why[256];      /**< refused: the rule; dropped: the bytes */
    double need;        /**< the most bytes any rank needs (sw_dit_plan_rank: sw_dit_bytes at creation) */
    int need_rank;      /**< that rank */
    double ms;          /**< predicted ms per step */
    ///@{
    double compute_ms, comm_ms, bubble_ms, overhead_ms, cores_ms; /**< its parts, as sw_plan_entry's */
    ///@}
    double traffic;     /**< bytes the busiest stage's first rank sends per step (the traffic model) */
} sw_plan_dit_entry;

/** dit_train's rules for a layout over pp stages and world ranks: sw_dit_config_check and sw_mesh_check.
 * 0, or -1 with the rule in msg. */
int sw_plan_dit_check(const sw_dit_config *cfg, int pp, int world, char *msg, size_t n);

/** Every candidate DiT layout of base (its shape and batch; its degrees ignored) over the world, as
 * sw_plan_layouts for the GPT: the products tp ulysses ring dp pp = ranks and the space's choices (ZeRO,
 * chunks, micro-batches, recomputation, --sp; dit_train runs 1F1B's quota only, so no GPipe's);
 * each judged by sw_plan_dit_check, the legal ones' memory on every rank (at most 8 ranks, else each
 * stage's first and last: sw_dit_plan_rank), estimated where they fit (the DiT's FLOPs -- its four
 * branches' GEMMs, spatial, temporal and cross attention --, its traffic model, the same machine
 * terms as the GPT's: docs/planner.md), sorted as sw_plan_layouts sorts. free() it. */
sw_plan_dit_entry *sw_plan_dit_layouts(const sw_dit_config *base, const sw_plan_world *w, const sw_plan_space *s,
                                       const sw_plan_machine *m, double budget_bytes, int *count);

/** The dit_train flags of a DiT layout ("--tp 2 --sp --ulysses 1 --ring 1 --dp 2 --pp 1 --zero 1 --micro 2
 * --recompute full"). */
void sw_plan_dit_flags(const sw_plan_dit_entry *e, char *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif
