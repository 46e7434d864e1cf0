#!/usr/bin/python3
"""Exports the two example models of docs/bring-your-own-model.md and a job for each.

Run with the Python whose torch matches the LibTorch that trains them (Debian's python3-torch,
1.13, for trainerd's default build):

    /usr/bin/python3 examples/torchscript/export_models.py --out /tmp/byom

writes
    lm.pt, lm.yaml                  a small transformer LM with the block protocol
    lstm.pt, lstm.yaml              a small LSTM LM with dropout, with the block protocol
    classifier.pt, classifier.yaml  an MLP classifier of byte histograms, without it
"""
import argparse
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """Pre-LayerNorm causal self-attention and MLP: one checkpointable block."""

    def __init__(self, width: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class TinyLM(nn.Module):
    """The block protocol: a ModuleList `blocks` and exported `embed` and `head`;
    forward(idx) == head(blocks(embed(idx)))."""

    def __init__(self, vocab: int, block_size: int, width: int, layers: int, heads: int,
                 dropout: float):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(block_size, width)
        self.blocks = nn.ModuleList([Block(width, heads, dropout) for _ in range(layers)])
        self.ln = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab)

    @torch.jit.export
    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.size(1), device=idx.device)
        return self.tokens(idx) + self.positions(positions)

    @torch.jit.export
    def head(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.ln(x))  # logits [B, T, vocab]

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class LstmBlock(nn.Module):
    """One LSTM layer with dropout and a residual: one checkpointable block."""

    def __init__(self, width: int, dropout: float):
        super().__init__()
        self.lstm = nn.LSTM(width, width, batch_first=True)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return x + self.drop(y)


class LstmLM(nn.Module):
    """The block protocol on a recurrent model: `blocks` of LSTM layers between `embed` and
    `head`."""

    def __init__(self, vocab: int, width: int, layers: int, dropout: float):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([LstmBlock(width, dropout) for _ in range(layers)])
        self.lm_head = nn.Linear(width, vocab)

    @torch.jit.export
    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        return self.drop(self.tokens(idx))

    @torch.jit.export
    def head(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm_head(x)  # logits [B, T, vocab]

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class SliceClassifier(nn.Module):
    """No block protocol: trained as one opaque forward, logits [B, classes]."""

    def __init__(self, classes: int, hidden: int, dropout: float):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(256, hidden), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, classes))

    def forward(self, histogram: torch.Tensor) -> torch.Tensor:
        return self.net(histogram)


JOB = """# {what}: trained by trainerd from {model} (examples/torchscript/export_models.py).
model:
  kind: torchscript
  path: {model}
  inputs: {inputs}
  block_size: {block_size}
data:
  files: [{files}]
training: {{effective_batch: 16, updates: {updates}, eval_interval: {updates}, seed: 7}}
memory: {{budget: 4GiB}}
runtime: {{threads: auto}}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder for the models and jobs")
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--updates", type=int, default=50)
    parser.add_argument("--files", nargs="+",
                        default=["/usr/share/common-licenses/GPL-3",
                                 "/usr/share/common-licenses/Apache-2.0"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    files = ", ".join(args.files)

    lm = torch.jit.script(TinyLM(256, args.block_size, args.width, args.layers, 4, args.dropout))
    lm.save(os.path.join(args.out, "lm.pt"))
    with open(os.path.join(args.out, "lm.yaml"), "w") as f:
        f.write(JOB.format(what="A byte-level transformer LM", model="lm.pt", inputs="tokens",
                           block_size=args.block_size, files=files, updates=args.updates))

    lstm = torch.jit.script(LstmLM(256, args.width, args.layers, args.dropout))
    lstm.save(os.path.join(args.out, "lstm.pt"))
    with open(os.path.join(args.out, "lstm.yaml"), "w") as f:
        f.write(JOB.format(what="A byte-level LSTM LM", model="lstm.pt", inputs="tokens",
                           block_size=args.block_size, files=files, updates=args.updates))

    classifier = torch.jit.script(SliceClassifier(len(args.files), 4 * args.width, args.dropout))
    classifier.save(os.path.join(args.out, "classifier.pt"))
    with open(os.path.join(args.out, "classifier.yaml"), "w") as f:
        f.write(JOB.format(what="Which file a window comes from", model="classifier.pt",
                           inputs="byte_histogram", block_size=args.block_size, files=files,
                           updates=args.updates))
    print(f"wrote lm.pt, lm.yaml, lstm.pt, lstm.yaml, classifier.pt, classifier.yaml to {args.out}")


if __name__ == "__main__":
    main()
