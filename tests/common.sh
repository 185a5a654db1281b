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
# SW_TEST_ONLY=REGEX runs only the cases (and sections) whose description
# matches (tests/mutants.sh uses it to run the part of a long test that a
# mutant should break); unset, everything runs.
want() { # want "description" -> status 0 when the case runs
  [ -z "${SW_TEST_ONLY:-}" ] || echo "$*" | grep -Eq -- "$SW_TEST_ONLY"
}
run() { # run NP ARGS...: tests/test_tp on NP ranks (the parallel GPT against its reference)
  np=$1; shift
  want "np=$np $*" || return 0
  SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-180} sh "$LAUNCH" "$np" "$top_builddir/tests/test_tp" "$@" > "$TMPD/out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/out"
  worst=$(grep 'every gradient' "$TMPD/out" | tail -n 1 | sed 's/.*worst //')
  check "np=$np $*: $(grep -E '^[0-9]+ passed' "$TMPD/out" | head -n 1); gradients: ${worst:-none} (exit $rc)" [ "$rc" = 0 ]
}
refused() { # refused NP "message" "what" PROGRAM ARGS...: PROGRAM on NP ranks exits 2 on every rank, the message once
  np=$1; msg=$2; what=$3; shift 3
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" "$np" "$@" > "$TMPD/out" 2>&1
  rc=$?
  n=$(grep -c -F -- "$msg" "$TMPD/out")
  ok=false
  [ "$rc" = 2 ] && [ "$n" = 1 ] && ok=true
  $ok || cat "$TMPD/out"
  check "np=$np $what: exit $rc (expected 2), '$msg' printed $n time(s) (expected 1)" $ok
}
expect_bad() { # expect_bad NP "message" ARGS...: gpt_train exits 2 on every rank, the message once
  np=$1; msg=$2; shift 2
  want "bad input: $msg" || return 0
  refused "$np" "$msg" "gpt_train $*" "$GPT_TRAIN" --steps 1 --log "$TMPD/log.csv" "$@"
}
traffic_case() { # traffic_case NP ARGS...: gpt_train --counters, 2 steps; the bytes sent = the traffic
  # model on every group of every rank; the output kept in $TMPD/traffic.<NP><ARGS without spaces and dashes>
  np=$1; shift
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" $np "$GPT_TRAIN" --steps 2 --quiet --counters --log "$TMPD/log.csv" "$@" > "$TMPD/out" 2>&1
  rc=$?
  ok=false
  [ "$rc" = 0 ] && traffic_exact "$TMPD/out" "$np" > "$TMPD/bad" && ok=true
  $ok || cat "$TMPD/out"
  check "np=$np gpt_train $*: bytes sent = model on every group of $np ranks ($(sed -n 's/^traffic: rank 0 \([a-z_]*\) group: sent \([0-9]*\) bytes .*/\1 \2/p' "$TMPD/out" | awk '$2 > 0' | tr '\n' ';')) (exit $rc)" $ok
  cp "$TMPD/out" "$TMPD/traffic.$np$(echo "$*" | tr -d ' -')"
}
# What ran, from the "counters:" lines that gpt_train --counters and
# custom_model print on every rank (sw_counters_print).
counter_values() { # counter_values FILE NAME -> that counter of every rank, one per line
  sed -n "s/^counters: rank [0-9]*:.* $2=\([0-9]*\).*/\1/p" "$1"
}
counter_min() { # counter_min FILE NAME -> the smallest over the ranks (empty if none printed)
  counter_values "$1" "$2" | sort -n | head -n 1
}
counter_max() { # counter_max FILE NAME -> the largest over the ranks (empty if none printed)
  counter_values "$1" "$2" | sort -n | tail -n 1
}
# The exact traffic lines (sw_comm_traffic_report): every group of every one
# of NP ranks, each with the bytes its sends carried equal to the model's,
# as integers (byte counts compared exactly).
traffic_exact() { # traffic_exact FILE NP -> status 0 when so; prints the lines that differ
  awk -v np="$2" '/^traffic: rank [0-9]+ [a-z_]+ group: sent / {
      n++; per[$3]++; sent = $7; model = $NF; if (sent != model || model != int(model)) { bad++; print } }
    END { g = per[0]; ranks = 0; for (r in per) { ranks++; if (per[r] != g) bad++ }
      if (!g || ranks != np || bad) { printf "traffic_exact: %d lines from %d ranks (expected %d), %d bad\n", n, ranks, np, bad; exit 1 } }' "$1"
}
need_torch() { # skips the test (exit 77) with the reason unless $TORCH_PYTHON imports torch
  "${TORCH_PYTHON:-/usr/bin/python3}" -c 'import torch' > /dev/null 2>&1 && return 0
  echo "SKIP: python3-torch not importable by ${TORCH_PYTHON:-/usr/bin/python3} (install Debian python3-torch)"
  exit 77
}
# a checkpoint file's bytes but its save id (header bytes 672-679, drawn anew by each
# save) and the checksum (the last 8 bytes, which covers the id)
SAVE_ID_AT=672
same_ckpt_file() { # same_ckpt_file A B: two checkpoint files identical but for the save id and the checksum
  [ -s "$1" ] && [ -s "$2" ] && n=$(wc -c < "$1") && [ "$n" = "$(wc -c < "$2")" ] &&
    cmp -s -n $SAVE_ID_AT "$1" "$2" && cmp -s -i $((SAVE_ID_AT + 8)) -n $((n - SAVE_ID_AT - 16)) "$1" "$2"
}
