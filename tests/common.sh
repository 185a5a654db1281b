# Sourced by the test scripts: locations and a runner for the example programs.
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
GPT_TRAIN="$top_builddir/examples/gpt_train"
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/starweave-test.XXXXXX")
trap 'rm -rf "$TMPD"' EXIT INT TERM
fail=0
pass=0
check() { # check "what" condition...
  what=$1; shift
  if "$@"; then echo "PASS $what"; pass=$((pass + 1)); else echo "FAIL $what"; fail=$((fail + 1)); fi
}
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" = 0 ]
}
LAUNCH="$top_srcdir/tests/mpi_launch.sh"
run() { # run NP ARGS...: tests/test_tp on NP ranks (the parallel GPT against its reference)
  np=$1; shift
  SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-180} sh "$LAUNCH" "$np" "$top_builddir/tests/test_tp" "$@" > "$TMPD/out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/out"
  worst=$(grep 'every gradient' "$TMPD/out" | tail -n 1 | sed 's/.*worst //')
  check "np=$np $*: $(grep -E '^[0-9]+ passed' "$TMPD/out" | head -n 1); gradients: ${worst:-none} (exit $rc)" [ "$rc" = 0 ]
}
expect_bad() { # expect_bad NP "message" ARGS...: gpt_train exits 2 on every rank, the message once
  np=$1; msg=$2; shift 2
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" "$np" "$GPT_TRAIN" --steps 1 --log "$TMPD/log.csv" "$@" > "$TMPD/out" 2>&1
  rc=$?
  n=$(grep -c -F -- "$msg" "$TMPD/out")
  ok=false
  [ "$rc" = 2 ] && [ "$n" = 1 ] && ok=true
  $ok || cat "$TMPD/out"
  check "np=$np gpt_train $*: exit $rc (expected 2), '$msg' printed $n time(s) (expected 1)" $ok
}
