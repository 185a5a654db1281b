/* StarPU-MPI point-to-point requests of this process that have not completed
 * (private to src/): src/comm/comm.c counts its detached sends and receives
 * from submission to completion; the runtime's idle hook reads the count, and
 * lets idle workers sleep only while the progression thread has work. The
 * count lives in the runtime (runtime.c defines it), below the collectives
 * that keep it, so that the runtime needs nothing from src/comm/. */
#ifndef STARWEAVE_CORE_P2P_H
#define STARWEAVE_CORE_P2P_H

/* atomic: __atomic_add_fetch / __atomic_sub_fetch / __atomic_load_n, relaxed */
extern int sw_p2p_pending;

#endif
