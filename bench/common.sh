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
