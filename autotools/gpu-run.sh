#!/bin/sh
# The whole GPU check in one command, on a GPU machine that has CUDA 13
# (cuBLAS; NCCL in the system or in PyTorch's nvidia-nccl Python package)
# and none of starweave's other dependencies: run from the repository root
# with the kit (autotools/gpu-kit.sh) carried in gpu-kit/.
#
# usage: sh autotools/gpu-run.sh [--kit DIR] [--budget SECONDS] OUTDIR
#   --kit DIR         the kit folder (default: gpu-kit in the source tree)
#   --budget SECONDS  wall-clock budget of the whole run (default 450); each
#                     item gets its own limit, cut to what is left
# It unpacks the kit into a temporary folder, finds the CUDA libraries the
# kit needs (CUDA's folders, then PyTorch's nvidia-* Python packages: NCCL
# from nvidia-nccl), prints what it found, then runs, in this order, each
# under `timeout` with one PASS / FAIL / SKIP line, whatever failed before:
#   nvidia-smi       the GPUs
#   kit_cpu          gpt_train from the kit on 2 MPI ranks (tp 2 + sp) on
#                    CPU workers: the kit's MPI, StarPU and BLAS work
#   test_cuda        every codelet on a CUDA worker against the CPU
#   test_gpt_cuda    tests/test_gpt_cuda.sh: training on the GPU against the
#                    CPU, offload to pinned RAM under a GPU budget
#   test_nccl        tests/test_nccl.sh (2 ranks need 2 GPUs: it says SKIP
#                    with the reason on one GPU)
#   calibrate_cuda   bench/calibrate.sh of W124 on the GPU: the CUDA
#                    codelets' models for the simulation, in
#                    OUTDIR/calibration (host gpu-<GPU name>)
#   bench_w124       bench/gpu.sh 10 w124: fp32, bf16, offload, CPU
#   bench_gpt2       bench/gpu.sh 5 gpt2: GPT-2 124M, batch 16 x seq 1024,
#                    fp32 and bf16 (ms/step, tokens/s, MFU, GEMM share)
#   trace_bf16       a traced bf16 W124 run on the GPU, its step 2 drawn as
#                    a Gantt chart (gnuplot through bench/plot_trace.py when
#                    present, else autotools/gantt-png.py, Python's standard
#                    library only); without a GPU a small CPU run is traced
#                    instead, so that the drawing is rehearsed
# Without a GPU the GPU items say SKIP (the tests themselves, or for want of
# a device). OUTDIR receives summary.txt (the lines above, what was found,
# the benchmark lines), logs.tar.gz (every log, ldd of every ELF file of the
# kit, the trace), gantt-bf16.png and, with a GPU, calibration/. Exit status: 0 when
# nothing failed, 1 otherwise.
set -u
me=gpu-run
usage() { sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; }
repo=$(cd "$(dirname "$0")/.." && pwd)
kit=$repo/gpu-kit
budget=450
outdir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kit) [ $# -ge 2 ] || { usage >&2; exit 2; }; kit=$2; shift ;;
    --budget) [ $# -ge 2 ] || { usage >&2; exit 2; }; budget=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "$me: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    *) [ -z "$outdir" ] || { usage >&2; exit 2; }; outdir=$1 ;;
  esac
  shift
done
[ -n "$outdir" ] || { usage >&2; exit 2; }
case "$budget" in ''|*[!0-9]*) echo "$me: --budget expects seconds" >&2; exit 2 ;; esac
mkdir -p "$outdir" || exit 2
outdir=$(cd "$outdir" && pwd)
t0=$(date +%s)
deadline=$((t0 + budget))
work=$(mktemp -d "${TMPDIR:-/tmp}/sw-gpurun.XXXXXX")
logs=$work/logs
mkdir -p "$logs"
summary=$logs/summary.txt
say() { echo "$*" | tee -a "$summary"; }
nfail=0

