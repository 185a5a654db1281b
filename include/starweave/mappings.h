/** @file
 * The communication vocabulary of tensor and sequence parallelism, named
 * once (Megatron-LM's mappings.py; table in ../shared/reference.md):
 *
 * | operator                     | TP forward | TP backward | TP+SP forward      | TP+SP backward     |
 * |------------------------------|------------|-------------|--------------------|--------------------|
 * | f: copy to the TP region     | identity   | all-reduce  | all-gather (rows)  | reduce-scatter     |
 * | g: reduce from the TP region | all-reduce | identity    | reduce-scatter     | all-gather (rows)  |
 *
 * f sits before a column-parallel linear, g after a row-parallel one. Rows
 * are tokens in [s, b] order, so the sequence split is a row split: a
 * "local" tensor has T/t rows with SP and all T rows without. Every
 * function submits and returns the tensor that holds its result: the input
 * itself for an identity or an in-place all-reduce, else `out`. With t = 1
 * nothing is submitted. Called in the same order on every TP rank. */
#ifndef STARWEAVE_MAPPINGS_H
#define STARWEAVE_MAPPINGS_H

#include "starweave/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The TP group the operators work on. */
typedef struct sw_tp {
    sw_comm *comm; /**< NULL when t == 1 */
    ///@{
    int t, rank;   /**< degree and this rank's place in the TP group */
    ///@}
    int sp;        /**< sequence parallelism */
} sw_tp;

/** f forward: x local [T/t or T, c] -> full [T, c] */
sw_tensor *sw_tp_f_forward(const sw_tp *tp, sw_tensor *x, sw_tensor *full);
/** f backward: partial gradient [T, c] (summed over the group) -> local */
sw_tensor *sw_tp_f_backward(const sw_tp *tp, sw_tensor *partial, sw_tensor *local);
/** g forward: partial output [T, c] -> local (summed over the group) */
sw_tensor *sw_tp_g_forward(const sw_tp *tp, sw_tensor *partial, sw_tensor *local);
/** g backward: local gradient -> full [T, c] */
sw_tensor *sw_tp_g_backward(const sw_tp *tp, sw_tensor *local, sw_tensor *full);
/** gradient of a parameter replicated over the group but computed from the
 * local rows only (SP: norms, row-parallel biases): sum over the group */
void sw_tp_sum_replicated_grad(const sw_tp *tp, sw_tensor *grad);

/** The operators, for their traffic model (sw_tp_bytes). */
typedef enum {
    SW_TP_F_FORWARD,  /**< sw_tp_f_forward */
    SW_TP_F_BACKWARD, /**< sw_tp_f_backward */
    SW_TP_G_FORWARD,  /**< sw_tp_g_forward */
    SW_TP_G_BACKWARD, /**< sw_tp_g_backward */
    SW_TP_SUM_GRAD    /**< sw_tp_sum_replicated_grad */
} sw_tp_op;
/** The traffic model of the operators: bytes this rank sends for one of
 * them on a full tensor [rows, cols] (T rows; for SW_TP_SUM_GRAD the
 * gradient's shape), as sw_comm_bytes counts its collective. */
double sw_tp_bytes(const sw_tp *tp, sw_tp_op op, int64_t rows, int64_t cols);

#ifdef __cplusplus
}
#endif

#endif
