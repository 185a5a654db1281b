#!/bin/sh
# The installed library as a user gets it: a program that includes
# starweave.h, compiled and linked by the plain C compiler (not mpicc) with
# nothing but `pkg-config --cflags --libs starweave`, runs. starweave's
# headers include mpi.h, so starweave.pc must require MPI's module.
# README's example program too: compiled the same way and run on 2 ranks,
# its loss falling over its 10 steps.
#   make check:        installs the build tree into a temporary DESTDIR first
#   make installcheck: (and distcheck) the real installation:
#                      tests/test_install.sh --installed, with $DESTDIR if any
# The programs are installed under the project's prefix (starweave-gpt_train,
# starweave-collectives: configure's default --program-prefix) and run;
# gpt_train --prompt-text finds starweave-prepare-data beside it.
# The install directories and the name transform come from the Makefile
# (sw_prefix, sw_bindir, sw_libdir, sw_pkgconfigdir, sw_transform).
. "${top_srcdir:-.}/tests/common.sh"
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
PLAIN_CC=${SW_PLAIN_CC:-cc}
if [ "${1:-}" != --installed ]; then
  DESTDIR="$TMPD/root"
  # a make of its own, not a job of the make running the tests
  if ! (unset MAKEFLAGS MFLAGS MAKELEVEL; ${MAKE:-make} -C "$top_builddir" install DESTDIR="$DESTDIR") \
      > "$TMPD/install.log" 2>&1; then
    tail -n 30 "$TMPD/install.log"
    check "make install DESTDIR=$DESTDIR" false
    finish; exit
  fi
fi
root=${DESTDIR:-}
if [ -z "${sw_prefix:-}" ] || [ ! -f "$root$sw_pkgconfigdir/starweave.pc" ]; then
  echo "test_install: no starweave.pc in '$root${sw_pkgconfigdir:-}' (sw_pkgconfigdir and sw_prefix come from the Makefile)"
  exit 99
fi
cat > "$TMPD/user.c" << 'EOF'
#include <starweave.h>
#include <stdio.h>
int main(void)
{
    sw_options opt;
    sw_options_default(&opt);
    printf("sw_options_default: ncpus %d\n", opt.ncpus);
    return opt.ncpus == -1 ? 0 : 1;
}
EOF
# under a DESTDIR the .pc still names the final prefix: a copy names the
# staged one (--define-variable would redefine StarPU's and MPI's prefix too)
pcdir=$root$sw_pkgconfigdir
if [ -n "$root" ]; then
  pcdir=$TMPD/pkgconfig
  mkdir -p "$pcdir"
  sed "s|^prefix=.*|prefix=$root$sw_prefix|" "$root$sw_pkgconfigdir/starweave.pc" > "$pcdir/starweave.pc"
fi
if flags=$(PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
    "$PKG_CONFIG" --cflags --libs starweave 2> "$TMPD/pc.err"); then
  check "pkg-config --cflags --libs starweave: $flags" true
else
  cat "$TMPD/pc.err"
  check "pkg-config --cflags --libs starweave" false
fi
if $PLAIN_CC -Wall -Werror "$TMPD/user.c" -o "$TMPD/user" $flags > "$TMPD/cc.log" 2>&1; then
  check "$PLAIN_CC user.c \$(pkg-config --cflags --libs starweave) compiles and links" true
  LD_LIBRARY_PATH="$root$sw_libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$TMPD/user" > "$TMPD/run.log" 2>&1
  rc=$?
  check "the program runs against the installed library: $(cat "$TMPD/run.log") (exit $rc)" [ "$rc" = 0 ]
else
  cat "$TMPD/cc.log"
  check "$PLAIN_CC user.c \$(pkg-config --cflags --libs starweave) compiles and links" false
