#!/bin/sh
# The GPU kit: everything the GPU build of starweave and its runs need beyond
# what a bare GPU machine has (SPEC.md, "The GPU machines available now and
# then": CUDA 13 with cuBLAS, PyTorch's NCCL, no package registry), packed
# into one ignored folder that travels with the working tree:
#   gpu-kit/starweave-gpu-kit.tar.gz   the kit (unpacked by autotools/gpu-run.sh)
#   gpu-kit/MANIFEST.txt               every file, its size and where it came from
#
# usage: autotools/gpu-kit.sh [--out DIR] [--build DIR] [--jobs N]
#        autotools/gpu-kit.sh --check [--out DIR]
#        autotools/gpu-kit.sh --rehearse ROOT [--out DIR]
#   (no option)  build StarPU with CUDA (autotools/build-starpu.sh --cuda, a
#                cache), starweave's GPU build (configure --enable-cuda
#                --disable-shared --with-gemm=openblas) in BUILD, and gather:
#                gpt_train, test_cuda, test_tp, test_nccl; the StarPU,
#                StarPU-MPI, Open MPI (mpirun, orted, plugins, help files),
#                PMIx, hwloc, FxT, OpenBLAS, libevent... libraries copied
#                from this (Debian bookworm) machine; env.sh, which points
#                PATH, LD_LIBRARY_PATH and Open MPI / PMIx / hwloc at the kit.
#                Not in the kit: glibc, libgcc_s and libstdc++ (the GPU
#                machine's: the kit needs glibc 2.36 or later, bookworm's,
#                for libevent; Ubuntu 24.04 has 2.39, 22.04's 2.35 is too
#                old; MANIFEST.txt says which) and the CUDA libraries
#                (cudart, cuBLAS, cusparse, nvJitLink, NCCL, the driver),
#                which gpu-run.sh finds on the GPU machine.
#   --check      unpack the kit into a temporary folder and run ldd over
#                every ELF file in it with LD_LIBRARY_PATH set to the kit
#                only: every library must come from the kit, from the base
#                system (glibc, libgcc_s, libstdc++) or be a CUDA library
#                (found, or "not found" where there is no CUDA); anything
#                else, or a kit over 48 MiB, fails. Exit 77 (SKIP) when the
#                kit is not built. Takes a few seconds.
#   --rehearse ROOT  (root) the rehearsal without a GPU: copy the working
#                tree as the GPU machine gets it (git ls-files: tracked and
#                untracked files that git does not ignore) and the kit into
#                ROOT/root/starweave, ROOT being a bare root that has none of
#                the kit's Debian packages, e.g. made by
#                  apt-get install -y debootstrap
#                  debootstrap --variant=minbase bookworm ROOT http://deb.debian.org/debian
#                  chroot ROOT apt-get install -y python3
#                with this machine's CUDA runtime libraries bound into
#                ROOT/usr/local/cuda/lib64 and its NCCL into a Python package
#                nvidia/nccl (PyTorch's layout) for the time of it; then,
#                chrooted there (/proc, /sys, /dev mounted for the
#                time of it): gpu-kit.sh --check and gpu-run.sh; the outputs
#                land in ROOT/root/gpu-run-out. The GPU items say SKIP.
#   --out DIR    the kit folder (default: gpu-kit in the source tree)
#   --build DIR  starweave's GPU build directory (default: build-gpukit in
#                the source tree; reconfigured when its options differ)
#   --jobs N     parallel make jobs (default 2)
#
# Then, on a GPU machine, from the repository root with gpu-kit carried:
#   sh autotools/gpu-run.sh OUTDIR
# Environment: SW_CUDA_DIR (default /usr/local/cuda), NVCC_ARCH (default
# sm_90 code and compute_90 PTX: H100/H200, PTX for later GPUs).
set -eu
me=gpu-kit
msg() { echo "$me: $*" >&2; }
die() { echo "$me: error: $*" >&2; exit 1; }
usage() { sed -n '2,52p' "$0" | sed 's/^# \{0,1\}//'; }

