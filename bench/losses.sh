#!/bin/sh
# The losses gpt_train prints (to 9 significant digits) for the layouts a
# rewrite of the model code must leave bit-identical: run it before and
# after, and diff the two outputs. Each line ends with a digest of every
# rank's checkpoint tensors after the last step (parameters and AdamW
# moments, without the file's header and table, so that checkpoint formats
# 02, 03 and 04 compare), so the diff also catches a change that has not
# reached the losses yet.
#   sh bench/losses.sh [BUILD_DIR] > losses.txt
# Every run: 2 layers, hidden 64, 4 heads, seq 32, batch 8, dropout 0.1,
# 4 steps (a few seconds each).
set -u
build=${1:-build}
prog=$build/examples/gpt_train
here=$(dirname "$0")
[ -x "$prog" ] || { echo "losses.sh: $prog not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base="--layers 2 --hidden 64 --heads 4 --seq 32 --batch 8 --dropout 0.1 --steps 4 --quiet"
# the tensor bytes of each checkpoint file named on stdin: between the
# header (format 02: 80 bytes; 03: 672 bytes + 64 per parameter; 04: 672
# bytes + 3 x 192 per parameter held; 05: the same with an 680-byte header
# (the save id), the count in the header field
# "parameters") and the 8-byte checksum
tensors='
import struct, sys
for path in sys.stdin.read().split():
    d = open(path, "rb").read()
    if d[:8] == b"SWCKPT02":
        off = 80
    else:
        n = struct.unpack_from("<i", d, 8)[0]
        fields = {d[24 + 40 * i:56 + 40 * i].split(b"\0")[0]: struct.unpack_from("<q", d, 56 + 40 * i)[0] for i in range(n)}
        off = (680 if d[:8] == b"SWCKPT05" else 672) + (64 if d[:8] == b"SWCKPT03" else 3 * 192) * fields[b"parameters"]
    sys.stdout.buffer.write(d[off:-8])
'
status=0
run() { # NP NAME ARGS...
  np=$1 name=$2; shift 2
  rm -rf "$tmp/ck"
  SW_TEST_TIMEOUT=300 sh "$here/../tests/mpi_launch.sh" "$np" "$prog" $base --log "$tmp/log.csv" \
    --save "$tmp/ck" "$@" \
    > "$tmp/out" 2>&1 || { echo "$name: exit $?"; cat "$tmp/out"; status=1; return; }
  digest=$(find "$tmp/ck" -type f -name '*.ckpt' | LC_ALL=C sort | python3 -c "$tensors" | md5sum | cut -c1-12)
  printf '%-28s %s ckpt %s\n' "$name" "$(tail -n +2 "$tmp/log.csv" | cut -d, -f2 | tr '\n' ' ')" "$digest"
}
run 1 "1 rank"
run 2 "tp2+sp" --tp 2 --sp
run 2 "tp2+sp kv1 (replicated)" --tp 2 --sp --kv-heads 1
run 4 "ulysses2 x ring2" --ulysses 2 --ring 2
run 2 "ring2 no-zigzag" --ring 2 --no-zigzag
run 2 "dp2+zero1" --dp 2 --zero 1
run 2 "dp2 grad-accum2" --dp 2 --grad-accum 2
run 1 "recompute full" --recompute full
run 1 "recompute none" --recompute none
run 1 "offload" --offload
run 2 "tp2+sp recompute-allgather" --tp 2 --sp --tp-recompute-allgather
run 1 "bf16" --dtype bf16
run 2 "tp2+sp bf16" --tp 2 --sp --dtype bf16
run 2 "dp2+zero1 bf16" --dp 2 --zero 1 --dtype bf16
exit $status
