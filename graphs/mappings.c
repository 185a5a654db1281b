/* f and g of tensor/sequence parallelism (see starweave/mappings.h). */
#include "starweave/mappings.h"

static int active(const sw_tp *tp) { return tp->t > 1; }

sw_tensor *sw_tp_f_forward(const sw_tp *tp, sw_tensor *x, sw_tensor *full)
{
    if (!active(tp) || !tp->sp) return x;
    sw_allgather(tp->comm, SW_GROUP_TP, x, full);
    return full;
}

sw_tensor *sw_tp_f_backward(const sw_tp *tp, sw_tensor *partial, sw_tensor *local)
{
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
    return sw_tp_f_backward(tp, partial, local); /* the same collective */
}

sw_tensor *sw_tp_g_backward(const sw_tp *tp, sw_tensor *local, sw_tensor *full)
{
    return sw_tp_f_forward(tp, local, full); /* the same collective */
}

void sw_tp_sum_replicated_grad(const sw_tp *tp, sw_tensor *grad)
{
    if (active(tp) && tp->sp) sw_allreduce(tp->comm, SW_GROUP_TP, grad, SW_SUM);
}
