#!/bin/sh
# gpt_train --data in every format (examples/data.c), from files that
# tests/data_files.py writes from the formats' documented layouts: a small
# text as raw bytes, as an llm.c token shard, and as Megatron indexed
# datasets (uint16; int32 with its sequences stored out of order), named by
# PREFIX, PREFIX.bin and PREFIX.idx. The same token stream gives the same
# batches: 3 steps' logged losses equal the raw-bytes run's bit for bit, on
# one rank and with dp 2. A shard of tokens up to 50256 trains with --vocab
# 50257. Refused, exit 2 on every rank of 2, the rule printed once: an llm.c
# header with another magic (a corrupt header: named .bin, and the same
# bytes named .dat, binary by its NUL bytes) -- never read as raw bytes;
# llm.c version 2, a token at or above
# the vocabulary (llm.c and Megatron), a shard shorter than its header's
# count, a truncated header, a float Megatron dtype, a .bin without its .idx,
# an index of another magic, truncated, of version 2, without its .bin.
# SW_TEST_ONLY (tests/mutants.sh) selects: "same losses", "bad input".
. "${top_srcdir:-.}/tests/common.sh"
D="$TMPD/data"
mkdir "$D"
if ! command -v python3 > /dev/null 2>&1; then
  echo "SKIP: python3 not found (it writes the data files; Debian: apt-get install python3)"
  exit 77
fi
if ! python3 "$top_srcdir/tests/data_files.py" "$D"; then
  echo "FAIL tests/data_files.py could not write the data files"
  exit 1
fi
ARGS="--layers 1 --hidden 64 --heads 2 --seq 32 --batch 4 --steps 3"
train() { # train NP NAME ARGS...: gpt_train 3 steps, log in $TMPD/NAME.csv, output in $TMPD/NAME.out; exit status
  np=$1; name=$2; shift 2
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" "$np" "$GPT_TRAIN" $ARGS --log "$TMPD/$name.csv" "$@" > "$TMPD/$name.out" 2>&1
}
losses() { # losses NAME -> the loss column of the log, one line per step
  tail -n +2 "$TMPD/$1.csv" 2>/dev/null | cut -d, -f2
}
for np in 1 2; do
  want "same losses np=$np" || continue
  dp=; [ "$np" = 2 ] && dp="--dp 2"
  train "$np" "raw$np" --data "$D/text.txt" $dp
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/raw$np.out"
  check "np=$np $dp raw bytes: exit $rc, losses $(losses "raw$np" | tr '\n' ' ')" \
    [ "$rc" = 0 -a "$(losses "raw$np" | wc -l)" = 3 ]
  for f in shard.bin mega mega.bin mega32.idx; do
    name="$(echo "$f" | tr -d .)$np"
    train "$np" "$name" --data "$D/$f" $dp
    rc=$?
    [ "$rc" = 0 ] || cat "$TMPD/$name.out"
    format=$(sed -n 's/.*, data [^ ]* (\([^,]*\),.*/\1/p' "$TMPD/$name.out")
    check "np=$np $dp $f ($format): exit $rc, losses equal the raw bytes' bit for bit ($(losses "$name" | tr '\n' ' '))" \
      [ "$rc" = 0 -a "$(losses "$name")" = "$(losses "raw$np")" ]
  done
done
if want "same losses: tokens beyond a byte"; then
  train 1 wide --data "$D/wide.bin" --vocab 50257
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/wide.out"
  finite=$(losses wide | awk '$1 + 0 == $1 && $1 > 0 && $1 < 20 { n++ } END { print n + 0 }')
  check "llm.c shard of tokens up to 50256, --vocab 50257: exit $rc, losses $(losses wide | tr '\n' ' ')(finite: $finite of 3)" \
    [ "$rc" = 0 -a "$finite" = 3 ]
fi
B="--layers 1 --hidden 64 --heads 2 --seq 32 --batch 4"
# a corrupt llm.c header (magic 20240521): by its name, and by its bytes
expect_bad 2 "data file '$D/badmagic.bin' is named .bin but has no known header (its first 4 bytes as int32: 20240521;" \
  $B --data "$D/badmagic.bin"
cp "$D/badmagic.bin" "$D/badmagic.dat"
expect_bad 2 "data file '$D/badmagic.dat' has no known header and is not text (a NUL byte at offset 5)" \
  $B --data "$D/badmagic.dat"
expect_bad 2 "'$D/badversion.bin' is an llm.c token shard (magic 20240520) of version 2: only version 1 (uint16 tokens) is read" \
  $B --data "$D/badversion.bin"
expect_bad 2 "token 250 at position 17 of the data '$D/big.bin' (llm.c token shard) must be below vocab (200)" \
  $B --vocab 200 --data "$D/big.bin"
expect_bad 2 "token 116 at position 5 of the data '$D/mega.bin' (Megatron indexed dataset, uint16) must be below vocab (112)" \
  $B --vocab 112 --data "$D/mega"
expect_bad 2 "'$D/truncated.bin' is an llm.c token shard whose header counts 4025 tokens (1024 + 2 x 4025 bytes) but it has 9072 bytes" \
  $B --data "$D/truncated.bin"
expect_bad 2 "'$D/shortheader.bin' begins with llm.c's magic 20240520 but its header is truncated: 100 bytes" \
  $B --data "$D/shortheader.bin"
expect_bad 2 "Megatron index '$D/float.idx' has dtype code 7 (float32): tokens must be integers" \
  $B --data "$D/float.bin"
expect_bad 2 "Megatron dataset '$D/noidx': '$D/noidx.bin' has no index '$D/noidx.idx' beside it" \
  $B --data "$D/noidx"
expect_bad 2 "cannot open data file '$D/badidx', and '$D/badidx.idx' beside it is not a Megatron index" \
  $B --data "$D/badidx"
expect_bad 2 "Megatron index '$D/shortidx.idx' counts 120 sequences and 41 documents, so it must have 34 + 12 x 120 + 8 x 41 bytes (+ 120 for sequence modes), but it has 1797" \
  $B --data "$D/shortidx.idx"
expect_bad 2 "Megatron index '$D/v2.idx' has version 2: only version 1 is read" $B --data "$D/v2.bin"
expect_bad 2 "cannot open data file '$D/nobin.bin' (the tokens of the Megatron index '$D/nobin.idx')" \
  $B --data "$D/nobin"
finish
