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
