#!/bin/sh
# A tiny model (with dropout) runs clean under AddressSanitizer + UBSan.
# (valgrind cannot run the -march=native kernels: it stops at AVX-512.)
# The CPU sources only (also in GPU builds): src/comm_nccl.c belongs to CUDA builds.
. "${top_srcdir:-.}/tests/common.sh"
CC=${MPICC:-mpicc}
s=$top_srcdir
# a GPU build's config.h turns the CUDA functions on: this build is CPU only
inc=$top_builddir
if grep -q '^#define STARWEAVE_USE_CUDA' "$top_builddir/config.h"; then
  grep -v '^#define STARWEAVE_USE_CUDA' "$top_builddir/config.h" > "$TMPD/config.h"
  inc=$TMPD
fi
flags="-std=gnu11 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
if ! $CC $flags -I"$inc" -I"$s/include" -I"$s/codelets" $(pkg-config --cflags starpu-1.3) \
    $(ls "$s"/src/*.c | grep -v comm_nccl) "$s"/codelets/*.c "$s"/graphs/*.c "$s/examples/gpt_train.c" -o "$TMPD/gpt_train_asan" \
    $(pkg-config --libs starpumpi-1.3 starpu-1.3) ${BLAS_LIBS:--lopenblas} -lm > "$TMPD/cc.log" 2>&1; then
  cat "$TMPD/cc.log"
  if grep -q "libasan" "$TMPD/cc.log"; then echo "SKIP: AddressSanitizer runtime not available"; exit 77; fi
  check "ASan build compiles" false; finish; exit
fi
ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
  timeout 600 "$TMPD/gpt_train_asan" --steps 2 --layers 1 --hidden 32 --heads 2 --seq 8 --batch 2 \
  --tiles 3 --dropout 0.1 --log "$TMPD/log.csv" > "$TMPD/out" 2>&1
rc=$?
tail -n 5 "$TMPD/out"
check "tiny model under ASan/UBSan exits 0 (rc $rc)" [ "$rc" = 0 ]
check "no sanitizer report" [ -z "$(grep -E 'ERROR: AddressSanitizer|runtime error:' "$TMPD/out")" ]
finish