src=$(cd "$(dirname "$0")/.." && pwd)
out=$src/gpu-kit
build=$src/build-gpukit
jobs=2
mode=build
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || { usage >&2; exit 2; }; out=$2; shift ;;
    --build) [ $# -ge 2 ] || { usage >&2; exit 2; }; build=$2; shift ;;
    --jobs|-j) [ $# -ge 2 ] || { usage >&2; exit 2; }; jobs=$2; shift ;;
    --check) mode=check ;;
    --rehearse) [ $# -ge 2 ] || { usage >&2; exit 2; }; mode=rehearse; bare=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$me: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
case "$out" in /*) ;; *) out=$(pwd)/$out ;; esac
case "$build" in /*) ;; *) build=$(pwd)/$build ;; esac
tarball=$out/starweave-gpu-kit.tar.gz
limit_mib=48

# Libraries that the GPU machine brings: the base system's and CUDA's.
base_re='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libutil\.so\.1|libresolv\.so\.2|libgcc_s\.so\.1|libstdc\+\+\.so\.6)$'
cuda_re='^(libcuda\.so\.1|libcudart\.so\.[0-9]+|libcublas\.so\.[0-9]+|libcublasLt\.so\.[0-9]+|libcusparse\.so\.[0-9]+|libnvJitLink\.so\.[0-9]+|libnccl\.so\.[0-9]+|libnvidia-ml\.so\.1)$'

is_elf() { [ -f "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' \n')" = '177ELF' ]; }

# --- --check ------------------------------------------------------------------
# check_tree ROOT: ldd over every ELF under ROOT with the kit's library path
check_tree() {
  root=$1
  libpath="$root/lib:$root/lib/openmpi:$root/pmix/lib/pmix"
  nelf=0; nbad=0; ncuda_missing=0
  report=$(mktemp)
  for f in $(find "$root" -type f | sort); do
    is_elf "$f" || continue
    nelf=$((nelf + 1))
    LD_LIBRARY_PATH=$libpath ldd "$f" 2>&1 | while read -r name arrow path rest; do
      case "$name" in statically|*:) continue ;; esac
      [ "$arrow" = "=>" ] || { path=$name; name=$(basename "$name"); }
      rel=${f#"$root"/}
      if [ "$path" = "not" ]; then
        if echo "$name" | grep -Eq "$cuda_re"; then echo "cuda-missing $rel $name"; else echo "BAD $rel: $name not found"; fi
      else
        case "$path" in
          "$root"/*) echo "kit $rel $name" ;;
          *) if echo "$name" | grep -Eq "$base_re"; then echo "base $rel $name $path"
             elif echo "$name" | grep -Eq "$cuda_re"; then echo "cuda $rel $name $path"
             else echo "BAD $rel: $name => $path (outside the kit)"; fi ;;
        esac
      fi
    done >> "$report"
  done
  nbad=$(grep -c '^BAD' "$report" || true)
  nkit=$(grep -c '^kit' "$report" || true)
  grep '^BAD' "$report" | sed 's/^BAD /  /' >&2 || true
  echo "ldd: $nelf ELF files; $nkit references resolved in the kit;" \
    "base system: $(awk '$1 == "base" { print $3 }' "$report" | sort -u | tr '\n' ' ')"
  echo "ldd: CUDA libraries found: $(awk '$1 == "cuda" { print $3 " (" $4 ")" }' "$report" | sort -u | tr '\n' ' ')"
  echo "ldd: CUDA libraries not found (the GPU machine's): $(awk '$1 == "cuda-missing" { print $3 }' "$report" | sort -u | tr '\n' ' ')"
  echo "ldd: $nbad references neither in the kit nor the base system nor CUDA"
  rm -f "$report"
  [ "$nbad" = 0 ]
}

if [ "$mode" = check ]; then
  [ -f "$tarball" ] || { echo "SKIP: no GPU kit at $tarball (build it with autotools/gpu-kit.sh)"; exit 77; }
  size=$(du -sk "$out" | cut -f1)
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/$me-check.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  tar -xzf "$tarball" -C "$tmp"
  root=$tmp/starweave-gpu-kit
  [ -f "$root/env.sh" ] || die "$tarball has no starweave-gpu-kit/env.sh"
  ok=yes
  check_tree "$root" || ok=no
  unpacked=$(du -sk "$root" | cut -f1)
  echo "kit: $out is $((size / 1024)) MiB ($size KiB; limit $limit_mib MiB), $((unpacked / 1024)) MiB unpacked"
  [ "$size" -le $((limit_mib * 1024)) ] || { echo "FAIL: the kit is over $limit_mib MiB"; ok=no; }
  # the CPU side of the kit runs: gpt_train's help through the kit's libraries
  nf=$(SW_KIT=$root; . "$root/env.sh"; ldd "$root/build/examples/gpt_train" | awk '$3 == "not" { print $1 }' | tr '\n' ' ')
  if [ -n "$nf" ]; then
    echo "kit: build/examples/gpt_train --help not run: $nf not found here (gpu-run.sh looks for them on the GPU machine)"
  elif (SW_KIT=$root; . "$root/env.sh"; "$root/build/examples/gpt_train" --help > "$tmp/help.out" 2>&1); then
    echo "kit: build/examples/gpt_train --help runs with the kit's libraries"
  else
    echo "FAIL: build/examples/gpt_train --help: $(tail -n 3 "$tmp/help.out")"; ok=no
  fi
  if [ "$ok" = yes ]; then echo "PASS gpu-kit check"; exit 0; fi
  echo "FAIL gpu-kit check"; exit 1
fi

# --- --rehearse ---------------------------------------------------------------
if [ "$mode" = rehearse ]; then
  [ "$(id -u)" = 0 ] || die "--rehearse needs root (chroot, mount)"
  [ -x "$bare/bin/sh" ] && [ -x "$bare/usr/bin/ldd" ] || die "$bare is not a root file system (debootstrap one, see --help)"
  [ -f "$tarball" ] || die "no kit at $tarball: build it first"
  for p in libopenmpi3 libhwloc15 libopenblas0-pthread libfxt2 libpmix2 libevent-core-2.1-7 libgfortran5; do
    if chroot "$bare" dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed"; then
      die "$bare has the Debian package $p installed: a bare root must not"
    fi
  done
  dest=$bare/root/starweave
  rm -rf "$dest" "$bare/root/gpu-run-out"
  mkdir -p "$dest"
  (cd "$src" && git ls-files -z -co --exclude-standard | xargs -0 tar -cf - 2> /dev/null) | tar -xf - -C "$dest"
  cp -r "$out" "$dest/gpu-kit"
  mounted=""
  cleanup_mounts() { for m in $mounted; do umount "$m" 2> /dev/null || umount -l "$m"; done; }
  trap cleanup_mounts EXIT
  for m in proc sys dev; do
    mountpoint -q "$bare/$m" && continue
    case $m in
      proc) mount -t proc proc "$bare/proc" ;;
      sys) mount --rbind /sys "$bare/sys" && mount --make-rslave "$bare/sys" ;;
      dev) mount --rbind /dev "$bare/dev" && mount --make-rslave "$bare/dev" ;;
    esac
    mounted="$bare/$m $mounted"
  done
  # The GPU machine's CUDA: its runtime libraries in /usr/local/cuda/lib64
  # (this machine's files, bound read-only), NCCL only inside a Python
  # package as PyTorch's nvidia-nccl brings it (needs python3 in ROOT).
  chroot "$bare" sh -c 'command -v python3' > /dev/null \
    || die "$bare has no python3 (the GPU machine has Python 3.12): chroot $bare apt-get install -y python3"
  pysite=$(chroot "$bare" python3 -c 'import site; print(site.getsitepackages()[0])')
  mkdir -p "$bare/usr/local/cuda/lib64" "$bare$pysite/nvidia/nccl/lib"
  : > "$bare$pysite/nvidia/nccl/__init__.py"
  for name in $(sed -n '/^needs from the GPU machine/{n;p;}' "$out/MANIFEST.txt"); do
    f=$(ldconfig -p | awk -v n="$name" '$1 == n { print $NF; exit }')
    [ -n "$f" ] || f=$(ls "$cuda_dir"/lib64/"$name" 2> /dev/null || true)
    [ -n "$f" ] || die "$name not found on this machine (for the bare root)"
    case "$name" in libnccl*) t=$bare$pysite/nvidia/nccl/lib/$name ;; *) t=$bare/usr/local/cuda/lib64/$name ;; esac
    : > "$t"
    mount --bind -o ro "$(readlink -f "$f")" "$t"
    mounted="$t $mounted"
  done
  echo "== rehearsal in $bare ($(chroot "$bare" sh -c '. /etc/os-release; echo "$PRETTY_NAME"'); $(chroot "$bare" dpkg-query -W -f='${binary:Package}\n' | wc -l) Debian packages; python3: $(chroot "$bare" sh -c 'command -v python3 || echo none'))"
  rc=0
  chroot "$bare" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    sh -c 'cd /root/starweave && sh autotools/gpu-kit.sh --check; sh autotools/gpu-run.sh /root/gpu-run-out' || rc=$?
  echo "== outputs in $bare/root/gpu-run-out: $(ls "$bare/root/gpu-run-out" 2> /dev/null | tr '\n' ' ')"
  exit $rc
fi

# --- build ------------------------------------------------------------------
case "$jobs" in ''|*[!0-9]*) die "--jobs expects a number, got '$jobs'" ;; esac
command -v patchelf > /dev/null || die "patchelf is missing (Debian package patchelf)"
command -v dpkg-query > /dev/null || die "dpkg-query is missing: the kit is gathered from a Debian system"
cuda_dir=${SW_CUDA_DIR:-/usr/local/cuda}
start=$(date +%s)

msg "StarPU with CUDA (autotools/build-starpu.sh --cuda; cached)"
starpu=$(sh "$src/autotools/build-starpu.sh" --cuda --jobs "$jobs" | tail -n 1)
case "$starpu" in STARPU_PREFIX=/*) starpu=${starpu#STARPU_PREFIX=} ;; *) die "build-starpu.sh gave no prefix ($starpu)" ;; esac

arch=${NVCC_ARCH:-"-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"}
# LIBS=-lstdc++: the static libstarweave.a holds nvcc's objects, whose C++
# runtime references only a shared libstarweave records.
set -- --enable-cuda --with-cuda="$cuda_dir" --with-starpu="$starpu" --with-gemm=openblas \
  --disable-shared "NVCC_ARCH=$arch" "LIBS=-lstdc++"
opts="$*"
[ -x "$src/configure" ] || (cd "$src" && autoreconf -fi) || die "autoreconf failed"
mkdir -p "$build"
if [ ! -f "$build/Makefile" ] || [ "$(cat "$build/.gpukit-options" 2>/dev/null)" != "$opts" ]; then
  msg "configure $opts (in $build)"
  (cd "$build" && "$src/configure" "$@" > "$build/gpukit-configure.log" 2>&1) \
    || die "configure failed, see $build/gpukit-configure.log and $build/config.log"
  echo "$opts" > "$build/.gpukit-options"
fi
progs="examples/gpt_train tests/test_cuda tests/test_tp tests/test_nccl"
msg "make -j$jobs $progs"
(cd "$build" && make -j"$jobs" $progs > "$build/gpukit-make.log" 2>&1) \
  || { tail -n 20 "$build/gpukit-make.log" >&2; die "make failed, see $build/gpukit-make.log"; }

stage=$build/gpu-kit-stage
rm -rf "$stage"
root=$stage/starweave-gpu-kit
mkdir -p "$root/bin" "$root/lib/openmpi" "$root/lib/hwloc" "$root/pmix/lib/pmix" "$root/pmix/share/pmix" \
  "$root/share/openmpi" "$root/etc" "$root/build/examples" "$root/build/tests"
manifest=$stage/sources
: > "$manifest"
note() { # note KITPATH SOURCE
  pkg=$(dpkg-query -S "$2" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
  [ -n "$pkg" ] || pkg=$(dpkg-query -S "$(readlink -f "$2")" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
  [ -n "$pkg" ] && pkg="$pkg $(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null)"
  echo "$1	$2	${pkg:-not from a Debian package}" >> "$manifest"
}

# starweave's programs (real ELF files: --disable-shared leaves no libtool wrappers)
for p in $progs; do
  is_elf "$build/$p" || die "$build/$p is not an ELF program (a libtool wrapper?)"
  cp "$build/$p" "$root/build/$p"
  strip --strip-debug "$root/build/$p"
  note "build/$p" "$build/$p"
done

# the build's config.h: bench/calibrate.sh (gpu-run.sh's calibrate_cuda)
# takes a folder with one for a build
cp "$build/config.h" "$root/build/config.h"
note build/config.h "$build/config.h"

# Open MPI: mpirun (orterun), orted, ompi_info; the plugins that need no
# network stack the GPU machine lacks (UCX, libfabric, verbs, PSM) and no
# OpenSHMEM; help files; Debian's MCA defaults.
mpirun=$(readlink -f "$(command -v mpirun)") || die "mpirun not found (openmpi-bin)"
ompi_bindir=$(dirname "$mpirun")
for b in mpirun orted ompi_info; do
  f=$(readlink -f "$ompi_bindir/$b" 2>/dev/null || true)
  [ -n "$f" ] && [ -x "$f" ] || die "$ompi_bindir/$b not found"
  cp "$f" "$root/bin/$b"; note "bin/$b" "$f"
done
libmpi=$(ldd "$root/build/examples/gpt_train" | awk '$1 == "libmpi.so.40" { print $3 }')
[ -n "$libmpi" ] || die "gpt_train links no libmpi.so.40"
ompi_libdir=$(dirname "$(readlink -f "$libmpi")")
plugdir=""
for d in "$ompi_libdir/openmpi/lib/openmpi3" "$ompi_libdir/openmpi3" "$ompi_libdir/openmpi"; do
  [ -f "$d/mca_btl_vader.so" ] && { plugdir=$d; break; }
done
[ -n "$plugdir" ] || die "no Open MPI plugin folder (mca_btl_vader.so) near $ompi_libdir"
skip_re='lib(ucp|ucs|uct|ucm|fabric|ibverbs|psm|psm2|psm_infinipath|infinipath|oshmem|rdmacm|efa)\.'
nplug=0; nskip=0
for f in "$plugdir"/mca_*.so; do
  if ldd "$f" | grep -Eq "$skip_re"; then nskip=$((nskip + 1)); continue; fi
  cp "$f" "$root/lib/openmpi/"; note "lib/openmpi/$(basename "$f")" "$f"; nplug=$((nplug + 1))
done
msg "Open MPI: $nplug plugins from $plugdir ($nskip left out: UCX, libfabric, verbs, PSM, OpenSHMEM)"
ompi_data=/usr/share/openmpi
[ -d "$ompi_data" ] || die "$ompi_data (Open MPI's help files) not found"
cp "$ompi_data"/help-*.txt "$root/share/openmpi/"
note "share/openmpi/help-*.txt" "$ompi_data/help-mpi-runtime.txt"
if [ -f /etc/openmpi/openmpi-mca-params.conf ]; then
  cp /etc/openmpi/openmpi-mca-params.conf "$root/etc/"
  note "etc/openmpi-mca-params.conf" /etc/openmpi/openmpi-mca-params.conf
fi
: > "$root/etc/openmpi-default-hostfile"
libpmix=$(ldd "$root/lib/openmpi/mca_pmix_ext3x.so" 2>/dev/null | awk '$1 == "libpmix.so.2" { print $3 }')
if [ -n "$libpmix" ]; then
  pmixdir=$(dirname "$(readlink -f "$libpmix")")/pmix2
  if [ -d "$pmixdir/lib/pmix" ]; then
    for f in "$pmixdir"/lib/pmix/*.so; do cp "$f" "$root/pmix/lib/pmix/"; note "pmix/lib/pmix/$(basename "$f")" "$f"; done
  fi
  [ -d "$pmixdir/share/pmix" ] && cp "$pmixdir"/share/pmix/* "$root/pmix/share/pmix/" && note "pmix/share/pmix/*" "$pmixdir/share/pmix/help-cli.txt"
fi

# Every library the ELF files above need, except the base system's and CUDA's
# (ldd gives the whole closure), with the StarPU prefix first in the path.
nlib=0
for f in $(find "$root" -type f | sort); do
  is_elf "$f" || continue
  LD_LIBRARY_PATH=$starpu/lib ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  echo "$name" | grep -Eq "$base_re" && continue
  echo "$name" | grep -Eq "$cuda_re" && continue
  case "$path" in "$cuda_dir"/*|/usr/local/cuda*) continue ;; esac
  [ -f "$root/lib/$name" ] && continue
  cp -L "$path" "$root/lib/$name"
  note "lib/$name" "$path"
done
[ -f "$root/lib/libstarpu-1.3.so.9" ] || die "libstarpu-1.3.so.9 was not gathered"
[ -f "$root/lib/libopenblas.so.0" ] || die "libopenblas.so.0 was not gathered"
strip --strip-debug "$root"/lib/libstarpu*.so*
# Run paths: nothing points at this machine's folders (the StarPU prefix);
# CUDA's default folder stays as a fallback behind LD_LIBRARY_PATH.
for f in "$root"/build/examples/* "$root"/build/tests/*; do
  patchelf --set-rpath "\$ORIGIN/../../lib:$cuda_dir/lib64" "$f"
done
for f in "$root"/lib/*.so*; do
  if [ -n "$(patchelf --print-rpath "$f" 2>/dev/null)" ]; then patchelf --set-rpath "\$ORIGIN:$cuda_dir/lib64" "$f"; fi
done
for f in "$root"/lib/openmpi/*.so "$root"/bin/*; do
  if [ -n "$(patchelf --print-rpath "$f" 2>/dev/null)" ]; then patchelf --set-rpath "\$ORIGIN/../lib" "$f"; fi
done

cat > "$root/env.sh" << 'EOF'
# Sourced with SW_KIT set to this folder: the kit's programs and libraries
# before the system's, Open MPI, PMIx and hwloc relocated into the kit.
# SW_CUDA_LIBPATH (optional): folders of the GPU machine's CUDA libraries.
: "${SW_KIT:?set SW_KIT to the unpacked kit before sourcing env.sh}"
PATH="$SW_KIT/bin:$PATH"
LD_LIBRARY_PATH="$SW_KIT/lib${SW_CUDA_LIBPATH:+:$SW_CUDA_LIBPATH}"
OPAL_PREFIX=$SW_KIT OPAL_EXEC_PREFIX=$SW_KIT OPAL_BINDIR=$SW_KIT/bin OPAL_LIBDIR=$SW_KIT/lib
OPAL_DATAROOTDIR=$SW_KIT/share OPAL_DATADIR=$SW_KIT/share OPAL_PKGDATADIR=$SW_KIT/share/openmpi
OPAL_SYSCONFDIR=$SW_KIT/etc OPAL_PKGLIBDIR=$SW_KIT/lib/openmpi
OMPI_MCA_mca_base_component_path=$SW_KIT/lib/openmpi
OMPI_MCA_orte_default_hostfile=$SW_KIT/etc/openmpi-default-hostfile
# one node: launch locally, without the rsh/ssh agent a bare machine lacks
# (the rsh launcher fails at start-up when it finds neither)
OMPI_MCA_plm=isolated
# containers often forbid the cross-memory attach (ptrace) that vader's
# single copy uses: copy through the shared segment instead
OMPI_MCA_btl_vader_single_copy_mechanism=none
PMIX_INSTALL_PREFIX=$SW_KIT/pmix PMIX_PREFIX=$SW_KIT/pmix
PMIX_MCA_mca_base_component_path=$SW_KIT/pmix/lib/pmix
HWLOC_PLUGINS_PATH=$SW_KIT/lib/hwloc
export PATH LD_LIBRARY_PATH OPAL_PREFIX OPAL_EXEC_PREFIX OPAL_BINDIR OPAL_LIBDIR OPAL_DATAROOTDIR \
  OPAL_DATADIR OPAL_PKGDATADIR OPAL_SYSCONFDIR OPAL_PKGLIBDIR OMPI_MCA_mca_base_component_path \
  OMPI_MCA_orte_default_hostfile OMPI_MCA_plm OMPI_MCA_btl_vader_single_copy_mechanism PMIX_INSTALL_PREFIX \
  PMIX_PREFIX PMIX_MCA_mca_base_component_path HWLOC_PLUGINS_PATH
if [ "$(id -u)" = 0 ]; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
EOF

# glibc: the newest symbol version the kit's files ask for
glibc_need=$(find "$root" -type f | while read -r f; do is_elf "$f" && objdump -T "$f" 2>/dev/null; done \
  | grep -o 'GLIBC_[0-9.]*' | sort -u -V | tail -n 1)
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo " (with uncommitted changes)" || true)
{
  echo "starweave GPU kit, built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -n 1)"
  echo "starweave: commit $commit$dirty; configure $opts"
  echo "StarPU: $starpu ($(sed -n 's/^options: //p' "$starpu/.complete"))"
  echo "CUDA used to build: $("$cuda_dir/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p') ($cuda_dir)"
  echo "needs from the GPU machine: glibc with $glibc_need, libgcc_s, libstdc++, and the CUDA libraries:"
  echo "  $(for f in "$root"/build/*/* "$root"/lib/*.so*; do LD_LIBRARY_PATH=$root/lib ldd "$f"; done | awk '{ print $1 }' | grep -E "$cuda_re" | sort -u | tr '\n' ' ')"
  echo
  echo "size  file  source  Debian package"
  find "$root" -type f | sort | while read -r f; do
    rel=${f#"$root"/}
    s=$(grep -F "$rel	" "$manifest" | head -n 1 | cut -f2-)
    printf '%8d  %s  %s\n' "$(wc -c < "$f")" "$rel" "${s:-written by gpu-kit.sh}"
  done
} > "$root/MANIFEST.txt"

msg "packing"
rm -rf "$out.new"
mkdir -p "$out.new"
tar -czf "$out.new/starweave-gpu-kit.tar.gz" -C "$stage" starweave-gpu-kit
cp "$root/MANIFEST.txt" "$out.new/MANIFEST.txt"
rm -rf "$out"
mv "$out.new" "$out"
size=$(du -sk "$out" | cut -f1)
unpacked=$(du -sk "$root" | cut -f1)
end=$(date +%s)
echo "gpu-kit: $out: $((size / 1024)) MiB ($size KiB; limit $limit_mib MiB), $((unpacked / 1024)) MiB unpacked, in $((end - start)) s"
echo "gpu-kit: largest files (unpacked KiB):"
find "$root" -type f -exec du -k {} + | sort -rn | head -n 6 | sed "s|$root/|  |"
[ "$size" -le $((limit_mib * 1024)) ] || die "the kit is over $limit_mib MiB"
echo "gpu-kit: next: autotools/gpu-kit.sh --check; on a GPU machine: sh autotools/gpu-run.sh OUTDIR (gpu-kit carried)"
