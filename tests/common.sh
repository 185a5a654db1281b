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
