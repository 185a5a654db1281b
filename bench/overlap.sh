#!/bin/sh
# The overlap test's times (tests/test_overlap, built by `make check`): a
# chain of GEMMs and an independent all-reduce on 2 ranks, alone and
# together, best of 3. On a node with fewer than 2 cores per rank it prints
# the times without asserting them (NOT ASSERTED line).
# usage: bench/overlap.sh [test_overlap args]   (run from the build directory or set BUILD)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
[ -x "$BUILD/tests/test_overlap" ] || { echo "overlap: build it first (make check, or make tests/test_overlap)" >&2; exit 2; }
. "$here/common.sh"
sh "$here/../tests/mpi_launch.sh" 2 "$BUILD/tests/test_overlap" "$@" 2>&1 | grep -E '^(round|PASS|FAIL|SKIP|NOT ASSERTED)' || true
