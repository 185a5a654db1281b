#!/bin/sh
# SimGrid platform and hostfile for bench/sim.sh (docs/simulation.md):
# N nodes x R ranks per node, C CPU workers per rank.
#
# usage: bench/sim-platform.sh [--nodes N] [--ranks-per-node R] [--cpus C]
#          [--intra-bw GBps] [--intra-lat us] [--inter-bw GBps] [--inter-lat us]
#          [--duplex full|half] [--cores N] [--preset NAME] --out PREFIX
# writes PREFIX.xml (the platform) and PREFIX.hosts (the hostfile: one line
# per rank, node-major: ranks 0..R-1 on node 0, ...) and prints, one line
# each, every figure used and where it comes from.
#
# Each rank is a zone StarPU-MPI<rank> holding what StarPU looks for there
# (hosts MAIN, CPU0..C-1, RAM) and the rank's SMPI host. The network: each
# rank has a link to its node (intra-node bandwidth, half the intra-node
# latency), each node a link to the switch (inter-node bandwidth, half of
# what the inter-node latency adds to the intra-node one). Two ranks of a
# node talk over their two links (the intra-node figures); ranks of
# different nodes over those and their nodes' links (latency: the
# inter-node figure; bandwidth: the smaller one), the node's link shared by
# its ranks as a NIC is. Links are full duplex (SPLITDUPLEX: each direction
# has the bandwidth, as NVLink's, InfiniBand's and Ethernet's) in the
# typed cluster presets, and half duplex (SimGrid's default: one bandwidth
# for both directions) in this machine's, whose messages are copies by the
# two vCPUs that also compute, through one memory bus; --duplex overrides.
# A 2-rank all-reduce (each rank's buffer to the other at once) takes twice
# as long on half-duplex links. The codelets take their calibrated times
# (bench/calibrate.sh), whatever the CPU hosts' speed.
#
# --cores N: each node has N cores. Where its ranks' CPU workers outnumber
# them, every worker's tasks run on one host of N cores and share them, as
# the threads of oversubscribed ranks do (mpirun binds no rank then); a
# task there takes its calibrated time only while it has a core to itself,
# so calibrate such runs with bench/calibrate.sh --cpu-time (the tasks'
# time on their cores). Otherwise each worker keeps a core of its own, as
# by default. Needs the SimGrid StarPU of autotools/build-starpu.sh
# --simgrid, patched to read the host property it writes
# (autotools/starpu-simgrid-cores.patch).
#
# Presets (typed figures are ASSUMPTIONS, printed as such; --intra-*,
# --inter-* and --duplex given after --preset override its figures):
#   vm-shm     this machine's ranks through shared memory (5 GB/s, 1 us
#              both ways): typed, ASSUMPTIONS (not measured yet)
#   vm-measured  this machine's 2 ranks as BENCHMARKS.md measured them:
#              0.83 GB/s (MPI_Allreduce's bus bandwidth, 64 MiB, 2 ranks)
#              and 16 us (one 1 KiB all-reduce of starweave's, a task
#              calling MPI: StarPU's per-collective cost, which the network
#              then charges as latency; MPI_Allreduce alone takes 1 us)
#   nvlink-ib  nodes of 8 ranks on NVLink (300 GB/s, 1 us) with 400 Gb/s
#              InfiniBand between nodes (50 GB/s, 5 us): ASSUMPTIONS
#   eth25      25 Gb/s Ethernet between nodes (3.125 GB/s, 20 us), shared
#              memory inside (10 GB/s, 1 us): ASSUMPTIONS
# Default: --preset eth25, 2 nodes x 1 rank.
set -eu
me=sim-platform
die2() { echo "$me: error: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

nodes=2 rpn=1 out="" cpus=2 cpu_speed=2000000000f cores="" shared=no
preset=eth25
intra_bw="" intra_lat="" inter_bw="" inter_lat=""
src_intra="" src_inter=""
set_preset() {
  case "$1" in
    vm-shm) intra_bw=5 intra_lat=1 inter_bw=5 inter_lat=1 duplex=half
            src_intra="ASSUMPTION (preset vm-shm, typed)"; src_inter="ASSUMPTION (preset vm-shm, typed)" ;;
    vm-measured) intra_bw=0.83 intra_lat=16 inter_bw=0.83 inter_lat=16 duplex=half
            src_intra="MEASURED in BENCHMARKS.md (collectives.sh, 2 ranks on this VM), not by this script"; src_inter="$src_intra" ;;
    nvlink-ib) intra_bw=300 intra_lat=1 inter_bw=50 inter_lat=5 duplex=full
            src_intra="ASSUMPTION (preset nvlink-ib: NVLink, typed)"; src_inter="ASSUMPTION (preset nvlink-ib: 400 Gb/s InfiniBand, typed)" ;;
    eth25) intra_bw=10 intra_lat=1 inter_bw=3.125 inter_lat=20 duplex=full
            src_intra="ASSUMPTION (preset eth25: shared memory, typed)"; src_inter="ASSUMPTION (preset eth25: 25 Gb/s Ethernet, typed)" ;;
    *) die2 "unknown preset '$1' (vm-shm, vm-measured, nvlink-ib, eth25)" ;;
  esac
}
set_preset "$preset"
need() { [ $# -ge 2 ] || die2 "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) need "$@"; nodes=$2; shift ;;
    --ranks-per-node) need "$@"; rpn=$2; shift ;;
    --intra-bw) need "$@"; intra_bw=$2; src_intra="given (--intra-bw/--intra-lat)"; shift ;;
    --intra-lat) need "$@"; intra_lat=$2; src_intra="given (--intra-bw/--intra-lat)"; shift ;;
    --inter-bw) need "$@"; inter_bw=$2; src_inter="given (--inter-bw/--inter-lat)"; shift ;;
    --inter-lat) need "$@"; inter_lat=$2; src_inter="given (--inter-bw/--inter-lat)"; shift ;;
    --preset) need "$@"; preset=$2; set_preset "$preset"; shift ;;
    --out) need "$@"; out=$2; shift ;;
    --cpus) need "$@"; cpus=$2; shift ;;
    --duplex) need "$@"; duplex=$2; shift ;;
    --cores) need "$@"; cores=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die2 "unknown argument '$1'" ;;
  esac
  shift
