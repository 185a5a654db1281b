#!/usr/bin/env python3
"""PyTorch oracle for examples/dit_train (the STDiT of issue 33).

Reads the export written by `dit_train --export DIR` (index.txt: a config
line, then "kind name rows cols file" of raw little-endian float32 files:
the initial parameters, the latents, the conditioning, each step's noise
and diffusion steps t, the step-1 gradients and the losses) and rebuilds
the model from its definition, in float32 with explicit tensors:
  - a_t = prod_{s <= t} (1 - beta_s), beta_s = 1e-4 + (0.02 - 1e-4) s / 999;
    x_t = sqrt(a_t) x0 + sqrt(1 - a_t) eps;
  - tokens: x_t [B, F, H, W, C] cut into p x p patches, token f S + i (W/p) + j,
    columns (u p + v) C + c; x = tokens Wpe^T + bpe + sincos(patch index) + sincos(frame);
  - c = fc2(silu(fc1([cos(t f) | sin(t f)]))), f_i = exp(-ln(10000) i / 128);
    sc = silu(c);
  - per block, mod = sc Wada^T + bada, twelve chunks (shift, scale, gate of
    spatial attention, temporal attention, cross-attention, MLP); each branch
    x = x + gate * branch(rms(x) w (1 + scale) + shift), rms: x / sqrt(mean x^2 + 1e-6);
    spatial attention over the S patches of a frame, temporal over the F frames
    of a patch position, both non-causal, q | k | v heads; cross-attention:
    queries of the tokens, K | V = cond Wkv^T; MLP: fc2(gelu_tanh(fc1));
  - final: (rms(x) w (1 + scale) + shift) Wout^T + bout, shift, scale = chunks
    of sc Wfa^T + bfa; loss = mean((pred - patchify(eps))^2).
Checks: the step-1 loss at relative LOSS_RTOL; every gradient (clipped to
global norm 1, as the library's AdamW sees it) within GRAD_RTOL * max|g| per
tensor; the losses of steps 2 and 3 after torch.optim.AdamW steps (with
clip_grad_norm_ 1.0) at relative LOSS_RTOL. Prints PASS/FAIL per item, exit
0 when all pass.

Usage: torch_dit.py EXPORT_DIR
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

LOSS_RTOL = 1e-5  # the bound
GRAD_RTOL = 1e-4  # the bound, per tensor, of max|g|


def read_index(d):
    cfg, files = {}, {}
    with open(os.path.join(d, "index.txt")) as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            if parts[0] == "config":
                for kv in parts[1:]:
                    k, v = kv.split("=")
                    cfg[k] = float(v) if any(ch in v for ch in ".e") else int(v)
                continue
            kind, name, rows, cols, fn = parts
            raw = open(os.path.join(d, fn), "rb").read()
            t = torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(int(rows), int(cols)).clone()
            files[(kind, name)] = t
    return cfg, files


def rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def sincos(pos, h):  # [n] float64 positions -> [n, h] float32, [sin | cos]
    half = h // 2
    w = torch.pow(torch.tensor(10000.0, dtype=torch.float64), -torch.arange(half, dtype=torch.float64) / half)
    a = pos[:, None] * w[None]
    return torch.cat([torch.sin(a), torch.cos(a)], 1).float()


def alpha_bar(t):
    a = 1.0
    for s in range(t + 1):
        a *= 1.0 - (1e-4 + (0.02 - 1e-4) * s / 999.0)
    return a


def attend(q, k, v):  # [..., n, d] x [..., m, d] -> [..., n, d]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(s, -1) @ v


def forward(cfg, P, x0, cond, eps, tv):
    Fr, H, W, C, p = cfg["frames"], cfg["height"], cfg["width"], cfg["channels"], cfg["patch"]
    h, A, L, B = cfg["hidden"], cfg["heads"], cfg["layers"], cfg["batch"]
    d, S = h // A, (H // p) * (W // p)
    N, ne = Fr * S, cfg["norm_eps"]
    lin = lambda x, n, bias=True: x @ P[n + "_w"].t() + (P[n + "_b"][0] if bias else 0)
    a = torch.tensor([alpha_bar(int(t)) for t in tv.flatten().tolist()], dtype=torch.float64)
    xt = (a.sqrt()[:, None] * x0.double() + (1 - a).sqrt()[:, None] * eps.double()).float()

    def patchify(v):  # [B, F H W C] -> [B, N, p p C]
        v = v.reshape(B, Fr, H // p, p, W // p, p, C).permute(0, 1, 2, 4, 3, 5, 6)
        return v.reshape(B, N, p * p * C)

    tok, target = patchify(xt), patchify(eps)
    n = torch.arange(N, dtype=torch.float64)
    pos = sincos(n % S, h) + sincos(torch.floor(n / S), h)
    x = lin(tok, "patch_emb") + pos[None]
    half = cfg["freq"] // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(0, half, dtype=torch.float32) / half)
    args = tv.float().reshape(B, 1) * freqs[None]
    c = lin(F.silu(lin(torch.cat([torch.cos(args), torch.sin(args)], 1), "t_emb_fc1")), "t_emb_fc2")
    sc = F.silu(c)
    y = cond.reshape(cfg["cond_len"], B, cfg["cond_dim"]).permute(1, 0, 2)  # [B, Lc, cd]

    def heads(t):  # [B, N, h] -> [B, F, S, A, d]
        return t.reshape(B, Fr, S, A, d)

    for l in range(L):
        pre = "h%d." % l
        mod = lin(sc, pre + "ada")[:, None, :]  # [B, 1, 12 h]
        ch = lambda i: mod[..., i * h:(i + 1) * h]
        for i, br in enumerate(["s", "t", "c", "m"]):
            m = rms(x, P[pre + br + "_norm_w"][0], ne) * (1 + ch(3 * i + 1)) + ch(3 * i)
            if br in ("s", "t"):
                qkv = lin(m, pre + br + "_qkv", bias=False)
                q, k, v = (heads(qkv[..., j * h:(j + 1) * h]) for j in range(3))
                if br == "s":  # [B, F, A, S, d]: the patches of each frame
                    perm, back = (0, 1, 3, 2, 4), (0, 1, 3, 2, 4)
                else:  # [B, S, A, F, d]: the frames of each patch position
                    perm, back = (0, 2, 3, 1, 4), (0, 3, 1, 2, 4)
                o = attend(q.permute(*perm), k.permute(*perm), v.permute(*perm)).permute(*back)
                out = lin(o.reshape(B, N, h), pre + br + "_proj")
            elif br == "c":
                q = lin(m, pre + "c_q", bias=False).reshape(B, N, A, d).transpose(1, 2)
                kv = y @ P[pre + "c_kv_w"].t()  # [B, Lc, 2 h]: K heads | V heads
                k = kv[..., :h].reshape(B, -1, A, d).transpose(1, 2)
                v = kv[..., h:].reshape(B, -1, A, d).transpose(1, 2)
                out = lin(attend(q, k, v).transpose(1, 2).reshape(B, N, h), pre + "c_proj")
            else:
                out = lin(F.gelu(lin(m, pre + "fc1"), approximate="tanh"), pre + "fc2")
            x = x + ch(3 * i + 2) * out
    fmod = lin(sc, "final_ada")[:, None, :]
    m = rms(x, P["final_norm_w"][0], ne) * (1 + fmod[..., h:]) + fmod[..., :h]
    pred = lin(m, "final")
    return ((pred - target) ** 2).mean()


def main():
    d = sys.argv[1]
    cfg, files = read_index(d)
    names = [n for (k, n) in files if k == "param"]
    P = {n: files[("param", n)].clone().requires_grad_(True) for n in names}
    x0, cond = files[("data", "latents")], files[("data", "cond")]
    losses = files[("loss", "losses")].flatten()
    ok = True

    def report(good, what):
        nonlocal ok
        print(("PASS " if good else "FAIL ") + what)
        ok = ok and good

    params = [P[n] for n in names]
    opt = torch.optim.AdamW(params, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"],
                            weight_decay=cfg["weight_decay"])
    for step in range(1, cfg["steps"] + 1):
        opt.zero_grad()
        loss = forward(cfg, P, x0, cond, files[("data", "noise_%d" % step)], files[("data", "t_%d" % step)])
        loss.backward()
        got = float(losses[step - 1])
        rel = abs(got - float(loss)) / abs(float(loss))
        report(rel <= LOSS_RTOL, "step %d loss: starweave %.7f, torch %.7f (relative %.1e, bound %.0e)"
               % (step, got, float(loss), rel, LOSS_RTOL))
        norm = torch.nn.utils.clip_grad_norm_(params, cfg["clip"])
        if step == 1:
            worst, wname, nz = 0.0, "", 0
            for n in names:
                g, ref = files[("grad", n)], P[n].grad
                scale = float(ref.abs().max())
                nz += scale > 0
                r = float((g - ref).abs().max()) / scale if scale > 0 else float(g.abs().max())
                if r > worst:
                    worst, wname = r, n
                if not r <= GRAD_RTOL:
                    report(False, "step 1 gradient %s: max|diff| / max|g| = %.2e (bound %.0e)" % (n, r, GRAD_RTOL))
            report(worst <= GRAD_RTOL, "step 1: every one of %d gradients (%d nonzero; global norm %.4f before "
                   "clipping to %g) within %.0e of max|g|: worst %.2e (%s)"
                   % (len(names), nz, float(norm), cfg["clip"], GRAD_RTOL, worst, wname))
        opt.step()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
