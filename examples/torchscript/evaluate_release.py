#!/usr/bin/python3
"""Loads a released TorchScript model in Python and prints its logits for a fixed input as
JSON: the check that a model trainerd trained is a model the team's code can load.

    /usr/bin/python3 examples/torchscript/evaluate_release.py MODEL.pt --inputs tokens \\
        --block-size 32
The input is tokens (i * 7) % 256 for i < block_size ([1, T]), or the byte histogram of
those tokens ([1, 256], normalised like trainerd's).

With --weights model.safetensors, MODEL.pt may be the module as exported (untrained): the
trained weights trainerd wrote beside the release are loaded into it with load_state_dict
(safetensors: scripts/install-python-packages.sh).
"""
import argparse
import json

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--inputs", choices=["tokens", "byte_histogram"], default="tokens")
    parser.add_argument("--block-size", type=int, required=True)
    parser.add_argument("--weights", help="a model.safetensors to load into the module")
    args = parser.parse_args()
    model = torch.jit.load(args.model)
    if args.weights:
        from safetensors.torch import load_file
        model.load_state_dict(load_file(args.weights))
    model.eval()
    tokens = (torch.arange(args.block_size) * 7) % 256
    if args.inputs == "tokens":
        x = tokens.unsqueeze(0)
    else:
        x = torch.bincount(tokens, minlength=256).float().unsqueeze(0) / args.block_size
    with torch.no_grad():
        logits = model(x)
    print(json.dumps({"shape": list(logits.shape), "logits": logits.flatten().tolist()}))


if __name__ == "__main__":
    main()
