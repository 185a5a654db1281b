/* StarPU-MPI point-to-point requests of this process that have not completed
 * (private to src/: comm.c counts its detached sends and receives from
 * submission to completion; the runtime's idle hook reads the count, and
 * lets idle workers sleep only while the progression thread has work). */
#ifndef STARWEAVE_COMM_P2P_H
#define STARWEAVE_COMM_P2P_H

int sw_comm_p2p_pending(void);

#endif
