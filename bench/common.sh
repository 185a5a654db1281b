# Sourced by the bench scripts: the same OpenBLAS core type for every
# contender (Debian's OpenBLAS 0.3.21 misdetects recent Xeons, and reads
# the variable only when it is loaded: see autotools/openblas-coretype.sh),
# quiet StarPU.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512_bf16 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Cooperlake
  elif grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
fi
export STARPU_SILENT=1

# The option checks the simulation benches share (bench/sim-*.sh, which set
# `me` first): exit 2 with the rule for bad input.
die2() { echo "$me: error: $*" >&2; exit 2; }
need() { [ $# -ge 2 ] || die2 "$1 needs a value"; }
posint() { case "$2" in ''|*[!0-9]*|0) die2 "$1 must be a positive integer (got '$2')" ;; esac; }
# the comment block at the top of a script, up to `set -eu`: its --help
usage_from() { sed -n '2,/^set -eu/p' "$1" | sed '$d; s/^# \{0,1\}//'; }
# the real build (to calibrate with) and the simulation build
sim_builds() {
  [ -x "$1/examples/gpt_train" ] || die2 "no real build with examples/gpt_train in $1"
  [ -x "$2/examples/gpt_train" ] || die2 "no simulation build in $2 (docs/simulation.md)"
}
cpu_model() { grep -m 1 'model name' /proc/cpuinfo | sed 's/.*: //'; }

# The options bench/plan.sh and bench/plan-picture.sh share (and their
# own): plan_options SCRIPT "OPT:VAR ..." ARGS... sets build from --build,
# machine from --machine and each VAR from its OPT, prints SCRIPT's usage
# for -h/--help, stops at the first argument it does not know (the
# model's flags) and leaves in plan_shift how many it took (the caller
# shifts them). w124_flags: the default model, W124 (bench/w124.sh's
# shape). As root, mpirun is allowed to run as root.
# shellcheck disable=SC2034 # used by the scripts that source this
w124_flags="--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4 --max-pos 1024"
plan_options() {
  plan_script=$1 plan_own=$2 plan_shift=0; shift 2
  while [ $# -gt 0 ]; do
    plan_var=
    case "$1" in
      --build) plan_var=build ;;
      --machine) plan_var=machine ;;
      -h|--help) usage_from "$plan_script"; exit 0 ;;
      --*) for plan_o in $plan_own; do [ "${plan_o%%:*}" = "$1" ] && plan_var=${plan_o#*:}; done ;;
    esac
    [ -n "$plan_var" ] || break
    need "$@"
    eval "$plan_var=\$2"
    shift 2
    plan_shift=$((plan_shift + 2))
  done
  if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
}
