#!/bin/sh
# nvcc behind libtool: autotools/nvcc-wrap.sh NVCC ARGS...
# libtool --mode=compile adds the host compiler's -fPIC (and -DPIC) for the
# shared object; nvcc does not accept -fPIC itself, so it is handed to the
# host compiler with --compiler-options (libtool itself would take
# -Xcompiler). Every other argument passes unchanged.
if [ $# -lt 1 ]; then
  echo "usage: $0 NVCC [ARGS...]" >&2
  exit 2
fi
nvcc=$1; shift
n=$#
i=0
while [ "$i" -lt "$n" ]; do
  a=$1; shift
  case $a in
    -fPIC|-fpic) set -- "$@" --compiler-options "$a" ;;
    *) set -- "$@" "$a" ;;
  esac
  i=$((i + 1))
done
exec "$nvcc" "$@"
