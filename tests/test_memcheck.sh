#!/bin/sh
# A tiny model (with dropout) runs clean under AddressSanitizer + UBSan, and
# every misuse of tests/test_misuse.sh is refused there too (one rank).
# (valgrind cannot run the -march=native kernels: it stops at AVX-512.)
# The CPU sources only (also in GPU builds): src/comm/comm_nccl.c belongs to CUDA builds.
. "${top_srcdir:-.}/tests/common.sh"
[ -n "${SW_CHECK_LONG:-}" ] || { echo "SKIP: a long test (an ASan build): make check-long runs it (.ci/run does)"; exit 77; }
CC=${MPICC:-mpicc}
s=$top_srcdir
# a GPU build's config.h turns the CUDA functions on: this build is CPU only
inc=$top_builddir
if grep -q '^#define STARWEAVE_USE_CUDA' "$top_builddir/config.h"; then
  grep -v '^#define STARWEAVE_USE_CUDA' "$top_builddir/config.h" > "$TMPD/config.h"
  inc=$TMPD
fi
flags="-std=gnu11 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
cflags="$flags -I$inc -I$s/include -I$s/codelets -I$s/src -I$s/graphs $(pkg-config --cflags starpu-1.3)"
libs="$(pkg-config --libs starpumpi-1.3 starpu-1.3) ${BLAS_LIBS:--lopenblas} $(pkg-config --libs jansson 2> /dev/null || echo -ljansson) -lm"
# the library's objects once (two attention.c: named by their directory), then gpt_train and test_misuse
built=true
mkdir -p "$TMPD/o"
for f in $(ls "$s"/src/*/*.c | grep -v comm_nccl) "$s"/codelets/*.c "$s"/graphs/*/*.c; do
  o="$TMPD/o/$(basename "$(dirname "$f")")_$(basename "$f" .c).o"
  $CC $cflags -c "$f" -o "$o" >> "$TMPD/cc.log" 2>&1 || built=false
done
$built && $CC $flags "$TMPD"/o/*.o "$s/examples/gpt_train.c" "$s/examples/cli.c" "$s/examples/train_loop.c" "$s/examples/plan_main.c" "$s/examples/data.c" "$s/examples/tokenizer.c" $cflags -o "$TMPD/gpt_train_asan" $libs >> "$TMPD/cc.log" 2>&1 || built=false
$built && $CC $flags "$TMPD"/o/*.o "$s/tests/test_misuse.c" $cflags -o "$TMPD/test_misuse_asan" $libs >> "$TMPD/cc.log" 2>&1 || built=false
if ! $built; then
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
# every misuse of tests/test_misuse.sh refused under ASan/UBSan too (one rank; a
# sanitizer's report exits 1, not 2): no crash hidden by a lucky layout
top_srcdir="$s" top_builddir="$top_builddir" SW_MISUSE_PROG="$TMPD/test_misuse_asan" SW_MISUSE_NP=1 ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 \
  UBSAN_OPTIONS=print_stacktrace=1 sh "$s/tests/test_misuse.sh" > "$TMPD/misuse" 2>&1
rc=$?
grep -E '^FAIL|AddressSanitizer|runtime error:' "$TMPD/misuse" | head -n 20
check "test_misuse.sh under ASan/UBSan: $(grep -c '^PASS' "$TMPD/misuse") cases refused (exit $rc)" [ "$rc" = 0 ]
finish
