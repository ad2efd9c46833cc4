"""Character-level transformer language model on the bundled Halloway corpus.

Runs unchanged under Strata and PyTorch (``--framework strata|torch``). A small
GPT-style model (token + learned position embeddings, pre-norm blocks of causal
self-attention through F.scaled_dot_product_attention and a GELU MLP, final
LayerNorm and a linear head) is trained with AdamW and OneCycleLR; its
validation loss is compared with the corpus's unigram character entropy, and a
sample is drawn with temperature through torch.multinomial."""

import argparse
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import Progress, plot_curves, section, smooth  # noqa: E402
from framework import add_framework_argument, load_framework, print_profile  # noqa: E402

CORPUS = os.path.join(HERE, "data", "corpus.txt")
VAL_FRACTION = 0.1
ENTROPY_RATIO = 0.6  # final validation loss must be below this fraction of the unigram entropy


def load_corpus(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    ids = np.array([stoi[ch] for ch in text], dtype=np.int64)
    counts = np.bincount(ids, minlength=len(chars)).astype(np.float64)
    p = counts / counts.sum()
    entropy = float(-(p * np.log(p)).sum())  # nats per character
    return text, chars, stoi, ids, entropy


def windows(ids, block, stride):
    """(inputs, targets) pairs of length ``block``, the targets shifted by one character."""
    starts = np.arange(0, len(ids) - block - 1, stride)
    idx = starts[:, None] + np.arange(block + 1)[None, :]
    w = ids[idx]
    return np.ascontiguousarray(w[:, :-1]), np.ascontiguousarray(w[:, 1:])


def build_model(torch, vocab_size, block, d_model, n_layers, n_heads, dropout):
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.n_heads = n_heads
            self.query = nn.Linear(d_model, d_model)
            self.key = nn.Linear(d_model, d_model)
            self.value = nn.Linear(d_model, d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.dropout = dropout

        def forward(self, x):
            B, T, C = x.shape
            H = self.n_heads

            def heads(t):  # (B, T, C) -> (B, H, T, C/H)
                return t.view(B, T, H, C // H).transpose(1, 2)

            q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                               is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d_model)
            self.attn = CausalSelfAttention()
            self.ln2 = nn.LayerNorm(d_model)
            self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model),
                                     nn.Dropout(dropout))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class CharTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = block
            self.tok = nn.Embedding(vocab_size, d_model)
            self.pos = nn.Embedding(block, d_model)
            self.drop = nn.Dropout(dropout)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layers)])
            self.ln_f = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab_size)
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)
            # GPT-2's scaling of the residual projections keeps the residual stream's variance flat with depth.
            for b in self.blocks:
                nn.init.normal_(b.attn.proj.weight, mean=0.0, std=0.02 / math.sqrt(2 * n_layers))
                nn.init.normal_(b.mlp[2].weight, mean=0.0, std=0.02 / math.sqrt(2 * n_layers))

        def forward(self, idx):
            T = idx.shape[1]
            x = self.drop(self.tok(idx) + self.pos(torch.arange(T)))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))

    return CharTransformer()


def lm_loss(F, logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def evaluate(torch, model, x, y, batch_size=64):
    """Mean validation loss (nats/char) over all validation windows."""
    F = torch.nn.functional
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch_size):
            xb, yb = x[i:i + batch_size], y[i:i + batch_size]
            total += lm_loss(F, model(xb), yb).item() * xb.shape[0]
            n += xb.shape[0]
    model.train()
    return total / n


def sample(torch, model, stoi, chars, prompt, length, temperature, generator):
    F = torch.nn.functional
    unknown = sorted(set(prompt) - set(stoi))
    if unknown:
        raise ValueError(f"sample: prompt has characters that are not in the corpus: {unknown}")
    model.eval()
    ids = [stoi[ch] for ch in prompt]
    with torch.no_grad():
        for _ in range(length):
            ctx = torch.tensor([ids[-model.block:]])
            logits = model(ctx)[0, -1] / temperature
            probs = F.softmax(logits, dim=-1)
            ids.append(int(torch.multinomial(probs, 1, generator=generator).item()))
    return "".join(chars[i] for i in ids)


