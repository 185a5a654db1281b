# Sourced by the tests of the encoder examples (test_encoder.sh,
# test_encoder_mlm.sh) after tests/common.sh, with PROG set: run one, read
# its per-step losses and gradient norms and its per-parameter gradient
# digests, and compare two runs.
runs() { # runs NP ARGS... -> $TMPD/out; status 0 when it ran
  np=$1; shift
  SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-180} sh "$LAUNCH" "$np" "$PROG" --steps 3 "$@" > "$TMPD/out" 2>&1 \
    || { cat "$TMPD/out" >&2; return 1; }
}
losses() { awk '$1 == "step" { printf "%s %s ", $4, $6 }' "$1"; } # each step's loss and gradient norm
grads() { # grads FILE -> "name sumsq abssum" per parameter, summed over the ranks that printed it
  awk '$1 == "grad" { s[$2] += $3; a[$2] += $4 } END { for (n in s) printf "%s %.9e %.9e\n", n, s[n], a[n] }' "$1" | sort
}
close_losses() { # 3 (loss, norm) pairs each, losses within relative 1e-5, gradient norms within 1e-4
  echo "$1|$2" | awk -F'|' '{ n = split($1, a, " "); m = split($2, b, " "); if (n != 6 || m != 6) exit 1;
    for (i = 1; i <= n; i++) { d = a[i] - b[i]; if (d < 0) d = -d; if (d > (i % 2 ? 1e-5 : 1e-4) * (a[i] < 0 ? -a[i] : a[i])) exit 1 } }'
}
close_grads() { # close_grads REF GOT: the same parameters; sum of squares within 2e-4, sum of |g| within 1e-4
  join "$1" "$2" | awk -v n="$(wc -l < "$1")" '{ k++; d = $2 - $4; if (d < 0) d = -d; if (d > 2e-4 * $2 + 1e-30) bad++;
      d = $3 - $5; if (d < 0) d = -d; if (d > 1e-4 * $3 + 1e-30) bad++ }
    END { if (k != n || k == 0 || bad) { printf "%d of %d parameters, %d off\n", k, n, bad; exit 1 } }'
}
