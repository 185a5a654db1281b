/* The simulation build's MPI for every thread of a rank (src/core/sim_smpi.cc,
 * docs/simulation.md); in other builds these do nothing. */
#ifndef SW_SIM_SMPI_H
#define SW_SIM_SMPI_H
#include <mpi.h>
#include <starpu_config.h>

#ifdef STARPU_SIMGRID
#include <starpu_thread.h>
#ifdef __cplusplus
extern "C" {
#endif
/* main's actor joins its rank's SMPI process (before any MPI call); 0 or -1 */
int sw_sim_adopt_main(void);
/* a communicator main made: the rank's SMPI process (StarPU-MPI's
 * progression thread) speaks for each rank there */
void sw_sim_comm_made(MPI_Comm comm);
/* on comm, from now on, this rank's actor `pid` speaks for it (collective
 * over comm, from main) */
void sw_sim_comm_speaker(MPI_Comm comm, long pid);
/* before StarPU-MPI's shutdown: MPI_COMM_WORLD back to the SMPI processes */
void sw_sim_world_release(void);
/* a worker about to call MPI: it shares its rank's MPI process */
void sw_sim_adopt_worker(void);
/* the calling actor's pid */
long sw_sim_self_pid(void);
/* runs fn(arg) in a new actor sharing its rank's MPI process (to run
 * collectives there without holding the caller); its thread, for
 * starpu_pthread_join */
starpu_pthread_t sw_sim_spawn(void (*fn)(void *), void *arg);
/* the calling worker's actor computes SECONDS of its core's time, on the
 * cores its tasks run on (shared with the node's other workers where the
 * platform says so), where a sleep would take none of them */
void sw_sim_execute(double seconds);
#ifdef __cplusplus
}
#endif
#else
static inline int sw_sim_adopt_main(void) { return 0; }
static inline void sw_sim_comm_made(MPI_Comm comm) { (void)comm; }
static inline void sw_sim_comm_speaker(MPI_Comm comm, long pid) { (void)comm, (void)pid; }
static inline void sw_sim_world_release(void) {}
static inline void sw_sim_adopt_worker(void) {}
static inline long sw_sim_self_pid(void) { return -1; }
static inline void sw_sim_execute(double seconds) { (void)seconds; }
#endif
#endif
