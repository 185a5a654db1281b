#!/bin/sh
# Build StarPU 1.3 from Debian's source package with FxT traces and StarPU-MPI
# (Open MPI), and with CUDA when nvcc is present, into a prefix; or, with
# --simgrid, StarPU for SimGrid simulation (StarPU-MPI on SimGrid's SMPI,
# static archives only); then
#   ./configure --with-starpu=PREFIX
# builds starweave against it (a SimGrid prefix: the simulation build, see
# docs/simulation.md).
#
# usage: autotools/build-starpu.sh [--prefix DIR] [--cuda|--no-cuda|--simgrid] [--jobs N]
#   --prefix DIR  install there (default: a cache directory keyed by StarPU's
#                 version and the options, see below)
#   --cuda        build the CUDA driver (fails if nvcc is missing)
#   --no-cuda     do not build the CUDA driver
#                 (default: CUDA when $SW_CUDA_DIR/bin/nvcc exists)
#   --simgrid     StarPU for simulation: --enable-simgrid with StarPU-MPI on
#                 SMPI (libsimgrid-dev); --disable-shared, since StarPU
#                 refuses MPI with SimGrid in shared libraries; no FxT, no
#                 CUDA driver
#   --jobs N      parallel make jobs (default: nproc)
#
# Default prefix:
#   ${SW_STARPU_CACHE:-$HOME/.cache/starweave}/starpu-<version>-fxt[-cuda<ver>]
#   ${SW_STARPU_CACHE:-$HOME/.cache/starweave}/starpu-<version>-simgrid  (--simgrid)
# <version> is the Debian version of the starpu source (epoch dropped), <ver>
# the CUDA toolkit release. PREFIX/.complete is written only after a
# successful install; when it is there with the same options, the script
# reuses the prefix and exits at once (the cache). The last line of stdout is
#   STARPU_PREFIX=<dir>
# e.g. eval "$(autotools/build-starpu.sh | tail -n 1)"
#
# Environment: SW_STARPU_CACHE (cache root), SW_CUDA_DIR (default
# /usr/local/cuda), SW_STARPU_VERSION (Debian version of the source package to
# build; default: apt's candidate version of libstarpu-dev, else the
# installed one).
# Debian packages are installed with apt-get when run as root (deb-src is
# enabled if needed); otherwise the commands are printed and the script stops.
set -eu

# Bump when the configure options or the patches below change: a cached
# default prefix built by another revision is rebuilt.
build_rev=1

me=build-starpu
msg() { echo "$me: $*" >&2; }
die() { echo "$me: error: $*" >&2; exit 1; }
usage() { sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; }

prefix=""
cuda=auto
simgrid=no
jobs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) [ $# -ge 2 ] || { usage >&2; exit 2; }; prefix=$2; shift ;;
    --prefix=*) prefix=${1#--prefix=} ;;
    --cuda) cuda=yes ;;
    --no-cuda) cuda=no ;;
    --simgrid) simgrid=yes ;;
    --jobs|-j) [ $# -ge 2 ] || { usage >&2; exit 2; }; jobs=$2; shift ;;
    --jobs=*) jobs=${1#--jobs=} ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$me: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
[ -n "$jobs" ] || jobs=$(nproc 2>/dev/null || echo 2)
case "$jobs" in ''|*[!0-9]*) die "--jobs expects a number, got '$jobs'" ;; esac

is_root=no
[ "$(id -u)" = 0 ] && is_root=yes
apt_updated=no
apt_update() {
  [ "$apt_updated" = yes ] && return 0
  msg "apt-get update"
  apt-get update >&2
  apt_updated=yes
}

# --- options: CUDA ----------------------------------------------------------
cuda_dir=${SW_CUDA_DIR:-/usr/local/cuda}
nvcc="$cuda_dir/bin/nvcc"
if [ "$simgrid" = yes ]; then
  # the simulation runs the CPU codelets' calibrated models; a simulated GPU
  # would need StarPU's CUDA driver models, not built here
  [ "$cuda" = yes ] && die "--simgrid and --cuda do not go together"
  cuda=no
fi
if [ "$cuda" = auto ]; then
  if [ -x "$nvcc" ]; then cuda=yes; else cuda=no; fi
