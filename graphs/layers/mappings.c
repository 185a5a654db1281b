/* f and g of tensor/sequence parallelism (see starweave/mappings.h). */
#include "layer_util.h"
#include "starweave/mappings.h"

static int active(const sw_tp *tp) { return tp->t > 1; }

/* the group and the input; with TP and sp, out of the other side's rows:
 * the gathered [t rows, c] of a local [rows, c] (gather), or the reverse */
static void check_tp(const char *fn, const sw_tp *tp, const char *in_arg, const sw_tensor *in, const char *out_arg,
                     const sw_tensor *out, int gather)
{
    sw_check_ptr(fn, "tp", tp);
    sw_check_ptr(fn, in_arg, in);
    if (!active(tp) || !tp->sp) return;
    if (!gather && in->rows % tp->t)
        sw_usage_error("%s: %s: its rows must be divisible by tp (%lld, tp %d)", fn, in_arg, (long long)in->rows, tp->t);
    sw_check_tensor(fn, out_arg, out, gather ? in->rows * tp->t : in->rows / tp->t, in->cols);
}

sw_tensor *sw_tp_f_forward(const sw_tp *tp, sw_tensor *x, sw_tensor *full)
{
    check_tp("sw_tp_f_forward", tp, "x", x, "full", full, 1);
    if (!active(tp) || !tp->sp) return x;
    sw_allgather(tp->comm, SW_GROUP_TP, x, full);
    return full;
}

sw_tensor *sw_tp_f_backward(const sw_tp *tp, sw_tensor *partial, sw_tensor *local)
{
    check_tp("sw_tp_f_backward", tp, "partial", partial, "local", local, 0);
    if (!active(tp)) return partial;
    if (!tp->sp) {
        sw_allreduce(tp->comm, SW_GROUP_TP, partial, SW_SUM);
        return partial;
    }
    sw_reduce_scatter(tp->comm, SW_GROUP_TP, partial, local, SW_SUM);
    return local;
}

sw_tensor *sw_tp_g_forward(const sw_tp *tp, sw_tensor *partial, sw_tensor *local)
{
    check_tp("sw_tp_g_forward", tp, "partial", partial, "local", local, 0);
    return sw_tp_f_backward(tp, partial, local); /* the same collective */
}

sw_tensor *sw_tp_g_backward(const sw_tp *tp, sw_tensor *local, sw_tensor *full)
{
    check_tp("sw_tp_g_backward", tp, "local", local, "full", full, 1);
    return sw_tp_f_forward(tp, local, full); /* the same collective */
}

void sw_tp_sum_replicated_grad(const sw_tp *tp, sw_tensor *grad)
{
    sw_check_ptr("sw_tp_sum_replicated_grad", "tp", tp);
    if (active(tp) && tp->sp) sw_check_ptr("sw_tp_sum_replicated_grad", "grad", grad);
    if (active(tp) && tp->sp) sw_allreduce(tp->comm, SW_GROUP_TP, grad, SW_SUM);
}

double sw_tp_bytes(const sw_tp *tp, sw_tp_op op, int64_t rows, int64_t cols)
{
    if (!active(tp)) return 0;
    /* g's forward is f's backward and the reverse */
    int gathers = op == SW_TP_F_FORWARD || op == SW_TP_G_BACKWARD;
    if (op == SW_TP_SUM_GRAD) return tp->sp ? sw_comm_bytes(tp->comm, SW_GROUP_TP, SW_COLL_ALLREDUCE, rows, cols) : 0;
    if (!tp->sp) return gathers ? 0 : sw_comm_bytes(tp->comm, SW_GROUP_TP, SW_COLL_ALLREDUCE, rows, cols);
    return sw_comm_bytes(tp->comm, SW_GROUP_TP, gathers ? SW_COLL_ALLGATHER : SW_COLL_REDUCE_SCATTER, rows, cols);
}
