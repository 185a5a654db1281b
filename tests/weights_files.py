#!/usr/bin/env python3
"""Weight files for tests/test_weights.sh, written and read from the formats'
documented layouts with struct and json only (no safetensors package), and a
PyTorch forward of GPT-2 and LLaMA under Hugging Face's conventions (Conv1D
[in, out] weights, rotate_half rotary positions, repeat_kv) as the oracle.

  make MODEL OUT --layers L --hidden H --heads A [--kv-heads K] [--ffn F] --vocab V
       --max-pos P [--seed S] [--format safetensors|llmc] [--dtype F32|BF16|F16]
       [--prefix transformer.] [--extra] [--drop NAME] [--bad-shape NAME] [--bad-dtype NAME]
       [--add NAME] [--version N] [--specials]
      random parameters (std 0.2: attention far from uniform), written as
      MODEL (gpt2, llama) in FORMAT; --extra adds GPT-2's causal-mask buffers;
      the --drop/--bad-* options make broken files; --specials (llm.c, F32)
      puts SPECIALS, fp32 values hard to round to bf16, at the start of wte
  data OUT --n N --vocab V [--seed S]       an llm.c token shard of N random tokens
  loss FILE MODEL --data D --seq T --batch B --heads A [--seed S] [--rope-theta X] [--out F]
      the mean cross-entropy of gpt_train's step-1 batch (its fill_batch) under
      the weights of FILE (either format), in float64: prints it
  same A B        every tensor of A equals B's of the same name (prefix
                  'transformer.' and skippable buffers ignored), bit for bit
  widened A B     A (F32) holds B's (BF16/F16) values widened exactly
  rounded A B     A, an llm.c bf16 checkpoint (version 5), is B, an fp32 one
                  (version 3), rounded: the same header but the version, and
                  each value B's rounded to nearest, ties to even (a NaN: a
                  NaN of the same sign), from the bits with numpy
  batch           the commands of stdin's lines, torch imported once; prints
                  "STATUS OUTPUT" per command
"""
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F

LLMC_MAGIC, LLMC_TOKENS = 20240326, 20240520
GPT2_LAYER = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
              "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
              "mlp.c_proj.weight", "mlp.c_proj.bias"]
LLMC_NAMES = ["ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw",
              "fcprojb"]
CONV1D = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}
# fp32 bit patterns whose bf16 rounding is easy to get wrong: ties to even
# (down, up, negative), just above and below a tie, subnormals (a tie to 0,
# a tie up, the largest rounding to the smallest normal), past the largest
# bf16 to +-inf, infinities, -0, NaNs (one whose rounding without the NaN
# case would carry into the sign: 0x7fffffff -> -0, 0xffffffff -> +0)
SPECIALS = [0x3f808000, 0x3f818000, 0xbf818000, 0x3f808001, 0x3f807fff, 0x00008000, 0x00018000, 0x007fffff,
            0x7f7fffff, 0xff7fffff, 0x7f7f7fff, 0x7f800000, 0xff800000, 0x80000000, 0x7fc00000, 0x7fffffff,
            0xffffffff, 0x7fc0ffff, 0xffc08000]


def opts(argv):
    o, pos, i = {}, [], 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            if a in ("--extra", "--specials"):
                o[a[2:]] = True
            else:
                o[a[2:]] = argv[i + 1]
                i += 1
        else:
            pos.append(a)
        i += 1
    return pos, o


# ---------------------------------------------------------------- parameters

