#!/bin/sh
# tests/mutants.sh's breaks still apply: each mutant's sed script changes
# its file in this tree (tests/mutants.sh --stale: no build, about a
# second). A file moved, split or renamed, or a line reworded, leaves a
# mutant that changes nothing and so is never run (issue 45's splits left
# ten such, seen only when the mutants themselves were run). And no check of
# the test scripts leaves part of its condition outside it: in
#   check "what" [ "$rc" = 0 ] && [ "$n" = 1 ]
# the shell gives check only the first test, and the second failing fails
# nothing (four tests had it; a whole condition goes in eval '...' or $ok).
. "${top_srcdir:-.}/tests/common.sh"
M="$top_srcdir/tests/mutants.sh"
sh "$M" --stale > "$TMPD/out" 2>&1
rc=$?
cat "$TMPD/out"
check "every mutant's sed script changes its file ($(tail -n 1 "$TMPD/out")) (exit $rc)" [ "$rc" = 0 ]
# the check itself, on the list's first mutant with a copy of mutants.sh
# beside a tree of its one file (mutants.sh reads the files beside it):
# the file intact passes, emptied is STALE, gone is MISSING
first=$(sed -n "/^  cat <<'EOF'\$/,/^EOF\$/p" "$M" | grep -v -e '^#' -e '^$' -e "^  cat <<" -e '^EOF$' | head -n 1)
name=${first%%|*} rest=${first#*|}
file=${rest%%|*}
mkdir -p "$TMPD/t/tests" "$TMPD/t/$(dirname "$file")" && cp "$M" "$TMPD/t/tests/mutants.sh" && cp "$top_srcdir/$file" "$TMPD/t/$file"
stale_case() { # stale_case WHAT OUTCOME: --stale on the first mutant says OUTCOME (PASS: nothing, exit 0)
  sh "$TMPD/t/tests/mutants.sh" --stale "$name" > "$TMPD/case" 2>&1
  rc=$? ok=false
  if [ "$2" = PASS ]; then [ "$rc" = 0 ] && ok=true
  else [ "$rc" = 1 ] && grep -q "^$2 *$name: " "$TMPD/case" && ok=true; fi
  $ok || cat "$TMPD/case"
  check "$name $1: $2 expected, exit $rc" $ok
}
stale_case "on an intact $file" PASS
: > "$TMPD/t/$file"
stale_case "on an emptied $file" STALE
rm -f "$TMPD/t/$file"
stale_case "without $file" MISSING
# each check with its continuation lines joined; eval '...' and sh -c '...'
# hold a whole condition, and "check ... || cat out" shows what failed
for f in "$top_srcdir"/tests/*.sh; do
  awk -v f="${f##*/}" '
    /^[ \t]*check "/ { line = $0; start = NR; while (line ~ /\\$/ && (getline more) > 0) line = line more
      if (line !~ /eval \x27|sh -c [\x27"]/ && line ~ /\] *(&& *|\|\| *\[)/) print f ":" start ": " line }' "$f"
done > "$TMPD/split"
cat "$TMPD/split"
check "no check leaves part of its condition outside it ($(wc -l < "$TMPD/split") do)" [ ! -s "$TMPD/split" ]
finish
