/* Process mesh: coordinates, validation and one communicator per group. */
#include "starweave/mesh.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "starweave/runtime.h"

enum { AXIS_T, AXIS_U, AXIS_R, AXIS_D, AXIS_P, AXIS_COUNT };
#define AX(a) (1u << (a))

/* The axes each group spans, innermost first. */
static const unsigned group_axes[SW_GROUP_COUNT] = {
    [SW_GROUP_WORLD] = AX(AXIS_T) | AX(AXIS_U) | AX(AXIS_R) | AX(AXIS_D) | AX(AXIS_P),
    [SW_GROUP_TP] = AX(AXIS_T),
    [SW_GROUP_ULYSSES] = AX(AXIS_U),
    [SW_GROUP_RING] = AX(AXIS_R),
    [SW_GROUP_SP] = AX(AXIS_U) | AX(AXIS_R),
    [SW_GROUP_DP] = AX(AXIS_D),
    [SW_GROUP_TP_SP] = AX(AXIS_T) | AX(AXIS_U) | AX(AXIS_R),
    [SW_GROUP_SP_DP] = AX(AXIS_U) | AX(AXIS_R) | AX(AXIS_D),
    [SW_GROUP_PP] = AX(AXIS_P),
    [SW_GROUP_PP_ENDS] = AX(AXIS_P), /* restricted to the first and last stage (sw_mesh_create) */
};

static const char *const group_names[SW_GROUP_COUNT] = {
    [SW_GROUP_WORLD] = "world", [SW_GROUP_TP] = "tp",     [SW_GROUP_ULYSSES] = "ulysses",
    [SW_GROUP_RING] = "ring",   [SW_GROUP_SP] = "sp",     [SW_GROUP_DP] = "dp",
    [SW_GROUP_TP_SP] = "tp_sp", [SW_GROUP_SP_DP] = "sp_dp", [SW_GROUP_PP] = "pp",
    [SW_GROUP_PP_ENDS] = "pp_ends",
};

struct sw_mesh {
    sw_mesh_dims dims;
    int deg[AXIS_COUNT];   /* T, U, R, D, P */
    int coord[AXIS_COUNT]; /* this rank's t, u, r, d, p */
    int rank[SW_GROUP_COUNT], size[SW_GROUP_COUNT];
    MPI_Comm comm[SW_GROUP_COUNT];
};

const char *sw_group_name(sw_group g)
{
    return ((unsigned)g < SW_GROUP_COUNT) ? group_names[g] : "?";
}

int sw_mesh_check(const sw_mesh_dims *d, int world_size, char *msg, size_t n)
{
    char dummy[1];
    if (!msg || n == 0) { msg = dummy; n = sizeof dummy; }
    if (!d) { snprintf(msg, n, "mesh dimensions missing"); return -1; }
    const struct { const char *name; int v; } deg[] = {
        {"tp", d->tp}, {"ulysses", d->ulysses}, {"ring", d->ring}, {"dp", d->dp}, {"pp", d->pp},
    };
    for (size_t i = 0; i < sizeof deg / sizeof deg[0]; i++)
        if (deg[i].v < 1) {
            snprintf(msg, n, "%s must be at least 1 (%s = %d)", deg[i].name, deg[i].name, deg[i].v);
            return -1;
        }
    /* long double holds the product of five ints exactly up to 2^64, and
     * beyond that it only has to compare unequal */
    long double prod = (long double)d->tp * d->ulysses * d->ring * d->dp * d->pp;
    if (prod != (long double)world_size) {
        snprintf(msg, n, "world size (%d) must equal tp*ulysses*ring*dp*pp (%d*%d*%d*%d*%d = %.0Lf)",
                 world_size, d->tp, d->ulysses, d->ring, d->dp, d->pp, prod);
        return -1;
    }
    return 0;
}

/* Mixed-radix number of the coordinates on the axes in mask (innermost
 * first): the rank within the group when mask is the group's axes, the
 * group's colour when mask is the complement. */
static int mixed_radix(const int *deg, const int *coord, unsigned mask)
{
    int v = 0;
    for (int a = AXIS_COUNT - 1; a >= 0; a--)
        if (mask & AX(a)) v = v * deg[a] + coord[a];
    return v;
}

static int axes_size(const int *deg, unsigned mask)
{
    int s = 1;
    for (int a = 0; a < AXIS_COUNT; a++)
        if (mask & AX(a)) s *= deg[a];
    return s;
}