finish() {
  say "== done in $(($(date +%s) - t0)) s: $(grep -c '^PASS' "$summary") passed, $nfail failed, $(grep -c '^SKIP' "$summary") skipped"
  cp "$summary" "$outdir/summary.txt"
  # every log in one tarball (under 16 MiB: the trace goes first if it must)
  tar -czf "$outdir/logs.tar.gz" -C "$work" logs 2> /dev/null
  if [ "$(wc -c < "$outdir/logs.tar.gz")" -gt 15000000 ]; then
    rm -f "$logs"/*.json
    tar -czf "$outdir/logs.tar.gz" -C "$work" logs 2> /dev/null
  fi
  rm -rf "$work"
  [ "$nfail" = 0 ]
  exit $?
}

say "== starweave GPU run, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$repo" rev-parse --short HEAD 2> /dev/null || echo "unknown (no git)"), budget $budget s"
tarball=$kit/starweave-gpu-kit.tar.gz
if [ ! -f "$tarball" ]; then
  say "FAIL kit: no $tarball (build it with autotools/gpu-kit.sh and carry gpu-kit)"
  nfail=1; finish
fi
tar -xzf "$tarball" -C "$work" || { say "FAIL kit: cannot unpack $tarball"; nfail=1; finish; }
SW_KIT=$work/starweave-gpu-kit
[ -f "$kit/MANIFEST.txt" ] && cp "$kit/MANIFEST.txt" "$logs/"

# --- the machine and its CUDA libraries --------------------------------------
is_elf() { [ -f "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' \n')" = '177ELF' ]; }
elfs() { find "$SW_KIT" -type f | sort | while read -r f; do is_elf "$f" && echo "$f"; done; }
cuda_re='^(libcuda\.so\.1|libcudart\.so\.[0-9]+|libcublas\.so\.[0-9]+|libcublasLt\.so\.[0-9]+|libcusparse\.so\.[0-9]+|libnvJitLink\.so\.[0-9]+|libnccl\.so\.[0-9]+|libnvidia-ml\.so\.1)$'
missing_libs() { # the libraries no ELF file of the kit finds with the current LD_LIBRARY_PATH
  for f in $(elfs); do ldd "$f" 2> /dev/null; done | awk '$2 == "=>" && $3 == "not" { print $1 }' | sort -u
}
SW_CUDA_LIBPATH=""
. "$SW_KIT/env.sh"
{
  echo "== environment"
  uname -a; cat /etc/os-release 2> /dev/null | grep PRETTY; ldd --version 2>&1 | head -n 1
  echo "cores: $(nproc); memory: $(awk '/MemTotal/ { print int($2 / 1048576) " GiB" }' /proc/meminfo)"
  nvcc --version 2> /dev/null | tail -n 2 || echo "nvcc: not in PATH"
  for d in /usr/local/cuda/bin; do [ -x "$d/nvcc" ] && "$d/nvcc" --version | tail -n 1; done
  python3 --version 2>&1
  env | grep -E '^(CUDA|NCCL|LD_LIBRARY_PATH)' | sort
} > "$logs/environment.txt" 2>&1
pydirs=$(python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2> /dev/null || true)
ncclpy=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__ or list(nvidia.nccl.__path__)[0]))' 2> /dev/null || true)
cudadirs=""
for c in ${CUDA_HOME:-} ${CUDA_PATH:-} /usr/local/cuda /usr/local/cuda-13*; do
  for d in "$c/lib64" "$c/lib" "$c/targets/x86_64-linux/lib"; do [ -d "$d" ] && cudadirs="$cudadirs $d"; done
done
found=""
for name in $(missing_libs | grep -E "$cuda_re"); do
  hit=""
  for d in $cudadirs; do [ -e "$d/$name" ] && { hit=$d/$name; break; }; done
  if [ -z "$hit" ] && [ -n "$ncclpy" ]; then
    hit=$(find "$ncclpy" -maxdepth 3 -name "$name" 2> /dev/null | head -n 1)
  fi
  if [ -z "$hit" ]; then
    for sp in $pydirs; do
      [ -d "$sp" ] || continue
      hit=$(find "$sp/nvidia" "$sp/torch/lib" -maxdepth 4 -name "$name" 2> /dev/null | head -n 1)
      [ -n "$hit" ] && break
    done
  fi
  if [ -n "$hit" ]; then
    d=$(dirname "$hit")
    case ":$SW_CUDA_LIBPATH:" in *":$d:"*) ;; *) SW_CUDA_LIBPATH=${SW_CUDA_LIBPATH:+$SW_CUDA_LIBPATH:}$d ;; esac
    found="$found $name"
  fi
done
. "$SW_KIT/env.sh"
say "== CUDA libraries (as gpt_train resolves them; added to the library path:${SW_CUDA_LIBPATH:- nothing})"
ldd "$SW_KIT/build/examples/gpt_train" "$SW_KIT/lib/libstarpu-1.3.so.9" 2> /dev/null | awk '{ print $1, $2, $3 }' \
  | grep -E '^lib(cuda|cudart|cublas|cublasLt|cusparse|nvJitLink|nccl)\.' | sort -u | sed 's/^/  /' | tee -a "$summary"
for f in $(elfs); do echo "== ${f#"$SW_KIT"/}"; ldd "$f" 2>&1; done > "$logs/ldd.txt"
still=$(missing_libs | tr '\n' ' ')
base_re='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libutil\.so\.1|libresolv\.so\.2|libgcc_s\.so\.1|libstdc\+\+\.so\.6)$'
outside=$(awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' "$logs/ldd.txt" | sort -u | while read -r n p; do
  case "$p" in "$SW_KIT"/*) continue ;; esac
  echo "$n" | grep -Eq "$base_re|$cuda_re" || echo "$n=$p"
done | tr '\n' ' ')
say "== ldd over $(elfs | wc -l) ELF files of the kit: not found: ${still:-none}; outside the kit, base system and CUDA: ${outside:-none}"
ngpu=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
[ -n "$ngpu" ] || ngpu=0
gpus=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2> /dev/null | head -n 1)
say "== GPUs: $ngpu (${gpus:-nvidia-smi lists none})"
export STARPU_HOME=$work/starpu-home   # StarPU's bus calibration, once for every item
mkdir -p "$STARPU_HOME"
export top_builddir=$SW_KIT/build top_srcdir=$repo BUILD=$SW_KIT/build

# --- the items --------------------------------------------------------------
# item NAME CAP COMMAND...: runs COMMAND with a limit of CAP seconds (less if
# the budget is short), its output in logs/NAME.log; exit 77 is a SKIP
item() {
  name=$1; cap=$2; shift 2
  left=$((deadline - $(date +%s) - 15))
  [ "$cap" -le "$left" ] || cap=$left
  if [ "$cap" -lt 10 ]; then say "SKIP $name: no time left in the budget of $budget s"; return 0; fi
  s=$(date +%s)
  (cd "$work" && timeout -k 10 "$cap" "$@") > "$logs/$name.log" 2>&1 < /dev/null
  rc=$?
  secs=$(($(date +%s) - s))
  case $rc in
    0) say "PASS $name ($secs s)" ;;
    77) say "SKIP $name ($secs s): $(grep -m 1 'SKIP' "$logs/$name.log" | sed 's/^SKIP:* *//')" ;;
    124|137) say "FAIL $name: timed out after $cap s"; nfail=$((nfail + 1)) ;;
    *) say "FAIL $name ($secs s): exit $rc: $(grep -E 'FAIL|error|failed' "$logs/$name.log" | head -n 2 | tr '\n' ' ')"
       nfail=$((nfail + 1)) ;;
  esac
  return 0
}
no_gpu() { say "SKIP $1: no GPU (nvidia-smi lists none)"; }