def make_params(model, L, h, a, k, ffn, V, P, seed):
    """HF names and HF layouts (GPT-2's Conv1D weights [in, out])"""
    g = torch.Generator().manual_seed(seed)
    r = lambda *s, std=0.2: torch.randn(*s, generator=g, dtype=torch.float64).float() * std
    d = h // a
    p = {}
    if model == "gpt2":
        p["wte.weight"], p["wpe.weight"] = r(V, h), r(P, h)
        for l in range(L):
            n = "h.%d." % l
            p[n + "ln_1.weight"], p[n + "ln_1.bias"] = 1 + r(h, std=0.1), r(h, std=0.1)
            p[n + "attn.c_attn.weight"], p[n + "attn.c_attn.bias"] = r(h, 3 * h), r(3 * h, std=0.1)
            p[n + "attn.c_proj.weight"], p[n + "attn.c_proj.bias"] = r(h, h), r(h, std=0.1)
            p[n + "ln_2.weight"], p[n + "ln_2.bias"] = 1 + r(h, std=0.1), r(h, std=0.1)
            p[n + "mlp.c_fc.weight"], p[n + "mlp.c_fc.bias"] = r(h, ffn), r(ffn, std=0.1)
            p[n + "mlp.c_proj.weight"], p[n + "mlp.c_proj.bias"] = r(ffn, h, std=0.1), r(h, std=0.1)
        p["ln_f.weight"], p["ln_f.bias"] = 1 + r(h, std=0.1), r(h, std=0.1)
    else:
        p["model.embed_tokens.weight"] = r(V, h)
        for l in range(L):
            n = "model.layers.%d." % l
            p[n + "input_layernorm.weight"] = 1 + r(h, std=0.1)
            p[n + "self_attn.q_proj.weight"] = r(a * d, h)
            p[n + "self_attn.k_proj.weight"] = r(k * d, h)
            p[n + "self_attn.v_proj.weight"] = r(k * d, h)
            p[n + "self_attn.o_proj.weight"] = r(h, h)
            p[n + "post_attention_layernorm.weight"] = 1 + r(h, std=0.1)
            p[n + "mlp.gate_proj.weight"] = r(ffn, h)
            p[n + "mlp.up_proj.weight"] = r(ffn, h)
            p[n + "mlp.down_proj.weight"] = r(h, ffn, std=0.1)
        p["model.norm.weight"] = 1 + r(h, std=0.1)
        p["lm_head.weight"] = r(V, h)
    return p


def round_to(t, dtype):
    return t.to(torch.bfloat16 if dtype == "BF16" else torch.float16 if dtype == "F16" else torch.float32)


def raw_bytes(t, dtype):
    t = round_to(t.contiguous(), dtype)
    if dtype == "F32":
        return struct.pack("<%df" % t.numel(), *t.flatten().tolist())
    bits = t.flatten().view(torch.int16).tolist()
    return struct.pack("<%dh" % len(bits), *bits)


def write_safetensors(path, tensors, dtypes=None):
    """tensors: name -> float tensor; dtypes: name -> dtype string (default F32)"""
    dtypes = dtypes or {}
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        dt = dtypes.get(name, "F32")
        b = raw_bytes(t, dt if dt in ("F32", "BF16", "F16") else "F32")
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    js = json.dumps(header).encode()
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js + b"".join(blobs))


def write_llmc(path, p, L, a, P, V, dtype="F32", version=None):
    """llm.c's gpt2 checkpoint: header, then wte (Vp rows, padding 0), wpe, the layer tensors stacked, lnf"""
    h = p["wte.weight"].shape[1]
    Vp = (V + 127) // 128 * 128
    hd = [LLMC_MAGIC, version or (3 if dtype == "F32" else 5), P, V, L, a, h, Vp] + [0] * 248
    out = [struct.pack("<256i", *hd)]
    wte = torch.zeros(Vp, h)
    wte[:V] = p["wte.weight"]
    out += [raw_bytes(wte, dtype), raw_bytes(p["wpe.weight"], dtype)]
    for k, name in enumerate(GPT2_LAYER):
        for l in range(L):
            t = p["h.%d.%s" % (l, name)]
            out.append(raw_bytes(t.t() if name in CONV1D else t, dtype))  # llm.c: nn.Linear's [out, in]
    out += [raw_bytes(p["ln_f.weight"], dtype), raw_bytes(p["ln_f.bias"], dtype)]
    with open(path, "wb") as f:
        f.write(b"".join(out))


# ------------------------------------------------------------------ reading

def from_bytes(b, dtype, shape):
    n = math.prod(shape)
    if dtype == "F32":
        t = torch.tensor(struct.unpack("<%df" % n, b), dtype=torch.float32)
    else:
        t = torch.tensor(struct.unpack("<%dh" % n, b), dtype=torch.int16)
        t = t.view(torch.bfloat16 if dtype == "BF16" else torch.float16).float()
    return t.reshape(shape)


