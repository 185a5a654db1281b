/* The simulation build only (docs/simulation.md): lets the threads of a
 * simulated rank call MPI, as MPI_THREAD_MULTIPLE lets them in a real run.
 *
 * Why: under starpu_smpirun each rank is one SMPI process, and StarPU 1.3
 * makes that process StarPU-MPI's progression thread; the program's main
 * and StarPU's workers are other SimGrid actors, which SMPI does not know
 * as MPI processes ("MPI_Init was not called"). starweave calls MPI from
 * main (the mesh's communicators, gathers) and from tasks (the collectives
 * of src/comm/comm_nbc.c). An actor adopted here shares its rank's SMPI process
 * state (its mailboxes, MPI_COMM_WORLD: the same MPI process, as threads of
 * one are) and is given that rank in the groups of the communicators it
 * uses. This reaches into SimGrid 3.32's SMPI process extension
 * (simgrid::smpi::ActorExt, exported by libsimgrid, its header not
 * installed): only its extension slot is used, never its layout, and
 * Group::set_mapping, exported and non-virtual. */
#include <cstdio>
#include <cstdlib>

#include <simgrid/actor.h>
#include <simgrid/exec.h>
#include <simgrid/host.h>
#include <simgrid/s4u/Actor.hpp>
#include <smpi/smpi.h>

#include <starpu.h>

#include "sim_smpi.h"

namespace simgrid {
namespace smpi {
class ActorExt { /* the slot only: its members are SimGrid's business */
  public:
    static xbt::Extension<s4u::Actor, ActorExt> EXTENSION_ID;
};
class Group {
  public:
    void set_mapping(aid_t pid, int rank);
};
} // namespace smpi
} // namespace simgrid

using simgrid::smpi::ActorExt;

/* this rank's SMPI process state and its actor (globals are per simulated
 * rank: SMPI loads the program once per rank) */
static ActorExt *rank_ext;
static aid_t rank_pid = -1;

/* at the adopted actor's end, its slot is emptied: the state is its
 * rank's, deleted with the SMPI process, not with this actor */
static void forget(int, void *)
{
    simgrid::s4u::Actor::self()->extension_set(ActorExt::EXTENSION_ID.id(), nullptr, false);
}

static void adopt_self(void)
{
    simgrid::s4u::Actor *self = simgrid::s4u::Actor::self();
    if (self->extension<ActorExt>() == rank_ext) return;
    self->extension_set(ActorExt::EXTENSION_ID.id(), rank_ext, true); /* its own, unused, is deleted */
    sg_actor_on_exit(forget, nullptr);
}

extern "C" {
/* From the program's main actor, before any MPI call: its parent is the
 * rank's SMPI process (StarPU-MPI started main from there). Returns 0, or
 * -1 when the parent is no SMPI process. */
int sw_sim_adopt_main(void)
{
    aid_t ppid = sg_actor_get_ppid(sg_actor_self());
    sg_actor_t parent = ppid >= 0 ? sg_actor_by_pid(ppid) : nullptr;
    if (!parent) return -1;
    rank_ext = parent->extension<ActorExt>();
    if (!rank_ext) return -1;
    rank_pid = ppid;
    adopt_self();
    int me = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &me); /* the rank of the process state main now shares */
    MPI_Group g;
    MPI_Comm_group(MPI_COMM_WORLD, &g);
    reinterpret_cast<simgrid::smpi::Group *>(g)->set_mapping(sg_actor_self_get_pid(), me);
    return 0;
}

/* SMPI matches a message by its sender's actor (a receive expects the
 * actor its communicator's group names for the source rank), so on each
 * communicator one actor per rank speaks for it: every rank tells the
 * others (an all-gather by main, which speaks on every communicator main
 * made) which of its actors, `pid`, that is from now on. */
void sw_sim_comm_speaker(MPI_Comm comm, long pid)
{
    int n = 0;
    MPI_Comm_size(comm, &n);
    long *all = new long[n];
    MPI_Allgather(&pid, 1, MPI_LONG, all, 1, MPI_LONG, comm);
    MPI_Group g;
    MPI_Comm_group(comm, &g);
    for (int r = 0; r < n; r++) reinterpret_cast<simgrid::smpi::Group *>(g)->set_mapping(all[r], r);
    delete[] all;
}

void sw_sim_comm_made(MPI_Comm comm) { sw_sim_comm_speaker(comm, rank_pid); }

/* Before StarPU-MPI's shutdown (its barrier on MPI_COMM_WORLD): the ranks'
 * SMPI processes speak for them on MPI_COMM_WORLD again; main makes no MPI
 * call after this. */
void sw_sim_world_release(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
    sw_sim_comm_speaker(MPI_COMM_WORLD, rank_pid);
}

void sw_sim_adopt_worker(void) { adopt_self(); }

long sw_sim_self_pid(void) { return (long)sg_actor_self_get_pid(); }

/* The caller's host, or the host its property "starweave_cores" names: the
 * cores a node's ranks share (bench/sim-platform.sh --cores), where the
 * patched StarPU (autotools/starpu-simgrid-cores.patch) runs this worker's
 * tasks. */
void sw_sim_execute(double seconds)
{
    sg_host_t host = sg_host_self();
    const char *cores = sg_host_get_property_value(host, "starweave_cores");
    if (cores && !(host = sg_host_by_name(cores))) {
        fprintf(stderr, "starweave: the host %s that %s names in its property starweave_cores is not in the platform\n",
                cores, sg_host_get_name(sg_host_self()));
        abort();
    }
    sg_exec_t exec = sg_actor_exec_init(seconds * sg_host_get_speed(host));
    sg_exec_set_host(exec, host);
    sg_exec_start(exec);
    sg_exec_wait(exec);
}

struct spawned {
    void (*fn)(void *);
    void *arg;
};
static void *spawned_main(void *p)
{
    spawned s = *static_cast<spawned *>(p);
    delete static_cast<spawned *>(p);
    adopt_self();
    s.fn(s.arg);
    return nullptr;
}

/* The actor runs on the host of the rank's first CPU worker (StarPU names
 * it as main's with CPU0 for MAIN), not on main's: an adopted actor on
 * main's host stalled the collectives of Open MPI's algorithms
 * (smpi/coll-selector:ompi) in the next MPI_Comm_dup of main, at 8 ranks
 * (not at 2 or 4) -- the worker's actors, adopted on their hosts, never
 * did. */
starpu_pthread_t sw_sim_spawn(void (*fn)(void *), void *arg)
{
    std::string name = sg_host_get_name(sg_host_self());
    size_t at = name.rfind("MAIN");
    sg_host_t host = at == std::string::npos ? nullptr : sg_host_by_name(name.replace(at, 4, "CPU0").c_str());
    starpu_pthread_t t;
    starpu_pthread_create_on("sw_collectives", &t, nullptr, spawned_main, new spawned{fn, arg},
                             host ? host : sg_host_self());
    return t;
}
}
