#!/usr/bin/env python3
"""A small Hugging Face model, its tokenizer, its tokenized data and a trainerd job.

    make_example.py OUT [--updates N]

Writes, with the real `transformers` and `tokenizers` (scripts/install-hf-python.sh's
python):
  OUT/model/      a random LlamaForCausalLM (4 layers, width 128, grouped-query attention,
                  about 1 M parameters) as save_pretrained writes it, with the tokenizer:
                  a byte-level BPE of 2048 tokens trained on the licence texts of
                  Debian's base-files (/usr/share/common-licenses);
  OUT/train.bin, OUT/val.bin   those texts tokenized by that tokenizer (uint16 ids), the
                  last tenth held out;
  OUT/job.yaml    a trainerd job training OUT/model on them (model.kind: hf).
Then:
  build/bin/trainer-run --config OUT/job.yaml --plan auto --output-dir OUT/out
trains it, and OUT/out is a folder transformers.AutoModelForCausalLM.from_pretrained loads
(docs/hugging-face.md).
"""
import argparse
import glob
import os

import numpy as np
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

TEXTS = sorted(glob.glob("/usr/share/common-licenses/*"))
VOCABULARY = 2048


def train_tokenizer():
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCABULARY, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train([t for t in TEXTS if os.path.isfile(t)], trainer)
    return tokenizer


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--updates", type=int, default=300)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tokenizer = train_tokenizer()
    ids = []
    for path in TEXTS:
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                ids.extend(tokenizer.encode(f.read()).ids + [tokenizer.token_to_id("<|endoftext|>")])
    ids = np.array(ids, dtype=np.uint16)
    held_out = len(ids) // 10
    ids[:-held_out].tofile(os.path.join(args.out, "train.bin"))
    ids[-held_out:].tofile(os.path.join(args.out, "val.bin"))

    config = transformers.LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(), hidden_size=128, intermediate_size=344,
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=512, tie_word_embeddings=True)
    model = transformers.AutoModelForCausalLM.from_config(config)
    folder = os.path.join(args.out, "model")
    model.save_pretrained(folder)
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer,
                                         eos_token="<|endoftext|>").save_pretrained(folder)
    with open(os.path.join(args.out, "job.yaml"), "w") as f:
        f.write("# A Hugging Face folder trained by trainerd (examples/hf/make_example.py).\n"
                "model: {kind: hf, path: model, block_size: 128}\n"
                "data: {format: tokens, train: train.bin, eval: [val.bin]}\n"
                "optimizer: {lr: 0.003}\n"
                "schedule: {warmup_updates: 20}\n"
                "training: {effective_batch: 16, updates: %d, seed: 1, eval_interval: %d, "
                "checkpoint_interval: %d}\n" % (args.updates, max(1, args.updates // 3),
                                                 max(1, args.updates // 3)))
    print("make_example.py: %s: model/ (%d parameters, vocabulary %d), train.bin (%d tokens), "
          "val.bin (%d), job.yaml" % (args.out, sum(p.numel() for p in model.parameters()),
                                      config.vocab_size, len(ids) - held_out, held_out))


if __name__ == "__main__":
    main()