def read_file(path):
    """-> (format, {name: tensor}, extra): safetensors names as stored; llm.c as HF GPT-2 names and layouts"""
    data = open(path, "rb").read()
    if struct.unpack("<i", data[:4])[0] == LLMC_MAGIC:
        _, ver, P, V, L, a, h, Vp = struct.unpack("<8i", data[:32])
        dt, es = ("F32", 4) if ver == 3 else ("BF16", 2)
        at = 1024
        def take(*shape):
            nonlocal at
            n = math.prod(shape) * es
            t = from_bytes(data[at:at + n], dt, list(shape))
            at += n
            return t
        p = {"wte.weight": take(Vp, h)[:V], "wpe.weight": take(P, h)}
        F4 = 4 * h
        shapes = [(h,), (h,), (3 * h, h), (3 * h,), (h, h), (h,), (h,), (h,), (F4, h), (F4,), (h, F4), (h,)]
        for k, name in enumerate(GPT2_LAYER):
            for l in range(L):
                t = take(*shapes[k])
                p["h.%d.%s" % (l, name)] = t.t().contiguous() if name in CONV1D else t
        p["ln_f.weight"], p["ln_f.bias"] = take(h), take(h)
        assert at == len(data), "llm.c file size"
        return "llmc", p, {"heads": a, "dtypes": {n: dt for n in p}}
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    p, dtypes = {}, {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b0, b1 = e["data_offsets"]
        p[name] = from_bytes(data[8 + n + b0:8 + n + b1], e["dtype"], e["shape"])
        dtypes[name] = e["dtype"]
    return "safetensors", p, {"dtypes": dtypes}


def canonical(p):
    return {k[12:] if k.startswith("transformer.") else k: v for k, v in p.items()
            if not (k.endswith(".attn.bias") or k.endswith(".attn.masked_bias"))}


# ------------------------------------------------------------------ oracle

def batch(data_path, seq, B, seed, step=1):
    """gpt_train's fill_batch: sequence b of step `step` starts at a hash of (seed, step, b)"""
    raw = open(data_path, "rb").read()
    hd = struct.unpack("<256i", raw[:1024])
    assert hd[0] == LLMC_TOKENS
    toks = list(struct.unpack("<%dH" % hd[2], raw[1024:1024 + 2 * hd[2]]))
    M = (1 << 64) - 1
    span = len(toks) - seq - 1
    tok, tgt = torch.zeros(B, seq, dtype=torch.long), torch.zeros(B, seq, dtype=torch.long)
    for b in range(B):
        s = (((seed + 1) * 0x9E3779B97F4A7C15) & M) ^ ((step << 20) | b)
        s ^= s >> 31
        s = (s * 0xBF58476D1CE4E5B9) & M
        s ^= s >> 27
        start = s % (span + 1)
        tok[b] = torch.tensor(toks[start:start + seq])
        tgt[b] = torch.tensor(toks[start + 1:start + seq + 1])
    return tok, tgt


def attention(q, k, v):  # [B, n, T, d], causal
    T, d = q.shape[2], q.shape[3]
    s = q @ k.transpose(-1, -2) / math.sqrt(d)
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return torch.softmax(s, -1) @ v


def gpt2_loss(p, tok, tgt, heads, eps=1e-5):
    """Hugging Face GPT2LMHeadModel's forward: Conv1D y = x W + b, tanh GELU, tied head"""
    p = {k: v.double() for k, v in p.items()}
    B, T = tok.shape
    h = p["wte.weight"].shape[1]
    d = h // heads
    L = len([k for k in p if k.endswith(".ln_1.weight")])
    x = p["wte.weight"][tok] + p["wpe.weight"][:T]
    ln = lambda x, n: F.layer_norm(x, (h,), p[n + ".weight"], p[n + ".bias"], eps)
    conv = lambda x, n: x @ p[n + ".weight"] + p[n + ".bias"]
    for l in range(L):
        n = "h.%d." % l
        qkv = conv(ln(x, n + "ln_1"), n + "attn.c_attn")
        q, k, v = (t.reshape(B, T, heads, d).transpose(1, 2) for t in qkv.split(h, -1))
        y = attention(q, k, v).transpose(1, 2).reshape(B, T, h)
        x = x + conv(y, n + "attn.c_proj")
        m = F.gelu(conv(ln(x, n + "ln_2"), n + "mlp.c_fc"), approximate="tanh")
        x = x + conv(m, n + "mlp.c_proj")
    logits = ln(x, "ln_f") @ p["wte.weight"].t()
    return F.cross_entropy(logits.reshape(B * T, -1), tgt.reshape(-1)).item()


def rotate_half(x):
    x1, x2 = x.chunk(2, -1)
    return torch.cat((-x2, x1), -1)


def llama_loss(p, tok, tgt, heads, theta, eps=1e-5):
    """Hugging Face LlamaForCausalLM's forward: RMSNorm, rotate_half rotary, repeat_kv, SwiGLU, untied head"""
    B, T = tok.shape
    h = p["model.embed_tokens.weight"].shape[1]
    d = h // heads
    kvh = p["model.layers.0.self_attn.k_proj.weight"].shape[0] // d
    L = len([k for k in p if k.endswith(".input_layernorm.weight")])
    # the angles rounded as fp32 (as starweave and HF in fp32 compute them), the rest in float64
    inv = (1.0 / (torch.tensor(theta, dtype=torch.float32) ** (torch.arange(0, d, 2, dtype=torch.float32) / d)))
    ang = (torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]).double()
    cos, sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()
    p = {k: v.double() for k, v in p.items()}
    rms = lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    lin = lambda x, n: x @ p[n + ".weight"].t()
    x = p["model.embed_tokens.weight"][tok]
    for l in range(L):
        n = "model.layers.%d." % l
        a = rms(x, p[n + "input_layernorm.weight"])
        q = lin(a, n + "self_attn.q_proj").reshape(B, T, heads, d).transpose(1, 2)
        k = lin(a, n + "self_attn.k_proj").reshape(B, T, kvh, d).transpose(1, 2)
        v = lin(a, n + "self_attn.v_proj").reshape(B, T, kvh, d).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(heads // kvh, 1), v.repeat_interleave(heads // kvh, 1)
        y = attention(q, k, v).transpose(1, 2).reshape(B, T, h)
        x = x + lin(y, n + "self_attn.o_proj")
        m = rms(x, p[n + "post_attention_layernorm.weight"])
        x = x + lin(F.silu(lin(m, n + "mlp.gate_proj")) * lin(m, n + "mlp.up_proj"), n + "mlp.down_proj")
    head = p.get("lm_head.weight", p["model.embed_tokens.weight"])  # tie_word_embeddings: no lm_head
    logits = rms(x, p["model.norm.weight"]) @ head.t()
    return F.cross_entropy(logits.reshape(B * T, -1), tgt.reshape(-1)).item()


# ------------------------------------------------------------------- main

def main(argv):
    cmd, (pos, o) = argv[0], opts(argv[1:])
    if cmd == "batch":  # one command per line of stdin (torch imported once): "STATUS OUTPUT" per line
        import contextlib, io, shlex
        for line in sys.stdin:
            if not line.strip():
                continue
            out, rc = io.StringIO(), 0
            with contextlib.redirect_stdout(out):
                try:
                    main(shlex.split(line))
                except SystemExit as e:
                    rc = e.code if isinstance(e.code, int) else 1
                    if isinstance(e.code, str):
                        print(e.code)
            print(rc, out.getvalue().strip().replace("\n", "; "), flush=True)
        return
    if cmd == "make":
        model, out = pos
        L, h, a, V, P = (int(o[k]) for k in ("layers", "hidden", "heads", "vocab", "max-pos"))
        k = int(o.get("kv-heads", a))
        ffn = int(o.get("ffn", 4 * h))
        p = make_params(model, L, h, a, k, ffn, V, P, int(o.get("seed", 1)))
        dtype = o.get("dtype", "F32")
        if o.get("format", "safetensors") == "llmc":
            write_llmc(out, p, L, a, P, V, dtype, int(o["version"]) if "version" in o else None)
            if o.get("specials"):  # over wte's first values (the data starts after the 1024-byte header)
                assert dtype == "F32"
                with open(out, "r+b") as f:
                    f.seek(1024)
                    f.write(struct.pack("<%dI" % len(SPECIALS), *SPECIALS))
            return
        if "bad-shape" in o:  # a vector as [1, n], a matrix transposed
            t = p[o["bad-shape"]]
            p[o["bad-shape"]] = t.reshape(1, -1) if t.dim() == 1 else t.t().contiguous()
        if "add" in o:
            p[o["add"]] = torch.ones(4)
        if "drop" in o:
            del p[o["drop"]]
        dtypes = {n: dtype for n in p}
        if "bad-dtype" in o:
            dtypes[o["bad-dtype"]] = "F64"
        if "prefix" in o:
            p = {o["prefix"] + n: t for n, t in p.items()}
            dtypes = {o["prefix"] + n: t for n, t in dtypes.items()}
        if o.get("extra"):
            for l in range(L):
                name = o.get("prefix", "") + "h.%d.attn.bias" % l
                p[name] = torch.tril(torch.ones(1, 1, P, P))
                dtypes[name] = "F32"
        write_safetensors(out, p, dtypes)
    elif cmd == "data":
        n, V = int(o["n"]), int(o["vocab"])
        g = torch.Generator().manual_seed(int(o.get("seed", 7)))
        toks = torch.randint(0, V, (n,), generator=g).tolist()
        with open(pos[0], "wb") as f:
            f.write(struct.pack("<256i", LLMC_TOKENS, 1, n, *([0] * 253)) + struct.pack("<%dH" % n, *toks))
    elif cmd == "loss":
        path, model = pos
        _, p, extra = read_file(path)
        p = canonical(p)
        tok, tgt = batch(o["data"], int(o["seq"]), int(o["batch"]), int(o.get("seed", 1234)))
        heads = int(o["heads"])
        if model == "gpt2":
            loss = gpt2_loss(p, tok, tgt, heads)
        else:
            loss = llama_loss(p, tok, tgt, heads, float(o.get("rope-theta", 10000)))
        print("%.9g" % loss)
        if "out" in o:
            open(o["out"], "w").write("%.9g\n" % loss)
    elif cmd == "same":
        _, a, _ = read_file(pos[0])
        _, b, _ = read_file(pos[1])
        a, b = canonical(a), canonical(b)
        bad = sorted(set(a) ^ set(b)) + [n for n in a if n in b and
                                         (a[n].shape != b[n].shape or not torch.equal(a[n], b[n]))]
        print("same: %d tensors, %d differ%s" % (len(a), len(bad), (": " + ", ".join(bad[:5])) if bad else ""))
        sys.exit(1 if bad else 0)
    elif cmd == "widened":
        _, a, ea = read_file(pos[0])
        _, b, eb = read_file(pos[1])
        a, b = canonical(a), canonical(b)
        bad = [n for n in b if n not in a or not torch.equal(a[n], b[n].float())]
        kinds = sorted(set(eb.get("dtypes", {}).values()))
        print("widened: %d tensors of %s, %d differ%s" % (len(b), "/".join(kinds), len(bad),
                                                          (": " + ", ".join(bad[:5])) if bad else ""))
        sys.exit(1 if bad or not all(v == "F32" for v in ea.get("dtypes", {}).values()) else 0)
    elif cmd == "rounded":
        import numpy as np
        a, b = open(pos[0], "rb").read(), open(pos[1], "rb").read()
        ha, hb = struct.unpack("<256i", a[:1024]), struct.unpack("<256i", b[:1024])
        if ha[0] != LLMC_MAGIC or ha[1] != 5 or hb[0] != LLMC_MAGIC or hb[1] != 3:
            sys.exit("rounded: magic, version %d, %d: not 5 (bf16) and 3 (fp32)" % (ha[1], hb[1]))
        if ha[2:] != hb[2:]:
            sys.exit("rounded: headers differ: maxT V L NH C Vp %s, %s" % (ha[2:8], hb[2:8]))
        P, V, L, NH, C, Vp = ha[2:8]
        n = Vp * C + P * C + L * (12 * C * C + 13 * C) + 2 * C  # llm.c's GPT-2 parameters
        if len(a) != 1024 + 2 * n or len(b) != 1024 + 4 * n:
            sys.exit("rounded: %d and %d bytes, not 1024 + %d values of 2 and of 4 bytes" % (len(a), len(b), n))
        u = np.frombuffer(b, "<u4", offset=1024).astype(np.uint64)
        h = np.frombuffer(a, "<u2", offset=1024).astype(np.uint64)
        nan = (u & 0x7fffffff) > 0x7f800000
        hi, rem = u >> 16, u & 0xffff
        up = (rem > 0x8000) | ((rem == 0x8000) & (hi & 1 == 1))  # past half, or a tie with an odd upper half
        want = hi + up
        nan_ok = ((h & 0x7f80) == 0x7f80) & ((h & 0x7f) != 0) & ((h >> 15) == (u >> 31))
        bad = np.where(nan, ~nan_ok, h != want)
        ties = int(((rem == 0x8000) & ~nan).sum())
        inf = int(((want & 0x7fff) == 0x7f80).sum())
        print("rounded: version 5, maxT %d V %d L %d NH %d C %d Vp %d, %d values (%d ties, %d NaN, %d inf, %d rounded "
              "up), %d differ%s" % (P, V, L, NH, C, Vp, n, ties, int(nan.sum()), inf, int((up & ~nan).sum()),
                                    int(bad.sum()), "" if not bad.any() else ": first at value %d: %08x -> %04x" % (
                                        int(np.argmax(bad)), int(u[np.argmax(bad)]), int(h[np.argmax(bad)]))))
        sys.exit(1 if bad.any() else 0)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