def train_step(torch, model, opt, sched, xb, yb, clip):
    opt.zero_grad()
    loss = lm_loss(torch.nn.functional, model(xb), yb)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    if sched is not None:
        sched.step()
    return loss


def bench_step(torch, quick=False, n_batches=8):
    """One full training step of this job, for bench/suite.py (case ``train.train_charlm``).

    Builds the job's model, AdamW optimizer and training windows exactly as ``main`` does (default arguments, or the
    smaller model of ``--quick`` when ``quick``), takes the first ``n_batches`` batches of the shuffled loader and
    returns a callable that runs one step on the next of them in turn (zero_grad, forward, loss, backward, clip,
    optimizer step) and returns the loss detached. The learning-rate schedule is left out: OneCycleLR refuses to step
    past its total, and a benchmark runs an open-ended number of steps."""
    import itertools

    args = parse_args(["--quick"] if quick else [])
    torch.manual_seed(args.seed)
    _, chars, _, ids, _ = load_corpus(CORPUS)
    n_val = int(len(ids) * VAL_FRACTION)
    xtr, ytr = windows(ids[:-n_val], args.block, args.block // 2)
    x_train, y_train = torch.from_numpy(xtr), torch.from_numpy(ytr)
    gen = torch.Generator().manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_train, y_train),
                                         batch_size=args.batch_size, shuffle=True, generator=gen, drop_last=True)
    batches = list(itertools.islice(iter(loader), n_batches))
    model = build_model(torch, vocab_size=len(chars), block=args.block, d_model=args.d_model, n_layers=args.layers,
                        n_heads=args.heads, dropout=args.dropout)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay, betas=(0.9, 0.98))
    counter = itertools.count()

    def step():
        xb, yb = batches[next(counter) % len(batches)]
        return train_step(torch, model, opt, None, xb, yb, args.clip).detach()

    return step


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_framework_argument(p)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--block", type=int, default=64, help="context length in characters")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--evals", type=int, default=8, help="validation evaluations during training")
    p.add_argument("--sample-chars", type=int, default=300)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--prompt", default="Day 7 in Halloway\n\nThe ferryman")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="runs")
    p.add_argument("--quick", action="store_true", help="a few steps of a smaller model, no loss threshold")
    p.add_argument("--no-profile", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.evals, args.sample_chars, args.block, args.d_model, args.lr = 12, 2, 60, 32, 64, 3e-3
    return args


def main(argv=None):
    args = parse_args(argv)
    torch = load_framework(args.framework)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    t_start = time.perf_counter()

    section(f"charlm: character transformer on the Halloway corpus ({torch.__name__} {torch.__version__}, "
            f"{args.threads} threads)")
    text, chars, stoi, ids, entropy = load_corpus(CORPUS)
    n_val = int(len(ids) * VAL_FRACTION)
    train_ids, val_ids = ids[:-n_val], ids[-n_val:]
    xtr, ytr = windows(train_ids, args.block, args.block // 2)
    xva, yva = windows(val_ids, args.block, args.block)
    if args.quick:
        xva, yva = xva[:64], yva[:64]
    target = ENTROPY_RATIO * entropy
    print(f"corpus: {len(text):,} characters, vocabulary {len(chars)}; unigram entropy {entropy:.3f} nats/char "
          f"(target: validation loss < {ENTROPY_RATIO} x entropy = {target:.3f})")
    print(f"train windows {xtr.shape}, validation windows {xva.shape}")
    x_train, y_train = torch.from_numpy(xtr), torch.from_numpy(ytr)
    x_val, y_val = torch.from_numpy(xva), torch.from_numpy(yva)

    gen = torch.Generator().manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_train, y_train),
                                         batch_size=args.batch_size, shuffle=True, generator=gen, drop_last=True)
    hp = dict(vocab_size=len(chars), block=args.block, d_model=args.d_model, n_layers=args.layers,
              n_heads=args.heads, dropout=args.dropout)
    model = build_model(torch, **hp)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {args.layers} layers, d_model {args.d_model}, {args.heads} heads, context {args.block}: "
          f"{n_params:,} parameters")
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps, pct_start=0.15)

    eval_every = max(1, args.steps // max(1, args.evals))
    losses, val_steps, val_losses = [], [], []
    tokens_per_step = args.batch_size * args.block
    bar = Progress(args.steps, "charlm", "tok")
    step, eval_time = 0, 0.0
    model.train()
    while step < args.steps:
        for xb, yb in loader:
            loss = train_step(torch, model, opt, sched, xb, yb, args.clip)
            step += 1
            losses.append(loss.item())
            extra = f"val {val_losses[-1]:.3f}" if val_losses else ""
            bar.update(step, losses[-1], tokens_per_step, extra=extra)
            if step % eval_every == 0 or step == args.steps:
                t0 = time.perf_counter()
                val_steps.append(step)
                val_losses.append(evaluate(torch, model, x_val, y_val))
                eval_time += time.perf_counter() - t0
            if step == args.steps:
                break
    train_time = bar.close()
    val_loss = val_losses[-1]
    print(f"final validation loss {val_loss:.4f} nats/char = {val_loss / entropy:.2f} x unigram entropy "
          f"({val_loss / math.log(2):.3f} bits/char); {args.steps} steps in {train_time:.1f}s "
          f"(incl. {eval_time:.1f}s validation; {args.steps * tokens_per_step / (train_time - eval_time):.0f} "
          f"training tokens/s)")

    png = plot_curves(os.path.join(args.out, "charlm_curves.png"), f"char transformer ({torch.__name__})", [
        ("cross-entropy (nats/char)",
         [("train (per step)", range(1, len(losses) + 1), losses, {"alpha": 0.3}),
          ("train (smoothed)", range(1, len(losses) + 1), smooth(losses, 20), {}),
          ("validation", val_steps, val_losses, {"marker": "o"})],
         (entropy, "unigram entropy")),
    ])
    print(f"loss curves: {png}")

    ckpt = os.path.join(args.out, "charlm.pt")
    torch.save(model.state_dict(), ckpt)
    fresh = build_model(torch, **hp)
    fresh.load_state_dict(torch.load(ckpt))
    model.eval()
    fresh.eval()
    with torch.no_grad():
        probe = x_val[:8]
        same = np.array_equal(model(probe).numpy(), fresh(probe).numpy())
    print(f"checkpoint: {ckpt} ({os.path.getsize(ckpt) / 1024:.0f} KiB); reloaded model gives "
          f"{'identical' if same else 'DIFFERENT'} predictions")

    sgen = torch.Generator().manual_seed(args.seed + 1)
    text_out = sample(torch, model, stoi, chars, args.prompt, args.sample_chars, args.temperature, sgen)
    section(f"charlm: sample ({args.sample_chars} characters, temperature {args.temperature})")
    print(text_out)

    if not args.no_profile:
        section("charlm: profile of 3 training steps")
        model.train()
        batches = iter(loader)

        def run():
            for _ in range(3):
                xb, yb = next(batches)
                train_step(torch, model, opt, None, xb, yb, args.clip)

        print_profile(torch, run)

    ok = same and (args.quick or val_loss < target)
    if not ok:
        print(f"FAILED: validation loss {val_loss:.4f} (need < {target:.4f}) or checkpoint mismatch")
    return {"name": "charlm", "framework": torch.__name__, "entropy": entropy, "val_loss": val_loss,
            "target": target, "train_time": train_time, "total_time": time.perf_counter() - t_start,
            "steps": args.steps, "png": png, "checkpoint": ckpt, "reload_ok": same, "sample": text_out, "ok": ok}


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
