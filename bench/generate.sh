#!/bin/sh
# Decode speed (generation with a KV cache, docs/running.md#generation):
# W124 (GPT-2 124M, fp32) continues a 64-token prompt by N tokens, greedy,
# batch 1 -- gpt_train --generate on 1 rank (2 CPU workers, no mpirun) and
# with tp 2 (2 ranks under mpirun, one worker each) -- beside
#   (a) the memory floor: the bytes a decode step must read (every weight
#       once, and the KV cache of the positions so far, at the mean
#       position) over the read bandwidth measured in the same run (a
#       256 MiB sum, PyTorch on 2 threads);
#   (b) PyTorch decoding the same model with a KV cache (bench/torch_gpt.py
#       --decode, 2 threads);
# and, for tp 2, the time of the all-reduces a token needs (2 per block and
# the embedding's, 768 floats each, plus the candidates' all-gather) from
# examples/collectives on the same 2 ranks, as a share of the token.
# usage: bench/generate.sh [N]   (N new tokens, 64; run from the build directory or set BUILD)
set -eu
N=${1:-64}
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
[ -x "$BUILD/examples/gpt_train" ] || { echo "generate.sh: run from the build directory (or set BUILD)" >&2; exit 2; }
. "$here/common.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shape="--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4 --max-pos 1024"
P=64
prompt=$(seq 100 $((100 + P - 1)) | tr '\n' ' ')
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); prompt $P tokens, $N new"
# the parameters: W124's initial values as a weight file (decode speed does not depend on the values; a
# weight file, not a checkpoint, loads under tp 2, whose padded vocabulary differs)
"$BUILD/examples/gpt_train" $shape --steps 0 --save-weights "$tmp/w124.safetensors" --quiet > "$tmp/out" 2>&1 \
  || { cat "$tmp/out"; exit 1; }
# 1 rank without mpirun (which would bind it, its 2 workers and StarPU-MPI's thread, to one core)
gen="--load-weights $tmp/w124.safetensors --sample-len $((N + 1)) --sample-temperature 0"
"$BUILD/examples/gpt_train" $shape --ncpus 2 $gen --generate "$prompt" > "$tmp/gen1" 2>&1 || { cat "$tmp/gen1"; exit 1; }
sh "$here/../tests/mpi_launch.sh" 2 "$BUILD/examples/gpt_train" $shape --tp 2 $gen --generate "$prompt" > "$tmp/gen2" 2>&1 \
  || { cat "$tmp/gen2"; exit 1; }
for np in 1 2; do echo "starweave tp $np: $(grep '^generate:' "$tmp/gen$np")"; done
"$TORCH_PYTHON" "$here/torch_gpt.py" --decode "$N" --prompt "$P" --threads 2 > "$tmp/torch" 2>&1 || { cat "$tmp/torch"; exit 1; }
sed -n 's/^\(torch_[a-z_]*\) \(.*\)/pytorch: \1 \2/p' "$tmp/torch"
sh "$here/../tests/mpi_launch.sh" 2 "$BUILD/examples/collectives" --sizes 0.0029296875 --iters 50 --no-gather \
  > "$tmp/coll" 2>&1 || { cat "$tmp/coll"; exit 1; }
python3 - "$tmp" "$P" "$N" <<'PY'
import re, sys
tmp, P, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
L, C, V, Vp, maxpos = 12, 768, 50257, 50304, 1024
params = Vp * C + maxpos * C + L * (12 * C * C + 13 * C) + 2 * C       # W124's fp32 parameters
kv = 2 * L * (P + N / 2) * C                                         # keys and values up to the mean position
bw = float(re.search(r"torch_read_GBps ([0-9.]+)", open(tmp + "/torch").read()).group(1))
floor = 4 * (params + kv) / (bw * 1e9) * 1e3
def decode(f):
    m = re.search(r"decode \d+ tokens ([0-9.]+) ms/token", open(f).read())
    return float(m.group(1))
def prefill(f):
    return float(re.search(r"\(([0-9.]+) tokens/s\)", open(f).read()).group(1))
torch = float(re.search(r"torch_decode_ms_per_token ([0-9.]+)", open(tmp + "/torch").read()).group(1))
coll = open(tmp + "/coll").read()
m = re.search(r"^allreduce\s+starweave \(graph\)\s+(\d+)\s+([0-9.]+)", coll, re.M)
print("floor: %.1f MB of weights + %.1f MB of KV cache per token at %.1f GB/s = %.1f ms/token"
      % (4 * params / 1e6, 4 * kv / 1e6, bw, floor))
for np in (1, 2):
    d = decode("%s/gen%d" % (tmp, np))
    print("starweave tp %d: prefill %.0f tokens/s, decode %.2f ms/token = %.2fx the floor, %.2fx PyTorch's %.2f"
          % (np, prefill("%s/gen%d" % (tmp, np)), d, d / floor, d / torch, torch))
if m:
    per, n = float(m.group(2)), 2 * L + 2
    print("tp 2: all-reduces of %s bytes at %.3f ms each (examples/collectives, median), %d per token: %.2f ms, "
          "%.1f%% of the token" % (m.group(1), per, n, n * per, 100 * n * per / decode("%s/gen2" % tmp)))
PY
