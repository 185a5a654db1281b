/* sw_mesh under mpirun (through tests/test_mesh.sh): for every factorisation
 * of the world size into tp*ulysses*ring*dp, the coordinates, group sizes
 * and ranks follow t + T*(u + U*(r + R*d)), and each group's communicator
 * holds exactly the expected world ranks. Also sw_mesh_check's rejections.
 *
 *   test_mesh                      the checks above
 *   test_mesh --dims tp=2,dp=2     only build that mesh (bad-input test:
 *                                  a mismatch must exit 2 on every rank) */
#include <string.h>

#include "starweave/mesh.h"
#include "testutil.h"

static int me, world;

/* Every rank checks; rank 0 reports passes, any rank reports its failures. */
static void check(const char *what, int cond)
{
    if (cond) tu_passed++; else tu_failed++;
    if (!cond) printf("FAIL rank %d: %s\n", me, what);
    else if (me == 0) printf("PASS %s\n", what);
    fflush(stdout);
}

static int stage; /* this rank's pp coordinate, in the mesh being checked */

/* An independent restatement of the rank formula, at this rank's stage. */
static int WP(const sw_mesh_dims *d, int t, int u, int r, int dd, int p)
{
    return t + d->tp * (u + d->ulysses * (r + d->ring * (dd + d->dp * p)));
}
static int W(const sw_mesh_dims *d, int t, int u, int r, int dd) { return WP(d, t, u, r, dd, stage); }

/* World rank of the process with rank i in group g, seen from (t, u, r, d). */
static int member(const sw_mesh_dims *D, sw_group g, int i, int t, int u, int r, int d)
{
    int T = D->tp, U = D->ulysses, R = D->ring;
    int end = stage == 0 || stage == D->pp - 1;
    switch (g) {
    case SW_GROUP_WORLD: return i;
    case SW_GROUP_PP: return WP(D, t, u, r, d, i);
    case SW_GROUP_PP_ENDS: return WP(D, t, u, r, d, !end ? stage : i ? D->pp - 1 : 0);
    case SW_GROUP_TP: return W(D, i, u, r, d);
    case SW_GROUP_ULYSSES: return W(D, t, i, r, d);
    case SW_GROUP_RING: return W(D, t, u, i, d);
    case SW_GROUP_SP: return W(D, t, i % U, i / U, d);
    case SW_GROUP_DP: return W(D, t, u, r, i);
    case SW_GROUP_TP_SP: return W(D, i % T, (i / T) % U, i / (T * U), d);
    case SW_GROUP_SP_DP: return W(D, t, i % U, (i / U) % R, i / (U * R));
    default: return -1;
    }
}

static int expected_size(const sw_mesh_dims *D, sw_group g)
{
    int T = D->tp, U = D->ulysses, R = D->ring, P = D->dp;
    switch (g) {
    case SW_GROUP_WORLD: return T * U * R * P * D->pp;
    case SW_GROUP_PP: return D->pp;
    case SW_GROUP_PP_ENDS: return D->pp > 1 && (stage == 0 || stage == D->pp - 1) ? 2 : 1;
    case SW_GROUP_TP: return T;
    case SW_GROUP_ULYSSES: return U;
    case SW_GROUP_RING: return R;
    case SW_GROUP_SP: return U * R;
    case SW_GROUP_DP: return P;
    case SW_GROUP_TP_SP: return T * U * R;
    case SW_GROUP_SP_DP: return U * R * P;
    default: return -1;
    }
}

static int expected_rank(const sw_mesh_dims *D, sw_group g, int t, int u, int r, int d)
{
    int T = D->tp, U = D->ulysses, R = D->ring;
    switch (g) {
    case SW_GROUP_WORLD: return me;
    case SW_GROUP_PP: return stage;
    case SW_GROUP_PP_ENDS: return stage > 0 && stage == D->pp - 1;
    case SW_GROUP_TP: return t;
    case SW_GROUP_ULYSSES: return u;
    case SW_GROUP_RING: return r;
    case SW_GROUP_SP: return u + U * r;
    case SW_GROUP_DP: return d;
    case SW_GROUP_TP_SP: return t + T * (u + U * r);
    case SW_GROUP_SP_DP: return u + U * (r + R * d);
    default: return -1;
    }
}