fi
cuda_ver=""
if [ "$cuda" = yes ]; then
  [ -x "$nvcc" ] || die "--cuda given but $nvcc was not found (set SW_CUDA_DIR)"
  cuda_ver=$("$nvcc" --version | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p')
  [ -n "$cuda_ver" ] || die "cannot read the CUDA release from '$nvcc --version'"
fi

# --- StarPU version (from apt, needs no deb-src) ----------------------------
candidate() {
  apt-cache policy libstarpu-dev 2>/dev/null | sed -n 's/^ *Candidate: *//p'
}
debver=${SW_STARPU_VERSION:-}
if [ -z "$debver" ]; then
  debver=$(candidate)
  if [ -z "$debver" ] || [ "$debver" = "(none)" ]; then
    # no apt lists (e.g. a container image): the installed Debian StarPU
    debver=$(dpkg-query -W -f='${Version}' libstarpu-dev 2>/dev/null || true)
  fi
  if [ -z "$debver" ] || [ "$debver" = "(none)" ]; then
    if [ "$is_root" = yes ]; then
      apt_update
      debver=$(candidate)
    fi
  fi
  if [ -z "$debver" ] || [ "$debver" = "(none)" ]; then
    [ "$is_root" = yes ] || die "apt knows no libstarpu-dev; run as root: apt-get update (or set SW_STARPU_VERSION)"
    die "apt knows no libstarpu-dev (a Debian bookworm or later source is needed)"
  fi
fi
version=${debver#*:}

key="starpu-$version-fxt"
[ "$cuda" = yes ] && key="$key-cuda$cuda_ver"
[ "$simgrid" = yes ] && key="starpu-$version-simgrid"
default_prefix=no
if [ -z "$prefix" ]; then
  prefix="${SW_STARPU_CACHE:-${HOME:?HOME is not set}/.cache/starweave}/$key"
  default_prefix=yes
fi
case "$prefix" in /*) ;; *) prefix="$(pwd)/$prefix" ;; esac
options="rev=$build_rev starpu=$version fxt=yes mpi=openmpi cuda=${cuda_ver:-no}"
# the simulation's patch (a node's cores shared by its ranks' workers),
# named in the options by its checksum: a changed patch rebuilds the prefix
sim_patch="$(cd "$(dirname "$0")" && pwd)/starpu-simgrid-cores.patch"
# The simulation's memory nodes: main RAM only (no CUDA in this build).
# StarPU sizes every data handle by its maximum: per memory node a replica
# holding a request slot per memory node, so a handle grows with its
# square. SimGrid builds default to 32 (room for simulated GPUs): some 10
# KiB a handle, half the host memory a big simulation holds
# (docs/simulation.md, "What holds the simulation's host memory"); 4 leaves
# room.
sim_maxnodes=4
if [ "$simgrid" = yes ]; then
  [ -f "$sim_patch" ] || die "$sim_patch is missing"
  options="rev=$build_rev starpu=$version simgrid=yes mpi=smpi static maxnodes=$sim_maxnodes patch=$(cksum < "$sim_patch" | cut -d' ' -f1)"
fi

# --- the cache --------------------------------------------------------------
if [ -f "$prefix/.complete" ]; then
  if grep -qxF "options: $options" "$prefix/.complete"; then
    msg "reusing $prefix ($options)"
    echo "STARPU_PREFIX=$prefix"
    exit 0
  fi
  if [ "$default_prefix" = yes ]; then
    msg "$prefix was built with other options ($(sed -n 's/^options: //p' "$prefix/.complete")); rebuilding it"
    rm -rf "$prefix"
  else
    die "$prefix holds a StarPU built with other options ($(sed -n 's/^options: //p' "$prefix/.complete")); want: $options. Remove it or choose another --prefix."
  fi
fi

# --- Debian packages and deb-src --------------------------------------------
pkgs="build-essential dpkg-dev xz-utils pkg-config libfxt-dev libhwloc-dev libopenmpi-dev openmpi-bin"
# SimGrid (its SMPI is StarPU-MPI's MPI there); StarPU's SimGrid configure
# also wants GLPK and libudev, starpu_smpirun runs xsltproc, and the
# simulation's patch wants patch
[ "$simgrid" = yes ] && pkgs="$pkgs libsimgrid-dev libglpk-dev libudev-dev xsltproc patch"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
have_src() { apt-cache showsrc starpu 2>/dev/null | grep -q '^Package: starpu$'; }
need_src=no
have_src || need_src=yes

if [ -n "$missing" ] || [ "$need_src" = yes ]; then
  if [ "$is_root" = no ]; then
    msg "run as root first (or run this script as root):"
    [ "$need_src" = yes ] && msg "  enable deb-src in /etc/apt/sources.list.d/debian.sources (Types: deb deb-src) or /etc/apt/sources.list"
    msg "  apt-get update && apt-get install -y --no-install-recommends$missing"
    exit 1
  fi
  if [ "$need_src" = yes ]; then
    srcs=/etc/apt/sources.list.d/debian.sources
    if [ -f "$srcs" ] && grep -q '^Types:' "$srcs"; then
      msg "enabling deb-src in $srcs"
      sed -i '/^Types:/{/deb-src/!s/$/ deb-src/}' "$srcs"
    elif [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list; then
      msg "adding deb-src lines to /etc/apt/sources.list"
      sed -n 's/^deb \(.*\)/deb-src \1/p' /etc/apt/sources.list > /tmp/$me-debsrc.$$
      cat /tmp/$me-debsrc.$$ >> /etc/apt/sources.list
      rm -f /tmp/$me-debsrc.$$
    else
      die "cannot find an apt source to enable deb-src in"
    fi
    apt_updated=no
    apt_update
    have_src || die "apt still knows no source package 'starpu' after enabling deb-src"
  fi
  if [ -n "$missing" ]; then
    apt_update
    msg "installing:$missing"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing >&2
  fi
fi

# --- fetch and unpack the source --------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/$me.XXXXXX")
ok=no
cleanup() {
  if [ "$ok" = yes ]; then rm -rf "$tmp"; else msg "build tree kept in $tmp"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

if [ "$simgrid" = yes ]; then
  msg "building StarPU $version (SimGrid, StarPU-MPI on SMPI, static) into $prefix"
else
  msg "building StarPU $version (FxT, StarPU-MPI, CUDA: ${cuda_ver:-no}) into $prefix"
fi
start=$(date +%s)
cd "$tmp"
# Debian's own patches are applied by dpkg-source (they only touch examples,
# which are not built here, so no autoreconf is needed).
apt-get source "starpu=$debver" >&2 || die "apt-get source starpu=$debver failed"
src=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'starpu-*' | head -n 1)
[ -n "$src" ] && [ -x "$src/configure" ] || die "no unpacked starpu source tree in $tmp"
cd "$src"

# --- CUDA 13 fixes ----------------------------------------------------------
# subst FILE SED-SCRIPT PATTERN: fail if PATTERN (grep -E) is not in FILE,
# apply the sed script, fail if PATTERN is still there.
subst() {
  grep -Eq "$3" "$1" || die "CUDA 13 fix: '$3' not found in $1 (StarPU source changed?)"
  sed -i "$2" "$1"
  if grep -Eq "$3" "$1"; then die "CUDA 13 fix: '$3' still in $1 after patching"; fi
  msg "patched $1 ($3)"
}
if [ "$cuda" = yes ]; then
  # cudaDeviceProp.computeMode is gone in CUDA 13: ask the attribute instead
  # (the comparison stays inside STARPU_HAVE_CUDA_MEMCPY_PEER).
  subst src/drivers/cuda/driver_cuda.c \
    's/if (props\[devid\]\.computeMode == cudaComputeModeExclusive)/int computemode = 0;\n\tcudaDeviceGetAttribute(\&computemode, cudaDevAttrComputeMode, devid);\n\tif (computemode == cudaComputeModeExclusive)/' \
    'props\[devid\]\.computeMode'
  # cublas.h (legacy API) and cublas_v2.h may not be included together any
  # more. driver_cuda.h only needs the CUBLAS_STATUS_* values; starpu_cublas.c
  # keeps the v2 handles and drops the legacy init/shutdown/kernel stream.
  subst src/drivers/cuda/driver_cuda.h \
    's/^#include <cublas\.h>$/#include <cublas_v2.h>/' \
    '^#include <cublas\.h>$'
  subst src/drivers/cuda/starpu_cublas.c \
    '/^#include <cublas\.h>$/d' \
    '^#include <cublas\.h>$'
  subst src/drivers/cuda/starpu_cublas.c \
    's/cublasStatus cublasst = cublasInit();/cublasStatus_t cublasst = CUBLAS_STATUS_SUCCESS; \/* CUDA 13: legacy cublas init dropped *\//' \
    'cublasInit\(\)'
  subst src/drivers/cuda/starpu_cublas.c \
    's/^\([[:space:]]*\)cublasShutdown();/\1; \/* CUDA 13: legacy cublas shutdown dropped *\//' \
    'cublasShutdown\(\)'
  subst src/drivers/cuda/starpu_cublas.c \
    's/cublasSetKernelStream(starpu_cuda_get_local_stream());/cublasSetStream(starpu_cublas_get_local_handle(), starpu_cuda_get_local_stream());/' \
    'cublasSetKernelStream'
fi

# --- the simulation's patch -------------------------------------------------
# A platform may give a node's cores to its ranks' workers to share (host
# property starweave_cores, written by bench/sim-platform.sh --cores;
# docs/simulation.md, "Ranks sharing a node's cores").
if [ "$simgrid" = yes ]; then
  patch -p1 < "$sim_patch" >&2 || die "$sim_patch does not apply to StarPU $version"
  msg "patched with $sim_patch"
fi

# --- configure, build, install ----------------------------------------------
# --disable-static: shared libraries only (halves the compile, smaller cache).
# maxcpus: StarPU's default is the build machine's core count rounded up to a
# power of two; a cached prefix may serve bigger machines.
if [ "$simgrid" = yes ]; then
  # StarPU refuses MPI with SimGrid in shared libraries: static archives
  # only; programs are linked by SimGrid's smpicc against them
  set -- --prefix="$prefix" \
    --enable-simgrid --enable-mpi --disable-shared --enable-static \
    --enable-maxcpus=64 --enable-maxnodes=$sim_maxnodes
else
  set -- --prefix="$prefix" --with-fxt --enable-maxcpus=64 --disable-static
fi
set -- "$@" \
  --disable-opencl --disable-socl --disable-starpufft --disable-starpurm \
  --disable-fortran --disable-openmp --disable-hdf5 \
  --disable-build-doc --disable-build-examples --disable-build-tests
if [ "$cuda" = yes ]; then
  set -- "$@" --enable-cuda --with-cuda-dir="$cuda_dir"
else
  set -- "$@" --disable-cuda
fi
msg "configure $*"
./configure "$@" || die "StarPU's configure failed (see $src/config.log)"

# fail clearly when a wanted feature silently dropped out
want() {
  grep -q "^#define $1 1" include/starpu_config.h || die "StarPU configured without $1 ($2); see $src/config.log"
}
if [ "$simgrid" = yes ]; then
  want STARPU_SIMGRID "SimGrid: libsimgrid-dev"
  want STARPU_USE_MPI "StarPU-MPI on SMPI: libsimgrid-dev"
  grep -q "^#define STARPU_MAXNODES $sim_maxnodes\$" include/starpu_config.h ||
    die "StarPU configured with $(grep '^#define STARPU_MAXNODES' include/starpu_config.h) memory nodes, not --enable-maxnodes=$sim_maxnodes"
else
  want STARPU_USE_FXT "FxT: libfxt-dev"
  want STARPU_USE_MPI "StarPU-MPI: libopenmpi-dev"
fi
if [ "$cuda" = yes ]; then
  want STARPU_USE_CUDA "CUDA: $cuda_dir"
elif grep -q '^#define STARPU_USE_CUDA 1' include/starpu_config.h; then
  die "StarPU configured with CUDA although --no-cuda was asked"
fi

make -j"$jobs" || die "StarPU's build failed"
mkdir -p "$prefix"
make install || die "StarPU's install into $prefix failed"
if [ "$simgrid" = yes ]; then
  [ -x "$prefix/bin/starpu_smpirun" ] || die "$prefix/bin/starpu_smpirun was not installed"
  [ -f "$prefix/lib/libstarpumpi-1.3.a" ] || die "$prefix/lib/libstarpumpi-1.3.a was not installed"
else
  [ -x "$prefix/bin/starpu_fxt_tool" ] || die "$prefix/bin/starpu_fxt_tool was not installed"
fi
if [ "$cuda" = yes ]; then
  # starpu.h includes cusparse.h, whose deprecation warnings break users'
  # -Werror builds: hand the CUDA headers out as system headers.
  pcdir="$prefix/lib/pkgconfig"
  grep -q -- "-I$cuda_dir/include" "$pcdir/starpu-1.3.pc" \
    || die "no -I$cuda_dir/include in $pcdir/starpu-1.3.pc"
  sed -i "s|-I$cuda_dir/include|-isystem $cuda_dir/include|g" "$pcdir"/*.pc
  msg "$pcdir: CUDA headers as -isystem $cuda_dir/include"
fi

end=$(date +%s)
{
  echo "options: $options"
  echo "debian-source: starpu $debver"
  echo "configure: $*"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((end - start)) s on $(uname -srm)"
} > "$prefix/.complete"
ok=yes
msg "done in $((end - start)) s: configure starweave with --with-starpu=$prefix"
echo "STARPU_PREFIX=$prefix"
