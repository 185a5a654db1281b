#!/bin/sh
# Bad input: a clear message naming the rule and the values, exit status 2, on every rank.
. "${top_srcdir:-.}/tests/common.sh"
expect() { # expect "pattern" args...
  pattern=$1; shift
  timeout 60 "$GPT_TRAIN" --steps 1 "$@" > "$TMPD/out" 2>&1
  rc=$?
  if [ "$rc" = 2 ] && grep -q -- "$pattern" "$TMPD/out"; then
    echo "PASS $* -> exit 2: $(grep -- "$pattern" "$TMPD/out" | head -n 1)"; pass=$((pass + 1))
  else
    echo "FAIL $* -> exit $rc, expected 2 and '$pattern':"; cat "$TMPD/out"; fail=$((fail + 1))
  fi
}
: > "$TMPD/empty"
expect "hidden (100) must be divisible by heads (3)" --hidden 100 --heads 3
expect "layers must be positive (layers = 0)" --layers 0
expect "batch must be positive (batch = -4)" --batch -4
expect "seq (128) must not exceed the positions of the model (max-pos = 64)" --seq 128 --max-pos 64
expect "cannot open data file '/nonexistent/corpus.txt'" --data /nonexistent/corpus.txt
expect "is empty" --data "$TMPD/empty"
expect "unknown flag '--bogus'" --bogus 1
expect "expects an integer, got 'abc'" --steps abc
expect "dropout must be in \[0, 1) (dropout = 1.5)" --dropout 1.5
# the same rule checked by every rank of an MPI launch: all exit 2, no hang
MPIRUN=${MPIRUN:-mpirun}
timeout 120 "$MPIRUN" --oversubscribe -np 2 "$GPT_TRAIN" --hidden 100 --heads 3 > "$TMPD/out" 2>&1
rc=$?
n=$(grep -c "must be divisible" "$TMPD/out")
ok=false
[ "$rc" = 2 ] && [ "$n" = 1 ] && ok=true
check "mpirun -np 2 with a bad flag: exit 2 without hanging (rc $rc), message printed once ($n times)" $ok
finish
