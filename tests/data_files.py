#!/usr/bin/env python3
"""Writes tests/test_data.sh's data files into DIR, from the formats'
documented layouts (no download, standard library only):

  text.txt           a small text (the raw-bytes run)
  shard.bin          llm.c token shard of text.txt's bytes: 256 int32
                     header (20240520, 1, count), then uint16 tokens
  mega.bin/.idx      Megatron indexed dataset of the same tokens, uint16,
                     one sequence per line, a document per 3 sequences
  mega32.bin/.idx    the same with dtype int32, the sequences stored in
                     reverse order in the .bin (the pointers place them)
  wide.bin           llm.c shard with tokens up to 50256
  badmagic.bin       an llm.c header whose magic is 20240521: a corrupt
                     header, refused (test_data.sh also copies it to
                     badmagic.dat: refused as binary, a NUL byte)
  badversion.bin     llm.c magic, version 2
  big.bin            llm.c shard of the text with token 250 at position 17
  truncated.bin      llm.c shard missing its last token
  shortheader.bin    llm.c magic and 100 bytes: a truncated header
  float.bin/.idx     Megatron dataset with dtype float32 (code 7)
  noidx.bin          a .bin without its .idx (--data DIR/noidx)
  badidx.bin/.idx    an index whose magic is "MMIDIDY\0\0"
  shortidx.bin/.idx  an index missing its last 5 bytes
  v2.bin/.idx        an index of version 2
  nobin.idx          an index without its .bin
"""
import struct
import sys

LLMC_MAGIC = 20240520
MEGATRON_MAGIC = b"MMIDIDX\x00\x00"
# Megatron's DType codes: numpy type -> (code, struct format)
DTYPES = {"uint8": (1, "B"), "int8": (2, "b"), "int16": (3, "h"), "int32": (4, "i"),
          "int64": (5, "q"), "float64": (6, "d"), "float32": (7, "f"), "uint16": (8, "H")}


def llmc(path, tokens, version=1, count=None, cut=0):
    header = [0] * 256
    header[0], header[1] = LLMC_MAGIC, version
    header[2] = len(tokens) if count is None else count
    data = struct.pack("<256i", *header) + struct.pack("<%dH" % len(tokens), *tokens)
    with open(path, "wb") as f:
        f.write(data[:len(data) - cut])


def megatron(prefix, sequences, dtype="uint16", docs_every=3, reverse=False):
    code, fmt = DTYPES[dtype]
    size = struct.calcsize(fmt)
    order = list(range(len(sequences)))
    if reverse:
        order.reverse()
    pointers = [0] * len(sequences)
    with open(prefix + ".bin", "wb") as f:
        at = 0
        for i in order:
            pointers[i] = at
            f.write(struct.pack("<%d%s" % (len(sequences[i]), fmt), *sequences[i]))
            at += size * len(sequences[i])
    # document_indices: 0, then the index after each document's last sequence
    docs = [0] + [i for i in range(docs_every, len(sequences), docs_every)] + [len(sequences)]
    with open(prefix + ".idx", "wb") as f:
        f.write(MEGATRON_MAGIC)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", code))
        f.write(struct.pack("<Q", len(sequences)))
        f.write(struct.pack("<Q", len(docs)))
        f.write(struct.pack("<%di" % len(sequences), *[len(s) for s in sequences]))
        f.write(struct.pack("<%dq" % len(sequences), *pointers))
        f.write(struct.pack("<%dq" % len(docs), *docs))


def main():
    d = sys.argv[1]
    words = ["the", "task", "graph", "runs", "on", "every", "worker", "while", "tokens", "arrive",
             "from", "a", "shard", "of", "data"]
    lines, s = [], 7
    for _ in range(120):
        n = []
        for _ in range(4 + s % 6):
            s = (s * 1103515245 + 12345) % 2**31
            n.append(words[(s >> 16) % len(words)])
        lines.append(" ".join(n) + ".\n")
    text = "".join(lines).encode()
    with open(d + "/text.txt", "wb") as f:
        f.write(text)
    toks = list(text)
    llmc(d + "/shard.bin", toks)
    seqs = [list(line.encode()) for line in lines]
    assert sum(seqs, []) == toks
    megatron(d + "/mega", seqs)
    megatron(d + "/mega32", seqs, dtype="int32", reverse=True)
    llmc(d + "/wide.bin", [(i * 7919 + i // 3) % 50257 for i in range(4096)])
    with open(d + "/badmagic.bin", "wb") as f:
        f.write(struct.pack("<256i", LLMC_MAGIC + 1, 1, len(toks), *([0] * 253)))
        f.write(struct.pack("<%dH" % len(toks), *toks))
    llmc(d + "/badversion.bin", toks, version=2)
    big = toks[:]
    big[17] = 250
    llmc(d + "/big.bin", big)
    llmc(d + "/truncated.bin", toks, cut=2)
    with open(d + "/shortheader.bin", "wb") as f:
        f.write(struct.pack("<i", LLMC_MAGIC) + bytes(96))
    megatron(d + "/float", [[float(t) for t in s] for s in seqs], dtype="float32")
    with open(d + "/noidx.bin", "wb") as f:
        f.write(struct.pack("<%dH" % len(toks), *toks))
    with open(d + "/mega.idx", "rb") as f:
        idx = f.read()
    for name, data in (("badidx", b"MMIDIDY\x00\x00" + idx[9:]), ("shortidx", idx[:-5]),
                       ("v2", idx[:9] + struct.pack("<Q", 2) + idx[17:])):
        megatron(d + "/" + name, seqs)
        with open(d + "/" + name + ".idx", "wb") as f:
            f.write(data)
    with open(d + "/nobin.idx", "wb") as f:
        f.write(idx)


if __name__ == "__main__":
    main()
