#!/usr/bin/python3
"""Writes a `data.format: tensors` dataset, a model for it and its job.

    PYTHONPATH=$(scripts/install-python-packages.sh --prefix) \\
        /usr/bin/python3 examples/torchscript/write_tensor_data.py --out /tmp/rows

Rows of 16 float32 features; the target of a row is the class (int64) of the largest of
four fixed random projections of it (--task classify, loss cross_entropy) or the first
projection itself as float32 [1] (--task regress, loss mse). The training split is written
with numpy.save as train/inputs.npy and train/targets.npy, the evaluation split with the
reference safetensors package as val.safetensors (tensors "inputs" and "targets"); trainerd
reads either format for either split. The model is an MLP without the block protocol (one
opaque block) that also exports the loss it was written with, for `loss: module`.
"""
import argparse
import os

import numpy
import safetensors.numpy
import torch
import torch.nn as nn
import torch.nn.functional as F
from typing import Tuple

JOB = """# {what} (examples/torchscript/write_tensor_data.py).
model:
  kind: torchscript
  path: rows.pt
  loss: {loss}
data:
  format: tensors
  train: train
  eval: [val.safetensors]
training: {{effective_batch: 32, updates: {updates}, eval_interval: {updates}, seed: 7}}
memory: {{budget: 2GiB}}
runtime: {{threads: auto}}
"""


class RowModel(nn.Module):
    """An MLP over feature rows: logits [B, classes] or predictions [B, 1]."""

    def __init__(self, features: int, hidden: int, outputs: int, regress: bool):
        super().__init__()
        self.regress = regress
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.GELU(),
                                 nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, outputs))

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        return self.net(rows)

    @torch.jit.export
    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> Tuple[torch.Tensor, int]:
        """(sum over the batch, number of terms): trainerd divides by the effective batch's."""
        if self.regress:
            return F.mse_loss(outputs, targets, reduction="sum"), targets.numel()
        return F.cross_entropy(outputs, targets, reduction="sum"), targets.numel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--task", choices=["classify", "regress"], default="classify")
    parser.add_argument("--rows", type=int, default=2048)
    parser.add_argument("--eval-rows", type=int, default=256)
    parser.add_argument("--updates", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = numpy.random.default_rng(args.seed)
    features, classes = 16, 4
    projection = rng.standard_normal((features, classes)).astype(numpy.float32)

    def split(rows: int):
        inputs = rng.standard_normal((rows, features)).astype(numpy.float32)
        scores = inputs @ projection
        if args.task == "classify":
            return inputs, scores.argmax(axis=1).astype(numpy.int64)
        return inputs, scores[:, :1].copy()

    os.makedirs(os.path.join(args.out, "train"), exist_ok=True)
    inputs, targets = split(args.rows)
    numpy.save(os.path.join(args.out, "train", "inputs.npy"), inputs)
    numpy.save(os.path.join(args.out, "train", "targets.npy"), targets)
    inputs, targets = split(args.eval_rows)
    safetensors.numpy.save_file({"inputs": inputs, "targets": targets},
                                os.path.join(args.out, "val.safetensors"))

    torch.manual_seed(args.seed)
    regress = args.task == "regress"
    model = torch.jit.script(RowModel(features, 64, 1 if regress else classes, regress))
    model.save(os.path.join(args.out, "rows.pt"))
    what = "Regression of a projection" if regress else "Which projection of a row is largest"
    for loss, name in [("mse" if regress else "cross_entropy", "rows.yaml"),
                       ("module", "rows-module-loss.yaml")]:
        with open(os.path.join(args.out, name), "w") as f:
            f.write(JOB.format(what=what, loss=loss, updates=args.updates))
    print(f"wrote train/, val.safetensors, rows.pt, rows.yaml, rows-module-loss.yaml to {args.out}")


if __name__ == "__main__":
    main()
