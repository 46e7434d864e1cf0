#!/usr/bin/python3
"""Writes a `data.format: tokens` dataset and a job that trains the built-in GPT on it.

    /usr/bin/python3 examples/torchscript/write_token_data.py --out /tmp/tokens \\
        /usr/share/common-licenses/GPL-3

Each word and each run of other characters of the text becomes one token id (a toy
tokenizer: real pipelines use BPE, the file format is the same); the ids are written as
little-endian uint16 back to back, 90 % to train.bin and the rest to val.bin.
"""
import argparse
import array
import os
import re
import sys

JOB = """# The built-in GPT on word-level token ids (examples/torchscript/write_token_data.py).
model: {{kind: gpt, n_layer: 2, n_head: 2, n_embd: 64, block_size: 32, vocab_size: {vocab}}}
data:
  format: tokens
  dtype: uint16
  train: train.bin
  eval: [val.bin]
training: {{effective_batch: 16, updates: 50, eval_interval: 50, seed: 7}}
memory: {{budget: 4GiB}}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("text", nargs="+")
    args = parser.parse_args()
    words = []
    for path in args.text:
        with open(path, encoding="utf-8", errors="replace") as f:
            words += re.findall(r"\w+|\W+", f.read())
    vocabulary = {}
    ids = array.array("H", (vocabulary.setdefault(w, len(vocabulary)) for w in words))
    if len(vocabulary) > 65535:
        sys.exit("more than 65535 distinct tokens: use dtype uint32 (array type 'I')")
    if sys.byteorder != "little":
        ids.byteswap()
    os.makedirs(args.out, exist_ok=True)
    split = len(ids) * 9 // 10
    with open(os.path.join(args.out, "train.bin"), "wb") as f:
        ids[:split].tofile(f)
    with open(os.path.join(args.out, "val.bin"), "wb") as f:
        ids[split:].tofile(f)
    with open(os.path.join(args.out, "tokens-gpt.yaml"), "w") as f:
        f.write(JOB.format(vocab=len(vocabulary)))
    print(f"{len(ids)} tokens, vocabulary {len(vocabulary)}: train.bin, val.bin, tokens-gpt.yaml"
          f" in {args.out}")


if __name__ == "__main__":
    main()