static void check_mesh(const sw_mesh_dims *D, sw_mesh *m)
{
    char what[256], tag[64];
    snprintf(tag, sizeof tag, "np=%d tp=%d ulysses=%d ring=%d dp=%d pp=%d", world, D->tp, D->ulysses, D->ring,
             D->dp, D->pp);
    int T = D->tp, U = D->ulysses, R = D->ring, P = D->dp;
    int t, u, r, d;
    sw_mesh_coords(m, &t, &u, &r, &d);
    stage = sw_mesh_stage(m);
    int et = me % T, eu = (me / T) % U, er = (me / (T * U)) % R, ed = (me / (T * U * R)) % P, ep = me / (T * U * R * P);
    snprintf(what, sizeof what, "%s: coordinates (%d,%d,%d,%d,%d), expected (%d,%d,%d,%d,%d)", tag, t, u, r, d,
             stage, et, eu, er, ed, ep);
    check(what, t == et && u == eu && r == er && d == ed && stage == ep);
    sw_mesh_dims got = sw_mesh_get_dims(m);
    check("dims round trip", got.tp == T && got.ulysses == U && got.ring == R && got.dp == P && got.pp == D->pp);

    /* sw_mesh_world_rank is the inverse of the coordinates, over the whole mesh */
    int ok = sw_mesh_world_rank(m, t, u, r, d) == me;
    for (int dd = 0; dd < P; dd++)
        for (int rr = 0; rr < R; rr++)
            for (int uu = 0; uu < U; uu++)
                for (int tt = 0; tt < T; tt++) ok &= sw_mesh_world_rank(m, tt, uu, rr, dd) == W(D, tt, uu, rr, dd);
    snprintf(what, sizeof what, "%s: sw_mesh_world_rank inverts the coordinates", tag);
    check(what, ok);
    ok = sw_mesh_world_rank(m, T, 0, 0, 0) == -1 && sw_mesh_world_rank(m, 0, U, 0, 0) == -1 &&
         sw_mesh_world_rank(m, 0, 0, R, 0) == -1 && sw_mesh_world_rank(m, 0, 0, 0, P) == -1 &&
         sw_mesh_world_rank(m, -1, 0, 0, 0) == -1;
    check("sw_mesh_world_rank out of range gives -1", ok);

    int *ranks = malloc(sizeof(int) * (size_t)world);
    if (!ranks) { perror("malloc"); exit(99); }
    for (int g = 0; g < SW_GROUP_COUNT; g++) {
        int size = sw_mesh_size(m, (sw_group)g), rank = sw_mesh_rank(m, (sw_group)g);
        MPI_Comm c = sw_mesh_comm(m, (sw_group)g);
        int es = expected_size(D, (sw_group)g), er2 = expected_rank(D, (sw_group)g, t, u, r, d);
        int csize = -1, crank = -1;
        if (c != MPI_COMM_NULL) {
            SW_CHECK(MPI_Comm_size(c, &csize));
            SW_CHECK(MPI_Comm_rank(c, &crank));
        }
        snprintf(what, sizeof what, "%s: %s group size %d rank %d (communicator %d, %d), expected %d, %d",
                 tag, sw_group_name((sw_group)g), size, rank, csize, crank, es, er2);
        check(what, size == es && rank == er2 && csize == es && crank == er2);
        if (c == MPI_COMM_NULL || csize != es) continue;
        /* the communicator really holds the expected world ranks, in order */
        SW_CHECK(MPI_Allgather(&me, 1, MPI_INT, ranks, 1, MPI_INT, c));
        ok = 1;
        for (int i = 0; i < es; i++) ok &= ranks[i] == member(D, (sw_group)g, i, t, u, r, d);
        snprintf(what, sizeof what, "%s: %s communicator holds world ranks {%d%s}", tag,
                 sw_group_name((sw_group)g), ranks[0], es > 1 ? ", ..." : "");
        check(what, ok);
    }
    free(ranks);
}

static void check_rejects(const char *what, sw_mesh_dims d, int world_size, const char *want)
{
    char msg[256] = "";
    int rc = sw_mesh_check(&d, world_size, msg, sizeof msg);
    char line[512];
    snprintf(line, sizeof line, "reject %s: \"%s\"%s%s", what, msg, strcmp(msg, want) ? " expected " : "",
             strcmp(msg, want) ? want : "");
    check(line, rc == -1 && strcmp(msg, want) == 0);
}