done
[ -n "$out" ] || die2 "--out PREFIX is required"
posint() { case "$2" in ''|*[!0-9]*|0) die2 "$1 must be a positive integer (got '$2')" ;; esac; }
posnum() { awk -v v="$2" 'BEGIN { exit !(v ~ /^[0-9]*\.?[0-9]+$/ && v + 0 > 0) }' || die2 "$1 must be a positive number (got '$2')"; }
posint --nodes "$nodes"
posint --ranks-per-node "$rpn"
posint --cpus "$cpus"
[ -z "$cores" ] || posint --cores "$cores"
# shared: a node's workers outnumber its cores, and share one host of them
[ -n "$cores" ] && [ $((rpn * cpus)) -gt "$cores" ] && shared=yes
case "$duplex" in full) share=' sharing_policy="SPLITDUPLEX"' up=' direction="UP"' down=' direction="DOWN"' ;;
  half) share= up= down= ;; *) die2 "--duplex must be full or half (got '$duplex')" ;; esac
posnum --intra-bw "$intra_bw"; posnum --inter-bw "$inter_bw"
posnum --intra-lat "$intra_lat"; posnum --inter-lat "$inter_lat"
awk -v a="$intra_lat" -v e="$inter_lat" 'BEGIN { exit !(e + 0 >= a + 0) }' ||
  die2 "the inter-node latency ($inter_lat us) must be at least the intra-node one ($intra_lat us): the inter-node path goes through the intra-node links"