if command -v nvidia-smi > /dev/null; then
  item nvidia-smi 30 nvidia-smi
else
  say "SKIP nvidia-smi: not installed"
fi
small="--layers 2 --hidden 128 --heads 4 --seq 64 --batch 4 --steps 4 --quiet"
item kit_cpu 90 sh "$repo/tests/mpi_launch.sh" 2 "$top_builddir/examples/gpt_train" $small --tp 2 --sp --ncuda 0 \
  --log "$logs/kit_cpu.csv"
item test_cuda 120 "$top_builddir/tests/test_cuda"
item test_gpt_cuda 200 sh "$repo/tests/test_gpt_cuda.sh"
item test_nccl 60 sh "$repo/tests/test_nccl.sh"
# the CUDA codelets' calibration for the simulation (docs/simulation.md):
# W124 on the GPU, 12 steps (10 samples of each per-step size), recorded by
# bench/calibrate.sh under the host name gpu-<the GPU's name> in
# OUTDIR/calibration -- the codelets' models, StarPU's bus files and the
# cost per task; keep it in the repository, named by device
gpu_host=gpu-$(echo "$gpus" | cut -d, -f1 | tr -c 'A-Za-z0-9\n' '-' | sed 's/-*$//')
if [ "$ngpu" -lt 1 ]; then
  no_gpu calibrate_cuda