static void check_validation(void)
{
    char msg[256] = "untouched";
    check("sw_mesh_check accepts tp=2 ulysses=2 for 4 ranks",
          sw_mesh_check(&(sw_mesh_dims){2, 2, 1, 1, 1}, 4, msg, sizeof msg) == 0);
    check_rejects("world size mismatch", (sw_mesh_dims){2, 1, 1, 1, 1}, 4,
                  "world size (4) must equal tp*ulysses*ring*dp*pp (2*1*1*1*1 = 2)");
    check_rejects("tp=2 dp=2 on 3 ranks", (sw_mesh_dims){2, 1, 1, 2, 1}, 3,
                  "world size (3) must equal tp*ulysses*ring*dp*pp (2*1*1*2*1 = 4)");
    check_rejects("tp=0", (sw_mesh_dims){0, 1, 1, 1, 1}, 1, "tp must be at least 1 (tp = 0)");
    check_rejects("ulysses=-1", (sw_mesh_dims){1, -1, 1, 1, 1}, 1, "ulysses must be at least 1 (ulysses = -1)");
    check_rejects("ring=0", (sw_mesh_dims){1, 1, 0, 1, 1}, 1, "ring must be at least 1 (ring = 0)");
    check_rejects("dp=0", (sw_mesh_dims){1, 1, 1, 0, 1}, 0, "dp must be at least 1 (dp = 0)");
    check_rejects("pp=0", (sw_mesh_dims){1, 1, 1, 1, 0}, 1, "pp must be at least 1 (pp = 0)");
    check("sw_mesh_check accepts pp=2 dp=2 for 4 ranks",
          sw_mesh_check(&(sw_mesh_dims){1, 1, 1, 2, 2}, 4, msg, sizeof msg) == 0);
    check_rejects("product beyond int", (sw_mesh_dims){65536, 65536, 1, 1, 1}, 0,
                  "world size (0) must equal tp*ulysses*ring*dp*pp (65536*65536*1*1*1 = 4294967296)");
    check_rejects("product beyond 64 bits", (sw_mesh_dims){1 << 30, 1 << 30, 1 << 30, 1, 1}, 8,
                  "world size (8) must equal tp*ulysses*ring*dp*pp (1073741824*1073741824*1073741824*1*1 = "
                  "1237940039285380274899124224)");
    check("sw_mesh_check without dims fails", sw_mesh_check(NULL, 1, msg, sizeof msg) == -1);
    check("sw_mesh_check without a message buffer",
          sw_mesh_check(&(sw_mesh_dims){0, 1, 1, 1, 1}, 1, NULL, 0) == -1);
    char small[8];
    int rc = sw_mesh_check(&(sw_mesh_dims){0, 1, 1, 1, 1}, 1, small, sizeof small);
    check("sw_mesh_check truncates the message to the buffer", rc == -1 && strcmp(small, "tp must") == 0);
    check("group names", strcmp(sw_group_name(SW_GROUP_SP), "sp") == 0 &&
                             strcmp(sw_group_name(SW_GROUP_TP_SP), "tp_sp") == 0 &&
                             strcmp(sw_group_name(SW_GROUP_SP_DP), "sp_dp") == 0 &&
                             strcmp(sw_group_name(SW_GROUP_PP), "pp") == 0 &&
                             strcmp(sw_group_name(SW_GROUP_PP_ENDS), "pp_ends") == 0 &&
                             strcmp(sw_group_name(SW_GROUP_COUNT), "?") == 0);
}

/* "tp=2,dp=2": unnamed degrees are 1. */
static sw_mesh_dims parse_dims(const char *s)
{
    sw_mesh_dims d = {1, 1, 1, 1, 1};
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) sw_usage_error("--dims expects name=value items, got '%s'", item);
        *eq = '\0';
        char *end;
        long v = strtol(eq + 1, &end, 10);
        if (*end || end == eq + 1) sw_usage_error("--dims %s expects an integer, got '%s'", item, eq + 1);
        int *slot = !strcmp(item, "tp") ? &d.tp : !strcmp(item, "ulysses") ? &d.ulysses
                  : !strcmp(item, "ring") ? &d.ring : !strcmp(item, "dp") ? &d.dp
                  : !strcmp(item, "pp") ? &d.pp : NULL;
        if (!slot) sw_usage_error("--dims: unknown degree '%s'", item);
        *slot = (int)v;
    }
    return d;
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    me = sw_rank();
    world = sw_world_size();

    if (argc == 3 && strcmp(argv[1], "--dims") == 0) {
        sw_mesh_dims d = parse_dims(argv[2]);
        sw_mesh *m = sw_mesh_create(&d); /* exits 2 on every rank if d does not fit */
        if (me == 0) printf("mesh %s on %d ranks: ok\n", argv[2], world);
        sw_mesh_destroy(m);
        sw_shutdown();
        return 0;
    }

    if (me == 0) {
        int level = -1;
        MPI_Query_thread(&level);
        printf("# %d rank(s), MPI thread level %d (serialized %d, multiple %d)\n", world, level,
               MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE);
    }
    check_validation();

    /* every ordered factorisation world = tp * ulysses * ring * dp * pp */
    int nmesh = 0;
    for (int T = 1; T <= world; T++)
        for (int U = 1; T * U <= world; U++)
            for (int R = 1; T * U * R <= world; R++)
                for (int PP = 1; T * U * R * PP <= world; PP++) {
                    if (world % (T * U * R * PP)) continue;
                    sw_mesh_dims D = {T, U, R, world / (T * U * R * PP), PP};
                    sw_mesh *m = sw_mesh_create(&D);
                    check_mesh(&D, m);
                    sw_mesh_destroy(m);
                    nmesh++;
                }
    char what[64];
    snprintf(what, sizeof what, "%d factorisation(s) of %d checked", nmesh, world);
    check(what, nmesh > 0);

    /* NULL dims: pure data parallelism */
    sw_mesh *m = sw_mesh_create(NULL);
    check("NULL dims: dp = world size, tp group of one",
          sw_mesh_size(m, SW_GROUP_DP) == world && sw_mesh_rank(m, SW_GROUP_DP) == me &&
              sw_mesh_size(m, SW_GROUP_TP) == 1 && sw_mesh_rank(m, SW_GROUP_TP) == 0);
    check("out-of-range group", sw_mesh_rank(m, SW_GROUP_COUNT) == -1 && sw_mesh_size(m, SW_GROUP_COUNT) == -1 &&
                                    sw_mesh_comm(m, SW_GROUP_COUNT) == MPI_COMM_NULL);
    sw_mesh_destroy(m);
    sw_mesh_destroy(NULL);

    return tu_finish_all(); /* one verdict for every rank */
}
