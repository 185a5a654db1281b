#!/bin/sh
# The LM head's cross-entropy with an ignore index against PyTorch:
# tests/test_crossentropy (SW_CE_DUMP) writes its -100 cases -- logits,
# targets with ignored rows, row weights, the loss of sw_ce_mean and the
# gradient of sw_ce_bwd_weighted -- and PyTorch (Debian python3-torch)
# recomputes them on the same logits: the loss equals
# torch.nn.functional.cross_entropy(logits, targets, ignore_index=-100)
# (with row weights: sum w ce / sum of the counted rows' w, PyTorch's
# per-row losses weighted) at relative 1e-6, and the gradient autograd's at
# 1e-6 of max |g| (padding columns 0). Exit 77 (skip) only when torch cannot
# be imported.
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
top_builddir=${top_builddir:-.}
if [ -z "$top_srcdir" ]; then
    top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
fi
. "$top_srcdir/tests/common.sh"

need_torch
SW_CE_DUMP="$TMPD/ce.txt" "$top_builddir/tests/test_crossentropy" > "$TMPD/unit" 2>&1
rc=$?
[ "$rc" = 0 ] || cat "$TMPD/unit"
check "test_crossentropy wrote its -100 cases (exit $rc)" eval '[ "$rc" = 0 ] && [ -s "$TMPD/ce.txt" ]'
"$TORCH_PYTHON" - "$TMPD/ce.txt" > "$TMPD/py" 2>&1 <<'PY'
import sys, torch
import torch.nn.functional as F
lines = open(sys.argv[1]).read().split("\n")
i, bad, cases = 0, 0, 0
while i < len(lines) and lines[i].startswith("case "):
    tag = lines[i][5:]
    n, vp, vocab, weighted = map(int, lines[i + 1].split())
    x = torch.tensor([[float(v) for v in lines[i + 2 + r].split()] for r in range(n)], dtype=torch.float64)
    t = torch.tensor([int(v) for v in lines[i + 2 + n].split()], dtype=torch.long)
    w = torch.tensor([float(v) for v in lines[i + 3 + n].split()], dtype=torch.float64)
    loss = float(lines[i + 4 + n])
    g = torch.tensor([[float(v) for v in lines[i + 5 + n + r].split()] for r in range(n)], dtype=torch.float64)
    i += 5 + 2 * n
    cases += 1
    logits = x[:, :vocab].clone().requires_grad_(True)
    if weighted:
        rows = F.cross_entropy(logits, t, ignore_index=-100, reduction="none")
        keep = (t != -100).double()
        ref = (rows * w * keep).sum() / (w * keep).sum()
        what = "sum w ce / sum w over PyTorch's per-row cross_entropy(ignore_index=-100)"
    else:
        ref = F.cross_entropy(logits, t, ignore_index=-100)
        what = "F.cross_entropy(ignore_index=-100)"
    ref.backward()
    gr = torch.zeros(n, vp, dtype=torch.float64)
    gr[:, :vocab] = logits.grad
    lerr = abs(loss - ref.item()) / abs(ref.item())
    gerr = (g - gr).abs().max().item() / gr.abs().max().item()
    ok = lerr <= 1e-6 and gerr <= 1e-6
    bad += not ok
    print("%s %s: loss %.9g torch %s %.9g (relative %.2g <= 1e-6), gradient max err %.2g of max |g| (<= 1e-6)"
          % ("PASS" if ok else "FAIL", tag, loss, what, ref.item(), lerr, gerr))
print("cases %d" % cases)
sys.exit(1 if bad or cases < 2 else 0)
PY
rc=$?
cat "$TMPD/py"
check "the loss equals PyTorch's cross_entropy(ignore_index=-100) on the same logits, the gradient autograd's ($(grep -c ^PASS "$TMPD/py") cases; exit $rc)" [ "$rc" = 0 ]
finish
