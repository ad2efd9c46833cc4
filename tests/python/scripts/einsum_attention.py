"""Multi-head self-attention written with torch.einsum (as many research codebases do), a causal mask with
masked_fill, pre-norm blocks, AdamW with warmup through LambdaLR, and a gradient-accumulation loop.
Written for PyTorch; run unchanged on Strata."""

import argparse
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class EinsumAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads) for z in (q, k, v))
        sim = torch.einsum("bihd,bjhd->bhij", q, k) * self.scale
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        sim = sim.masked_fill(mask, float("-inf"))
        attn = sim.softmax(dim=-1)
        out = torch.einsum("bhij,bjhd->bihd", attn, v).reshape(b, t, d)
        return self.proj(out)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = EinsumAttention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--accum", type=int, default=2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(42)
    vocab, dim = 40, 32
    emb = nn.Embedding(vocab, dim)
    blocks = nn.Sequential(Block(dim, 4), Block(dim, 4))
    head = nn.Linear(dim, vocab)
    params = list(emb.parameters()) + list(blocks.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
    data = torch.randint(0, vocab, (8, 17))
    losses = []
    for step in range(args.steps):
        for micro in range(args.accum):
            chunk = data[micro * 4:(micro + 1) * 4]
            x, y = chunk[:, :-1], chunk[:, 1:]
            logits = head(blocks(emb(x)))
            loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1)) / args.accum
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item() * args.accum)
        print(f"step {step} loss {losses[-1]:.4f} lr {sched.get_last_lr()[0]:.2e} ppl {math.exp(losses[-1]):.1f}")
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump({"losses": losses}, f)


if __name__ == "__main__":
    main()