# per-link latencies: rank link = intra/2, node link = (inter - intra)/2
hl=$(awk -v a="$intra_lat" 'BEGIN { printf "%.9gus", a / 2 }')
nl=$(awk -v a="$intra_lat" -v e="$inter_lat" 'BEGIN { printf "%.9gus", (e - a) / 2 }')
nr=$((nodes * rpn))
{
  echo "<?xml version='1.0'?>"
  echo '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">'
  echo '<platform version="4.1">'
  echo '<!-- bench/sim-platform.sh: '"$nodes node(s) x $rpn rank(s), $cpus CPU worker(s) per rank, links $duplex duplex; intra-node ${intra_bw} GB/s ${intra_lat} us ($src_intra); inter-node ${inter_bw} GB/s ${inter_lat} us ($src_inter)"' -->'
  echo '<zone id="starweave" routing="Full">'
  i=0
  while [ "$i" -lt "$nr" ]; do
    # rank i: the zone StarPU looks for (StarPU-MPI<rank>: its MAIN, CPU<k>
    # and RAM hosts) with the rank's SMPI host; its actors talk through the
    # rank's link
    z="StarPU-MPI$i"
    echo "  <zone id=\"$z\" routing=\"Full\">"
    hosts="$z-rank $z-MAIN $z-RAM"
    k=0
    while [ "$k" -lt "$cpus" ]; do hosts="$hosts $z-CPU$k"; k=$((k + 1)); done
    node=$((i / rpn))
    [ "$shared" = yes ] && [ $((i % rpn)) -eq 0 ] &&
      echo "    <host id=\"node$node-cores\" speed=\"$cpu_speed\" core=\"$cores\"/>"
    for h in $hosts; do
      case "$h" in *-CPU*) sp="$cpu_speed" ;; *) sp=1f ;; esac
      case "$shared $h" in "yes "*-CPU*)
        echo "    <host id=\"$h\" speed=\"$sp\"><prop id=\"starweave_cores\" value=\"node$node-cores\"/></host>" ;;
      *) echo "    <host id=\"$h\" speed=\"$sp\"/>" ;; esac
    done
    echo "    <router id=\"$z-gw\"/>"
    echo "    <link id=\"$z-local\" bandwidth=\"1000GBps\" latency=\"0\"/>"
    for h in $hosts; do
      echo "    <route src=\"$h\" dst=\"$z-gw\"><link_ctn id=\"$z-local\"/></route>"
      for h2 in $hosts; do
        [ "$h" \< "$h2" ] && echo "    <route src=\"$h\" dst=\"$h2\"><link_ctn id=\"$z-local\"/></route>"
      done
    done
    echo "  </zone>"
    i=$((i + 1))
  done
  i=0
  while [ "$i" -lt "$nr" ]; do
    echo "  <link id=\"rank$i-link\" bandwidth=\"${intra_bw}GBps\" latency=\"$hl\"$share/>"
    i=$((i + 1))
  done
  n=0
  while [ "$n" -lt "$nodes" ]; do
    echo "  <link id=\"node$n-link\" bandwidth=\"${inter_bw}GBps\" latency=\"$nl\"$share/>"
    n=$((n + 1))
  done
  # every pair of ranks: the two ranks' links, and between nodes the two
  # nodes' links (the node's link shared by its ranks, as a NIC is)
  awk -v nr="$nr" -v rpn="$rpn" -v up="$up" -v down="$down" 'BEGIN {
    for (a = 0; a < nr; a++) for (b = a + 1; b < nr; b++) {
      na = int(a / rpn); nb = int(b / rpn)
      printf "  <zoneRoute src=\"StarPU-MPI%d\" dst=\"StarPU-MPI%d\" gw_src=\"StarPU-MPI%d-gw\" gw_dst=\"StarPU-MPI%d-gw\">", a, b, a, b
      printf "<link_ctn id=\"rank%d-link\"%s/>", a, up
      if (na != nb) printf "<link_ctn id=\"node%d-link\"%s/><link_ctn id=\"node%d-link\"%s/>", na, up, nb, down
      printf "<link_ctn id=\"rank%d-link\"%s/></zoneRoute>\n", b, down
    } }'
  echo '</zone>'
  echo '</platform>'
} > "$out.xml"
n=0
: > "$out.hosts"
while [ "$n" -lt "$nodes" ]; do
  r=0
  while [ "$r" -lt "$rpn" ]; do echo "StarPU-MPI$((n * rpn + r))-rank" >> "$out.hosts"; r=$((r + 1)); done
  n=$((n + 1))
done
echo "platform: $nodes node(s) x $rpn rank(s) per node = $((nodes * rpn)) simulated rank(s): $out.xml, $out.hosts"
echo "platform: intra-node ${intra_bw} GB/s, ${intra_lat} us: $src_intra"
echo "platform: inter-node ${inter_bw} GB/s, ${inter_lat} us: $src_inter"
echo "platform: links $duplex duplex"
if [ "$shared" = yes ]; then
  echo "platform: cores: each node's $((rpn * cpus)) CPU workers share its $cores cores (--cores; calibrate with bench/calibrate.sh --cpu-time)"
else
  echo "platform: cores: a core per CPU worker${cores:+ (--cores $cores: enough for the node's $((rpn * cpus)))}"
fi
