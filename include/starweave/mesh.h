/** @file
 * sw_mesh: the process mesh (tp x ulysses x ring x dp x pp) over
 * MPI_COMM_WORLD, with one MPI communicator per group.
 *
 * Ranks are ordered innermost to outermost tp, ulysses, ring, dp, pp, so
 * that tensor parallelism, the most communication-heavy, sits on the nearest
 * ranks (USP's recommendation):
 *     world rank = t + T*(u + U*(r + R*(d + D*p)))
 * Ulysses groups are contiguous runs of T-strided ranks, ring groups are
 * strided by T*U, data-parallel groups by T*U*R. Within a group the rank
 * follows the group's own coordinates in the same order (in SW_GROUP_SP the
 * rank is u + U*r). Pipeline stages are the outermost: stage = the pp
 * coordinate p, and every group but the world, pp and pp_ends lies within
 * one stage. */
#ifndef STARWEAVE_MESH_H
#define STARWEAVE_MESH_H

#include <stddef.h>
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The degrees of the mesh. */
typedef struct sw_mesh_dims {
    ///@{
    int tp, ulysses, ring, dp, pp; /**< tensor-parallel, Ulysses, Ring, data-parallel, pipeline degrees */
    ///@}
} sw_mesh_dims;

/** The groups of the mesh: the ranks that share the coordinates named. */
typedef enum {
    SW_GROUP_WORLD,   /**< every rank */
    SW_GROUP_TP,      /**< same u, r, d */
    SW_GROUP_ULYSSES, /**< same t, r, d */
    SW_GROUP_RING,    /**< same t, u, d */
    SW_GROUP_SP,      /**< ulysses x ring: same t, d */
    SW_GROUP_DP,      /**< same t, u, r */
    SW_GROUP_TP_SP,   /**< tp x ulysses x ring: same d */
    SW_GROUP_SP_DP,   /**< ulysses x ring x dp: same t */
    SW_GROUP_PP,      /**< the pipeline stages: same t, u, r, d (rank = stage) */
    SW_GROUP_PP_ENDS, /**< the first and the last stage (same t, u, r, d): a weight both hold, such as a
                         tied embedding, has its gradients summed over it; a middle stage is a group of one */
    SW_GROUP_COUNT    /**< the number of groups */
} sw_group;

/** The process mesh (opaque): sw_mesh_create, sw_mesh_destroy. */
typedef struct sw_mesh sw_mesh;

/** Pure validation, no communication: every degree >= 1, and
 * world_size == tp*ulysses*ring*dp*pp. Returns 0, or -1 with the rule and
 * the values in msg (n bytes, may be NULL/0), e.g.
 * "world size (4) must equal tp*ulysses*ring*dp*pp (2*1*1*1*1 = 2)". */
int sw_mesh_check(const sw_mesh_dims *d, int world_size, char *msg, size_t n);

/** Call after sw_init, before any communication is submitted (StarPU-MPI
 * initialises MPI with MPI_THREAD_SERIALIZED; the splits run on the calling
 * thread). d == NULL means pure data parallelism (dp = world size).
 * Checks the dims against the world size first, on every rank and without
 * communicating: on a violated rule, sw_usage_error (message printed once,
 * every rank exits 2). Then splits MPI_COMM_WORLD once per group (collective
 * over the world). Never returns NULL. */
sw_mesh *sw_mesh_create(const sw_mesh_dims *d);
/** A mesh of the degrees d seen from world rank world_rank, without
 * communicators (every sw_mesh_comm is MPI_COMM_NULL) and without MPI: the
 * ranks and sizes sw_mesh_create would give that rank, for the models
 * (memory, traffic) of a layout this process does not run -- the planner's
 * (plan.h). Bad degrees or rank: sw_usage_error. Free with sw_mesh_destroy. */
sw_mesh *sw_mesh_virtual(const sw_mesh_dims *d, int world_rank);
/** Frees the communicators (collective); call before sw_shutdown. NULL is a no-op. */
void sw_mesh_destroy(sw_mesh *m);

/** Rank of this process in group g (-1 for a g out of range). */
int sw_mesh_rank(const sw_mesh *m, sw_group g);
/** Size of group g (-1 for a g out of range). */
int sw_mesh_size(const sw_mesh *m, sw_group g);
/** Group g's communicator (MPI_COMM_NULL for a g out of range). */
MPI_Comm sw_mesh_comm(const sw_mesh *m, sw_group g);
/** The degrees the mesh was built with. */
sw_mesh_dims sw_mesh_get_dims(const sw_mesh *m);

/** This rank's coordinates (any pointer may be NULL). */
void sw_mesh_coords(const sw_mesh *m, int *t, int *u, int *r, int *d);
/** This rank's pipeline stage (its pp coordinate, 0 .. pp - 1). */
int sw_mesh_stage(const sw_mesh *m);
/** World rank of the process at (t, u, r, d) of this rank's stage; -1 if out of range. */
int sw_mesh_world_rank(const sw_mesh *m, int t, int u, int r, int d);

/** Group g's name: "world", "tp", "ulysses", "ring", "sp", "dp", "tp_sp", "sp_dp", "pp", "pp_ends"; "?" otherwise. */
const char *sw_group_name(sw_group g);

#ifdef __cplusplus
}
#endif
#endif
