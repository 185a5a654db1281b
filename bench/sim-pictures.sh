#!/bin/sh
# The simulation's picture in docs/ (docs/simulation.md, "Scale"):
# simulated ms/step against simulated ranks, one line per model and layout
# family, from the CSV bench/sim-scale.sh --out writes.
# usage: bench/sim-pictures.sh CSV [PNG]   (default PNG: docs/sim-scale.png)
# e.g. bench/sim-scale.sh --ranks "8 64 512" --out /tmp/scale.csv && bench/sim-pictures.sh /tmp/scale.csv
set -eu
me=sim-pictures
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
[ $# -ge 1 ] || die2 "usage: bench/sim-pictures.sh CSV [PNG]"
csv=$1 png=${2:-$here/../docs/sim-scale.png}
[ -r "$csv" ] || die2 "cannot read $csv"
command -v gnuplot > /dev/null || die2 "gnuplot is missing (apt-get install gnuplot-nox)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# a family: the layout without its tp 8 prefix (pp8 at 8 ranks and tp8pp8
# at 64 are one line: the pipeline across nodes, tensor parallel inside);
# tp 8 + sp alone and with dp N ZeRO-1 around it (tp8sp, tp8dp8z1,
# tp8dp64z1) are one line too: data parallel across nodes. Points of
# different depths are different lines (column 14, the layers simulated;
# 8 where a table has no such column: the first tables' runs)
awk -F, 'NR > 1 && $4 != "" { f = $3; if (f ~ /^tp8(sp|dp[0-9]+z1)$/) f = "tp8sp-dpz1"; else { sub(/^tp8/, "", f); if (f == "sp") f = "tp8sp" }
  print $1 "-" f "-L" ($14 != "" ? $14 : 8), $2, $4 }' "$csv" |
  sort -k1,1 -k2,2n > "$tmp/all"
plot=
for s in $(cut -d' ' -f1 "$tmp/all" | sort -u); do
  grep "^$s " "$tmp/all" | cut -d' ' -f2- > "$tmp/$s.dat"
  plot="$plot${plot:+, }'$tmp/$s.dat' using 1:2 with linespoints title '$s'"
done
[ -n "$plot" ] || die2 "no simulated step in $csv"
cat > "$tmp/p.gp" <<EOF
set terminal pngcairo size 900,560 font 'Sans,10'
set output '$png'
set title "SIMULATED step time: StarPU + SimGrid, one CPU core of this machine per rank\n(calibrated here, regression ESTIMATES for these sizes; network typed: nvlink-ib, an ASSUMPTION)"
set xlabel 'simulated ranks (nodes of 8)'
set ylabel 'simulated ms/step'
set logscale xy
set xtics (8, 64, 512)
set xrange [5:800]
set key outside right
set grid
plot $plot
EOF
gnuplot "$tmp/p.gp"
echo "$me: $png"
