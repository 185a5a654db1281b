#!/bin/sh
# docs/layout.md names every source file: each file of src/, codelets/,
# graphs/, include/ and examples/ (and their subfolders; .c .h .cc .cu .cuh)
# must stand, as `name`, in the section of its folder (the lines after the
# heading "### folder/", up to the next heading); and every `name.ext` of
# those sections must be a file of that folder (a file renamed, moved or
# deleted without the guide). Prints what is missing.
. "${top_srcdir:-.}/tests/common.sh"
doc="$top_srcdir/docs/layout.md"
check "docs/layout.md exists" [ -f "$doc" ]
# the files, as "folder/ name" lines
(cd "$top_srcdir" && find src codelets graphs include examples -type f \
   \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \)) |
  sed 's|^\(.*/\)\([^/]*\)$|\1 \2|' | LC_ALL=C sort > "$TMPD/files"
# the names in backquotes in each "### folder/" section of the guide, as "folder/ name" lines
awk '/^### / { dir = ($2 ~ /\/$/) ? $2 : ""; next }
  dir != "" { s = $0
    while (match(s, /`[A-Za-z0-9_.]+\.(c|h|cc|cu|cuh)`/)) { print dir, substr(s, RSTART + 1, RLENGTH - 2); s = substr(s, RSTART + RLENGTH) } }' \
  "$doc" | LC_ALL=C sort -u > "$TMPD/named"
missing=$(LC_ALL=C comm -23 "$TMPD/files" "$TMPD/named" | tr -d ' ' | tr '\n' ' ')
stale=$(LC_ALL=C comm -13 "$TMPD/files" "$TMPD/named" | tr -d ' ' | tr '\n' ' ')
check "every source file ($(wc -l < "$TMPD/files") of them) named in docs/layout.md under its folder; missing: ${missing:-none}" \
  [ -z "$missing" -a "$(wc -l < "$TMPD/files")" -gt 100 ]
check "every file docs/layout.md names is in the tree; not there: ${stale:-none}" [ -z "$stale" ]
finish
