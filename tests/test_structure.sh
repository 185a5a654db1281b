#!/bin/sh
# The structure drawn from the code: the folders of the library and the
# programs stand in an order (docs/layout.md, "The order"), each using only
# those before it:
#   src/core < codelets < src/comm < graphs/train < graphs/layers < graphs/step < graphs/models < examples
# Every `#include "..."` line of their .c .h .cc .cu .cuh files (and of the
# public headers, each counted in the folder that implements it: the table
# below) is an arrow from the including folder to the included one. Fails
# on an arrow running up the order (it prints the include), on a circle
# between folders (tsort), on an include it cannot place, and on a public
# header the table does not place. Prints the folder graph, the arrows
# counted. None is allowed: where the runtime needs what a folder above
# provides (sw_init sets the codelets' CPU GEMM backend), that folder
# registers it with the runtime (src/core/gemm_hook.h).
. "${top_srcdir:-.}/tests/common.sh"
order="src/core codelets src/comm graphs/train graphs/layers graphs/step graphs/models examples"
# the public headers' folders (a header belongs where its functions are)
headers='
runtime.h src/core
tensor.h src/core
trace.h src/core
ops.h codelets
mesh.h src/comm
comm.h src/comm
comm_mpi.h src/comm
comm_nccl.h src/comm
params.h graphs/train
blocks.h graphs/train
checkpoint.h graphs/train
mappings.h graphs/layers
layers.h graphs/layers
heads.h graphs/layers
dit.h graphs/layers
pipeline.h graphs/step
gpt.h graphs/models
weights.h graphs/models
dit_model.h graphs/models
plan.h graphs/models
'
cd "$top_srcdir" || exit 1
echo "$headers" | awk 'NF == 2' > "$TMPD/headers"
# every public header placed
unplaced=""
for h in include/starweave/*.h; do
  grep -q "^$(basename "$h") " "$TMPD/headers" || unplaced="$unplaced $h"
done
check "every public header placed in a folder by the table of tests/test_structure.sh; not placed:${unplaced:- none}" [ -z "$unplaced" ]
# the files and their folders: "folder file" lines (codelets/cuda counts as codelets)
: > "$TMPD/files"
for d in $order; do
  find "$d" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) |
    LC_ALL=C sort | sed "s|^|$d |" >> "$TMPD/files"
done
while read -r h d; do [ ! -f "include/starweave/$h" ] || echo "$d include/starweave/$h"; done < "$TMPD/headers" >> "$TMPD/files"
echo "examples include/starweave.h" >> "$TMPD/files"
check "the folders hold source files ($(wc -l < "$TMPD/files") files)" [ "$(wc -l < "$TMPD/files")" -gt 100 ]
# the arrows: "from to file:line: include" lines. An include "name" is found as
# the compiler finds it (Makefile.am's -I): next to the including file, then
# in include/, codelets/, src/ and graphs/; config.h is the build's.
: > "$TMPD/arrows"
: > "$TMPD/unplaced"
while read -r from f; do
  dir=$(dirname "$f")
  grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
    n=${line%%:*}
    name=$(echo "$line" | sed 's/^[^"]*"\([^"]*\)".*/\1/')
    [ "$name" = config.h ] && continue
    target=""
    for base in "$dir" include codelets src graphs; do
      if [ -f "$base/$name" ]; then target=$(cd "$base" && cd "$(dirname "$name")" && pwd)/$(basename "$name"); break; fi
    done
    if [ -z "$target" ]; then echo "$f:$n: #include \"$name\"" >> "$TMPD/unplaced"; continue; fi
    target=${target#"$(pwd)/"}
    to=$(awk -v t="$target" '$2 == t { print $1; exit }' "$TMPD/files")
    if [ -z "$to" ]; then echo "$f:$n: #include \"$name\" ($target: in no folder of the order)" >> "$TMPD/unplaced"; continue; fi
    echo "$from $to $f:$n: #include \"$name\"" >> "$TMPD/arrows"
  done
done < "$TMPD/files"
[ -s "$TMPD/unplaced" ] && sed 's/^/  cannot place: /' "$TMPD/unplaced"
check "every include placed in a folder ($(wc -l < "$TMPD/arrows") includes)" [ ! -s "$TMPD/unplaced" -a -s "$TMPD/arrows" ]
# the folder graph, drawn: each arrow between two folders with its count
echo "the folder graph (from -> to: includes):"
awk '$1 != $2 { print "  " $1 " -> " $2 }' "$TMPD/arrows" | LC_ALL=C sort | uniq -c | sed 's/^ *\([0-9]*\) *\(.*\)$/\2: \1/'
# arrows running up the order
awk -v order="$order" 'BEGIN { n = split(order, o, " "); for (i = 1; i <= n; i++) rank[o[i]] = i }
  rank[$2] > rank[$1] { $1 = ""; $2 = ""; sub(/^  /, ""); print "  up: " $0 }' "$TMPD/arrows" > "$TMPD/up"
cat "$TMPD/up"
check "no include runs up the order $order ($(wc -l < "$TMPD/up") do)" [ ! -s "$TMPD/up" ]
# a circle between folders (also where the order itself were wrong): tsort finds it
awk '$1 != $2 { print $1, $2 }' | LC_ALL=C sort -u | tsort > /dev/null 2> "$TMPD/loop"
sed 's/^/  /' "$TMPD/loop"
check "no circle between folders" [ ! -s "$TMPD/loop" ]
finish
