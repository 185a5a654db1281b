#!/bin/sh
# The API reference: Doxygen reads the public headers (include/starweave.h,
# include/starweave/*.h) with docs/Doxyfile, the configuration `make doc`
# uses, and must print no warning: every public function, type, struct
# field and macro is documented (WARN_IF_UNDOCUMENTED), and no comment has
# a documentation error (WARN_IF_DOC_ERROR). Doxygen says nothing of an
# undocumented enum value or anonymous enum, so the test also reads its
# XML output: every sw_ / SW_ name in the headers' code (their comments
# stripped; a macro's local names, which end in _, aside) must be a
# documented symbol there. Skips (77) without doxygen.
. "${top_srcdir:-.}/tests/common.sh"
doxygen=${DOXYGEN:-}
[ -n "$doxygen" ] || doxygen=$(command -v doxygen 2> /dev/null || true)
if [ -z "$doxygen" ] || ! "$doxygen" --version > /dev/null 2>&1; then
  echo "SKIP: doxygen not found (Debian: apt-get install doxygen, then run configure again)"
  exit 77
fi
doxyfile="$top_builddir/docs/Doxyfile"
[ -f "$doxyfile" ] || { echo "FAIL: $doxyfile missing (configure writes it from docs/Doxyfile.in)"; exit 1; }

# the configuration of make doc, XML instead of HTML, into the scratch dir
{
  cat "$doxyfile"
  echo "OUTPUT_DIRECTORY = $TMPD/doc"
  echo "GENERATE_HTML = NO"
  echo "GENERATE_XML = YES"
  echo "XML_PROGRAMLISTING = NO"
} | "$doxygen" - > "$TMPD/out" 2> "$TMPD/warnings"
rc=$?
[ "$rc" = 0 ] || cat "$TMPD/out"
check "doxygen $("$doxygen" --version | head -n 1) ran on the public headers (exit $rc)" [ "$rc" = 0 ]
nwarn=$(grep -c . "$TMPD/warnings")
[ "$nwarn" = 0 ] || sed 's/^/  /' "$TMPD/warnings"
check "doxygen: $nwarn warnings (undocumented symbols, documentation errors)" [ "$nwarn" = 0 ]

# every member (function, macro, typedef, field, enum, enum value) that
# Doxygen put in its XML with a description, and every struct: documented
cat "$TMPD/doc/xml/"*.xml 2> /dev/null | awk '
  /<compoundname>/ { s = $0; sub(/.*<compoundname>/, "", s); sub(/<.*/, "", s); print s }
  /<(memberdef|enumvalue) / { n++; name[n] = ""; doc[n] = 0; next }
  /<\/(memberdef|enumvalue)>/ { if (n > 0) { if (doc[n] && name[n] != "") print name[n]; n-- }; next }
  n > 0 && /<name>/ && name[n] == "" { s = $0; sub(/.*<name>/, "", s); sub(/<.*/, "", s); name[n] = s }
  n > 0 && /<para>/ { doc[n] = 1 }' | sort -u > "$TMPD/documented"
# the sw_ / SW_ names of the headers' code
for h in "$top_srcdir/include/starweave.h" "$top_srcdir"/include/starweave/*.h; do
  perl -0777 -pe 's{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g' "$h"
done | grep -oE '\b(sw|SW)_[A-Za-z0-9_]*' | grep -v '_$' | sort -u > "$TMPD/names"
comm -23 "$TMPD/names" "$TMPD/documented" > "$TMPD/undocumented"
nnames=$(grep -c . "$TMPD/names")
nundoc=$(grep -c . "$TMPD/undocumented")
[ "$nundoc" = 0 ] || sed 's/^/  undocumented: /' "$TMPD/undocumented"
check "every one of the $nnames sw_/SW_ names of the public headers is documented ($nundoc not)" \
  eval '[ "$nundoc" = 0 ] && [ "$nnames" -gt 0 ]'
finish