elif ! command -v python3 > /dev/null; then
  say "SKIP calibrate_cuda: no python3 (bench/calibrate.sh merges the models with bench/perfmodel_merge.py)"
else
  item calibrate_cuda 90 sh "$repo/bench/calibrate.sh" --build "$top_builddir" --calibration "$outdir/calibration" \
    --host "$gpu_host" examples/gpt_train --layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4 \
    --max-pos 1024 --ncuda 1 --device cuda --steps 12 --quiet --log "$logs/calibrate_cuda.csv"
fi
if [ "$ngpu" -ge 1 ]; then
  item bench_w124 120 sh "$repo/bench/gpu.sh" 10 w124
  item bench_gpt2 150 sh "$repo/bench/gpu.sh" 5 gpt2
  trace_args="--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4 --max-pos 1024 --ncuda 1 --device cuda"
  trace_what="W124 on the GPU"
else
  no_gpu bench_w124
  no_gpu bench_gpt2
  no_gpu trace_bf16
  trace_args="$small --ncuda 0"
  trace_what="a small model on CPU workers (no GPU: rehearses the drawing)"
fi
tname=trace_bf16
[ "$ngpu" -ge 1 ] || tname=trace_bf16_cpu
item $tname 60 "$top_builddir/examples/gpt_train" $trace_args --dtype bf16 --steps 3 --quiet \
  --trace "$logs/trace-bf16.json" --log "$logs/trace-bf16.csv"
if [ -f "$logs/trace-bf16.json" ]; then
  if ! command -v python3 > /dev/null; then
    say "SKIP gantt: no python3 (the trace is in logs.tar.gz: bench/plot_trace.py draws it)"
  elif command -v gnuplot > /dev/null; then
    item gantt 60 python3 "$repo/bench/plot_trace.py" "$logs/trace-bf16.json" --step 2 --gantt "$outdir/gantt-bf16.png"
  else
    item gantt 60 python3 "$repo/autotools/gantt-png.py" "$logs/trace-bf16.json" --step 2 --out "$outdir/gantt-bf16.png" \
      --title "starweave: step 2 of a bf16 run, $trace_what"
  fi
fi
say "== results"
grep -hE 'ms/step|GEMM share|^== machine|^== (w124|gpt2)' "$logs"/bench_*.log 2> /dev/null | tee -a "$summary"
grep -hE '^gantt-png|^plot_trace' "$logs"/gantt.log 2> /dev/null | tee -a "$summary"
finish