sw_mesh *sw_mesh_create(const sw_mesh_dims *dims)
{
    int inited = 0;
    SW_CHECK(MPI_Initialized(&inited));
    if (!inited) sw_fail(__FILE__, __LINE__, "sw_mesh_create before sw_init", -EINVAL);
    int world = sw_world_size(), me = sw_rank();
    sw_mesh_dims d = dims ? *dims : (sw_mesh_dims){1, 1, 1, world, 1};

    /* Every rank checks the same values without communicating, so every rank
     * stops here on its own before any split could block. */
    char msg[256];
    if (sw_mesh_check(&d, world, msg, sizeof msg) != 0) sw_usage_error("%s", msg);

    sw_mesh *m = calloc(1, sizeof *m);
    if (!m) sw_fail(__FILE__, __LINE__, "calloc(sw_mesh)", -ENOMEM);
    m->dims = d;
    m->deg[AXIS_T] = d.tp;
    m->deg[AXIS_U] = d.ulysses;
    m->deg[AXIS_R] = d.ring;
    m->deg[AXIS_D] = d.dp;
    m->deg[AXIS_P] = d.pp;
    int rest = me;
    for (int a = 0; a < AXIS_COUNT; a++) {
        m->coord[a] = rest % m->deg[a];
        rest /= m->deg[a];
    }

    const unsigned all = group_axes[SW_GROUP_WORLD];
    const int p = m->coord[AXIS_P], pp = d.pp, end = p == 0 || p == pp - 1;
    for (int g = 0; g < SW_GROUP_COUNT; g++) {
        unsigned axes = group_axes[g];
        int key = mixed_radix(m->deg, m->coord, axes);
        int color = mixed_radix(m->deg, m->coord, all & ~axes);
        int expect = axes_size(m->deg, axes);
        if (g == SW_GROUP_PP_ENDS) { /* the end stages together, every middle stage alone */
            key = end ? p > 0 : 0;
            color += end ? 0 : p * world;
            expect = end ? (pp > 1 ? 2 : 1) : 1;
        }
        /* a split even for the world group: the mesh's traffic then never
         * shares a communicator (and tag space) with StarPU-MPI's own */
        SW_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &m->comm[g]));
        SW_CHECK(MPI_Comm_rank(m->comm[g], &m->rank[g]));
        SW_CHECK(MPI_Comm_size(m->comm[g], &m->size[g]));
        /* keys are distinct within a colour, so MPI's order is the key's */
        if (m->rank[g] != key || m->size[g] != expect)
            sw_fail(__FILE__, __LINE__, "MPI_Comm_split gave an unexpected rank or size", -EPROTO);
    }
    return m;
}

sw_mesh *sw_mesh_virtual(const sw_mesh_dims *d, int world_rank)
{
    char msg[256];
    int world = d ? d->tp * d->ulysses * d->ring * d->dp * d->pp : 0;
    if (sw_mesh_check(d, world, msg, sizeof msg) != 0) sw_usage_error("sw_mesh_virtual: %s", msg);
    if (world_rank < 0 || world_rank >= world)
        sw_usage_error("sw_mesh_virtual: world rank %d outside [0, %d)", world_rank, world);
    sw_mesh *m = calloc(1, sizeof *m);
    if (!m) sw_fail(__FILE__, __LINE__, "calloc(sw_mesh)", -ENOMEM);
    m->dims = *d;
    const int deg[AXIS_COUNT] = {d->tp, d->ulysses, d->ring, d->dp, d->pp};
    for (int a = 0, rest = world_rank; a < AXIS_COUNT; a++) {
        m->deg[a] = deg[a];
        m->coord[a] = rest % deg[a];
        rest /= deg[a];
    }
    /* the ranks and sizes sw_mesh_create's splits give (same keys), no communicator */
    const int p = m->coord[AXIS_P], end = p == 0 || p == d->pp - 1;
    for (int g = 0; g < SW_GROUP_COUNT; g++) {
        m->comm[g] = MPI_COMM_NULL;
        m->rank[g] = mixed_radix(m->deg, m->coord, group_axes[g]);
        m->size[g] = axes_size(m->deg, group_axes[g]);
        if (g == SW_GROUP_PP_ENDS) m->rank[g] = end ? p > 0 : 0, m->size[g] = end ? (d->pp > 1 ? 2 : 1) : 1;
    }
    return m;
}

void sw_mesh_destroy(sw_mesh *m)
{
    if (!m) return;
    for (int g = 0; g < SW_GROUP_COUNT; g++)
        if (m->comm[g] != MPI_COMM_NULL) SW_CHECK(MPI_Comm_free(&m->comm[g]));
    free(m);
}

int sw_mesh_rank(const sw_mesh *m, sw_group g)
{
    return ((unsigned)g < SW_GROUP_COUNT) ? m->rank[g] : -1;
}

int sw_mesh_size(const sw_mesh *m, sw_group g)
{
    return ((unsigned)g < SW_GROUP_COUNT) ? m->size[g] : -1;
}

MPI_Comm sw_mesh_comm(const sw_mesh *m, sw_group g)
{
    return ((unsigned)g < SW_GROUP_COUNT) ? m->comm[g] : MPI_COMM_NULL;
}

sw_mesh_dims sw_mesh_get_dims(const sw_mesh *m) { return m->dims; }

void sw_mesh_coords(const sw_mesh *m, int *t, int *u, int *r, int *d)
{
    if (t) *t = m->coord[AXIS_T];
    if (u) *u = m->coord[AXIS_U];
    if (r) *r = m->coord[AXIS_R];
    if (d) *d = m->coord[AXIS_D];
}

int sw_mesh_stage(const sw_mesh *m) { return m->coord[AXIS_P]; }

int sw_mesh_world_rank(const sw_mesh *m, int t, int u, int r, int d)
{
    const int c[AXIS_COUNT] = {t, u, r, d, m->coord[AXIS_P]};
    for (int a = 0; a < AXIS_COUNT; a++)
        if (c[a] < 0 || c[a] >= m->deg[a]) return -1;
    const int p = c[AXIS_P], D = m->deg[AXIS_D];
    return t + m->deg[AXIS_T] * (u + m->deg[AXIS_U] * (r + m->deg[AXIS_R] * (d + D * p)));
}