fi
# strict ISO C11 (StarPU's headers need POSIX types: the .pc's Cflags give
# _DEFAULT_SOURCE, which -std=c11 alone turns off)
if $PLAIN_CC -std=c11 -Wall -Werror "$TMPD/user.c" -o "$TMPD/user_c11" $flags > "$TMPD/cc.log" 2>&1; then
  check "$PLAIN_CC -std=c11 user.c \$(pkg-config --cflags --libs starweave) compiles and links" true
else
  cat "$TMPD/cc.log"
  check "$PLAIN_CC -std=c11 user.c \$(pkg-config --cflags --libs starweave) compiles and links" false
fi
# README's example program, as a reader copies it: compiled the same way,
# run on the 2 ranks it asks for; its loss must fall over its 10 steps
sed -n '/^```c$/,/^```$/{p;/^```$/q}' "$top_srcdir/README.md" | sed '1d;$d' > "$TMPD/readme.c" # the first C block: the whole program
if [ -s "$TMPD/readme.c" ] && $PLAIN_CC -Wall -Werror "$TMPD/readme.c" -o "$TMPD/readme" $flags > "$TMPD/cc.log" 2>&1; then
  LD_LIBRARY_PATH="$root$sw_libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" SW_TEST_TIMEOUT=120 \
    sh "$LAUNCH" 2 "$TMPD/readme" > "$TMPD/readme.log" 2>&1
  rc=$?
  losses=$(awk '$1 == "step" { printf "%s ", $4 }' "$TMPD/readme.log")
  ok=false
  [ "$rc" = 0 ] && echo "$losses" | awk '{ exit !(NF == 10 && $10 < $1) }' && ok=true
  $ok || cat "$TMPD/readme.log"
  check "README's example: compiles with pkg-config, runs on 2 ranks (exit $rc), losses $losses" $ok
else
  cat "$TMPD/cc.log"
  check "README's example ($(wc -l < "$TMPD/readme.c") lines of C) compiles with pkg-config" false
fi
# the programs: configure's names (autoconf's identity transform s,x,x,
# would mean the default starweave- prefix is gone)
check "installed names are transformed (program_transform_name '${sw_transform:-}')" [ "${sw_transform:-s,x,x,}" != "s,x,x," ]
for p in gpt_train collectives; do
  name=$(echo "$p" | sed "${sw_transform:-s,x,x,}")
  LD_LIBRARY_PATH="$root$sw_libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$root$sw_bindir/$name" --help > "$TMPD/help" 2>&1
  rc=$?
  check "$sw_bindir/$name --help (exit $rc, $(wc -l < "$TMPD/help") lines)" [ "$rc" = 0 ]
done
# the data-preparation tool (a sh wrapper) finds the node script installed
# beside it; its --help is the script's, so only where node is there
if command -v node > /dev/null 2>&1; then
  name=$(echo prepare-data | sed "${sw_transform:-s,x,x,}")
  "$root$sw_bindir/$name" --help > "$TMPD/help" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/help"
  check "$sw_bindir/$name --help (exit $rc, $(wc -l < "$TMPD/help") lines)" [ "$rc" = 0 ]
fi
# gpt_train --prompt-text runs the encoder installed beside it (node pointed
# nowhere: the wrapper runs and exits 3, without node or its package)
name=$(echo gpt_train | sed "${sw_transform:-s,x,x,}")
enc=$(echo prepare-data | sed "${sw_transform:-s,x,x,}")
env -u SW_PREPARE_DATA SW_NODE="$TMPD/no-node" LD_LIBRARY_PATH="$root$sw_libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  "$root$sw_bindir/$name" --vocab 1000 --load-weights "$TMPD/none" --generate "x" --prompt-text > "$TMPD/encoder" 2>&1
rc=$?
ok=false
[ "$rc" = 2 ] && grep -q -F "$enc' (beside gpt_train) exited 3" "$TMPD/encoder" && ok=true
$ok || cat "$TMPD/encoder"
check "$sw_bindir/$name --prompt-text runs $sw_bindir/$enc (exit $rc): $(grep -o "the encoder '[^']*' ([^)]*)" "$TMPD/encoder")" $ok
finish
