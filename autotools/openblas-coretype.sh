#!/bin/sh
# Prints the OPENBLAS_CORETYPE to start starweave programs with on this CPU,
# or nothing when OpenBLAS picks fast kernels by itself (or the variable is
# already set). Debian's OpenBLAS 0.3.21 does not know recent Xeons and runs
# its SSE3 "Prescott" kernels there (GEMMs about 4x slower); it reads
# OPENBLAS_CORETYPE only when it is loaded, so the launcher must set it
# (sw_init prints the same advice when it finds the Prescott kernels).
#   autotools/openblas-coretype.sh PROGRAM [ARGS...]
# PROGRAM ARGS: any program linked with OpenBLAS that exits at once
# (examples/gpt_train --help); OpenBLAS names its core on stderr.
[ $# -ge 1 ] || { echo "usage: $0 PROGRAM [ARGS...]" >&2; exit 2; }
[ -z "${OPENBLAS_CORETYPE:-}" ] || exit 0
core=$(OPENBLAS_VERBOSE=2 "$@" 2>&1 < /dev/null | sed -n 's/^Core: //p' | head -n 1)
[ "$core" = Prescott ] || exit 0
if grep -qw avx512_bf16 /proc/cpuinfo; then echo Cooperlake
elif grep -qw avx512f /proc/cpuinfo; then echo SkylakeX
elif grep -qw avx2 /proc/cpuinfo; then echo Haswell; fi
exit 0
