"""A 2-layer LSTM word-level language model in the style of the classic PyTorch example: embedding,
nn.LSTM with dropout, tied decoder, truncated BPTT with detached hidden state, gradient clipping,
perplexity logging. Written for PyTorch; run unchanged on Strata."""

import argparse
import json
import math
import os

import torch
import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp=32, nhid=32, nlayers=2, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight  # tied weights
        self.nlayers, self.nhid = nlayers, nhid
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, inp, hidden):
        emb = self.drop(self.encoder(inp))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        return self.decoder(output).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bptt", type=int, default=8)
    ap.add_argument("--clip", type=float, default=0.25)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(1111)
    ntokens = 50
    corpus = torch.randint(0, ntokens, (800,))
    train = batchify(corpus, 10)
    model = RNNModel(ntokens)
    criterion = nn.NLLLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    hidden = model.init_hidden(10)
    losses = []
    for batch, i in enumerate(range(0, train.size(0) - 1, args.bptt)):
        seq_len = min(args.bptt, len(train) - 1 - i)
        data, targets = train[i:i + seq_len], train[i + 1:i + 1 + seq_len].reshape(-1)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(torch.log_softmax(output, dim=-1), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        losses.append(loss.item())
        print(f"| batch {batch:3d} | loss {loss.item():5.2f} | ppl {math.exp(loss.item()):8.2f}")
    model.eval()
    with torch.no_grad():
        out, _ = model(train[:4], model.init_hidden(10))
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump({"losses": losses, "out": out[:2].flatten().tolist()}, f)


if __name__ == "__main__":
    main()
