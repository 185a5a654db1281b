#!/usr/bin/env python3
"""PyTorch timing peer for the starweave GPT-2 benchmark (W124 by default).

Same architecture as graphs/models/gpt.c: learned positions, pre-LN blocks, fused
qkv projection (columns [q | k | v]), causal attention (grouped-query with
--kv-heads < --heads: K/V heads repeat_interleave'd to the query heads), 4h
tanh-GELU MLP, tied LM head over the
vocabulary padded to a multiple of 128, mean cross-entropy over the real
vocabulary, AdamW on every parameter; fp32 on the CPU, or with --dtype bf16
under CPU autocast (bf16 linears and matmuls, fp32 parameters, norms,
softmax and loss). Tokens are random (the same batch every step), or with
--data FILE windows of the file's bytes drawn per step exactly as gpt_train
--data FILE draws them (same --seed: the same batches, not the same initial
values).

Prints one line per step ("step k loss L ms T") and finally
"torch_ms_per_step <median over the steps after the first>".

With --decode N (no training): the same model's inference with a KV cache,
batch 1, in torch.no_grad(): the --prompt P random tokens in one forward
(prefill), then N greedy tokens one position at a time, each layer
appending its keys and values to its cache; prints "torch_prefill_ms",
"torch_prefill_tokens_per_s" and "torch_decode_ms_per_token" (median over
the decode steps after the first) and the read bandwidth of a 256 MiB sum
on the same threads ("torch_read_GBps", for the memory floor).

Usage: torch_gpt.py [--layers 12] [--hidden 768] [--heads 12] [--kv-heads 0] [--vocab 50257]
                    [--max-pos 1024] [--seq 64] [--batch 4] [--steps 6]
                    [--threads 2] [--dropout 0.0] [--seed 1234] [--dtype fp32|bf16]
                    [--lr 3e-4] [--beta2 0.95] [--weight-decay 0.1] [--data FILE]
                    [--decode N --prompt P]
"""
import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def build_params(a, vp, gen):
    C, L = a.hidden, a.layers
    CQ = (a.heads + 2 * a.kv_heads) * (C // a.heads)                      # qkv width; 3C without GQA

    def normal(*shape, std=0.02):
        return torch.empty(*shape).normal_(0.0, std, generator=gen)

    wte = normal(vp, C)
    wte[a.vocab:] = 0.0
    P = [wte, normal(a.max_pos, C)]
    rstd = 0.02 / math.sqrt(2 * L)
    for _ in range(L):
        P += [torch.ones(C), torch.zeros(C),
              normal(CQ, C), torch.zeros(CQ),
              normal(C, C, std=rstd), torch.zeros(C),
              torch.ones(C), torch.zeros(C),
              normal(4 * C, C), torch.zeros(4 * C),
              normal(C, 4 * C, std=rstd), torch.zeros(C)]
    P += [torch.ones(C), torch.zeros(C)]
    return [p.requires_grad_(True) for p in P]


def forward(a, P, tokens, targets, mask, pos):
    C, NH, KV, S, B, L = a.hidden, a.heads, a.kv_heads, a.seq, a.batch, a.layers
    D, T, p = C // NH, S * B, a.dropout
    wte, wpe = P[0], P[1]
    x = F.dropout(wte[tokens] + wpe[pos], p, training=p > 0)
    for l in range(L):
        (ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b,
         ln2_w, ln2_b, fc_w, fc_b, fc2_w, fc2_b) = P[2 + 12 * l: 2 + 12 * (l + 1)]
        h = F.layer_norm(x, (C,), ln1_w, ln1_b, a.ln_eps)
        qkv = F.linear(h, qkv_w, qkv_b)                                    # [T, (NH + 2 KV) D], rows [s, b]
        q = qkv[:, :C].reshape(S, B, NH, D).permute(1, 2, 0, 3)
        k, v = (qkv[:, C + i * KV * D:C + (i + 1) * KV * D].reshape(S, B, KV, D).permute(1, 2, 0, 3)
                for i in range(2))
        if KV != NH:                                                       # query head j: K/V head j // (NH/KV)
            k, v = k.repeat_interleave(NH // KV, dim=1), v.repeat_interleave(NH // KV, dim=1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        att = F.dropout(att, p, training=p > 0)
        o = (att @ v).permute(2, 0, 1, 3).reshape(T, C)
        x = x + F.dropout(F.linear(o, proj_w, proj_b), p, training=p > 0)
        h = F.layer_norm(x, (C,), ln2_w, ln2_b, a.ln_eps)
        h = F.gelu(F.linear(h, fc_w, fc_b), approximate="tanh")
        x = x + F.dropout(F.linear(h, fc2_w, fc2_b), p, training=p > 0)
    x = F.layer_norm(x, (C,), P[-2], P[-1], a.ln_eps)
    logits = x @ wte.t()
    return F.cross_entropy(logits[:, :a.vocab], targets)


def decode(a, P):
    """greedy generation with a KV cache (batch 1): the prompt, then a.decode tokens; returns the timings"""
    C, NH, KV, L = a.hidden, a.heads, a.kv_heads, a.layers
    D = C // NH
    wte, wpe = P[0], P[1]
    cache = [[None, None] for _ in range(L)]

    def step(tokens, pos0):                                                # tokens [S] -> logits of the last
        S = tokens.numel()
        x = wte[tokens] + wpe[pos0:pos0 + S]
        for l in range(L):
            (ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b,
             ln2_w, ln2_b, fc_w, fc_b, fc2_w, fc2_b) = P[2 + 12 * l: 2 + 12 * (l + 1)]
            qkv = F.linear(F.layer_norm(x, (C,), ln1_w, ln1_b, a.ln_eps), qkv_w, qkv_b)
            q = qkv[:, :C].reshape(S, NH, D).transpose(0, 1)
            k, v = (qkv[:, C + i * KV * D:C + (i + 1) * KV * D].reshape(S, KV, D).transpose(0, 1) for i in range(2))
            if cache[l][0] is not None:
                k, v = torch.cat((cache[l][0], k), 1), torch.cat((cache[l][1], v), 1)
            cache[l] = [k, v]
            if KV != NH:
                k, v = k.repeat_interleave(NH // KV, dim=0), v.repeat_interleave(NH // KV, dim=0)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))           # [NH, S, pos0 + S]
            if S > 1:
                att = att.masked_fill(~torch.ones(S, S, dtype=torch.bool).tril(), float("-inf"))
            o = F.softmax(att, dim=-1) @ v
            x = x + F.linear(o.transpose(0, 1).reshape(S, C), proj_w, proj_b)
            h = F.gelu(F.linear(F.layer_norm(x, (C,), ln2_w, ln2_b, a.ln_eps), fc_w, fc_b), approximate="tanh")
            x = x + F.linear(h, fc2_w, fc2_b)
        return F.layer_norm(x[-1:], (C,), P[-2], P[-1], a.ln_eps) @ wte.t()

    prompt = torch.randint(0, a.vocab, (a.prompt,), generator=torch.Generator().manual_seed(a.seed))
    with torch.no_grad():
        t0 = time.perf_counter()
        nxt = step(prompt, 0)[0, :a.vocab].argmax()
        prefill = (time.perf_counter() - t0) * 1e3
        times = []
        for i in range(a.decode):
            t0 = time.perf_counter()
            nxt = step(nxt.reshape(1), a.prompt + i)[0, :a.vocab].argmax()
            times.append((time.perf_counter() - t0) * 1e3)
    return prefill, statistics.median(times[1:]) if len(times) > 1 else times[0]


def read_bandwidth():
    """GB/s of a sum over 256 MiB of fp32 (best of 5), on the threads set"""
    x = torch.ones(1 << 26)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        x.sum().item()
        best = min(best, time.perf_counter() - t0)
    return x.numel() * 4 / best / 1e9


def file_batch(data, seq, batch, seed, step):
    """gpt_train's fill_batch: per sequence b a window of data from a hash of
    (seed, step, b); tokens in rows [s, b] (row p * batch + b)"""
    M = (1 << 64) - 1
    span = len(data) - seq - 1
    tok, tgt = [0] * (seq * batch), [0] * (seq * batch)
    for b in range(batch):
        h = (((seed + 1) * 0x9E3779B97F4A7C15) & M) ^ ((step << 20) | b)
        h ^= h >> 31
        h = (h * 0xBF58476D1CE4E5B9) & M
        h ^= h >> 27
        start = h % (span + 1)
        for p in range(seq):
            tok[p * batch + b], tgt[p * batch + b] = data[start + p], data[start + p + 1]
    return torch.tensor(tok), torch.tensor(tgt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", dest="kv_heads", type=int, default=0, help="K/V heads (0: = heads)")
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--max-pos", dest="max_pos", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--ln-eps", dest="ln_eps", type=float, default=1e-5)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--weight-decay", dest="weight_decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--data", help="train on windows of this file's bytes, as gpt_train --data")
    ap.add_argument("--decode", type=int, default=0, help="no training: greedy decoding of N tokens with a KV cache")
    ap.add_argument("--prompt", type=int, default=64, help="--decode: prompt tokens")
    a = ap.parse_args()
    a.kv_heads = a.kv_heads or a.heads
    if a.hidden % a.heads or a.heads % a.kv_heads or a.seq > a.max_pos or a.steps < 2:
        print("torch_gpt.py: need hidden % heads == 0, heads % kv_heads == 0, seq <= max_pos, steps >= 2",
              file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    vp = (a.vocab + 127) // 128 * 128
    gen = torch.Generator().manual_seed(a.seed)
    P = build_params(a, vp, gen)
    nparams = sum(p.numel() for p in P)
    if a.decode > 0:
        if a.prompt + a.decode > a.max_pos or a.prompt < 1 or a.dtype != "fp32":
            print("torch_gpt.py: --decode needs prompt >= 1, prompt + decode <= max_pos, fp32", file=sys.stderr)
            return 2
        prefill, per_token = decode(a, P)
        print("torch %s threads %d: decode, layers %d hidden %d heads %d vocab %d params %.1fM, prompt %d, %d tokens"
              % (torch.__version__, torch.get_num_threads(), a.layers, a.hidden, a.heads, a.vocab, nparams / 1e6,
                 a.prompt, a.decode))
        print("torch_prefill_ms %.1f" % prefill)
        print("torch_prefill_tokens_per_s %.0f" % (a.prompt / (prefill / 1e3)))
        print("torch_decode_ms_per_token %.2f" % per_token)
        print("torch_read_GBps %.2f" % read_bandwidth())
        return 0
    T = a.seq * a.batch
    data = open(a.data, "rb").read() if a.data else None
    if data is not None and len(data) < a.seq + 2:
        print("torch_gpt.py: --data needs more than seq + 1 bytes", file=sys.stderr)
        return 2
    tokens = torch.randint(0, a.vocab, (T,), generator=gen)
    targets = torch.randint(0, a.vocab, (T,), generator=gen)
    mask = torch.tril(torch.ones(a.seq, a.seq, dtype=torch.bool))
    pos = torch.arange(T) // a.batch
    opt = torch.optim.AdamW(P, lr=a.lr, betas=(0.9, a.beta2), eps=1e-8, weight_decay=a.weight_decay)
    gqa = " kv_heads %d" % a.kv_heads if a.kv_heads != a.heads else ""
    print("torch %s threads %d %s: layers %d hidden %d heads %d%s vocab %d (padded %d) seq %d batch %d params %.1fM"
          % (torch.__version__, torch.get_num_threads(), a.dtype, a.layers, a.hidden, a.heads, gqa, a.vocab, vp, a.seq,
             a.batch, nparams / 1e6), flush=True)
    times = []
    for step in range(1, a.steps + 1):
        if data is not None:  # outside the clock, as in gpt_train
            tokens, targets = file_batch(data, a.seq, a.batch, a.seed, step)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = forward(a, P, tokens, targets, mask, pos)
        loss.backward()
        opt.step()
        ms = (time.perf_counter() - t0) * 1e3
        times.append(ms)
        print("step %d loss %.6f ms %.1f" % (step, loss.item(), ms), flush=True)
    print("torch_ms_per_step %.1f" % statistics.median(times[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
