#!/usr/bin/env python3
"""A small Hugging Face model, its tokenizer, its tokenized data and a trainerd job.

    make_example.py OUT [--updates N] [--chat]

Writes, with the real `transformers` and `tokenizers` (scripts/install-hf-python.sh's
python):
  OUT/model/      a random LlamaForCausalLM (4 layers, width 128, grouped-query attention,
                  about 1 M parameters) as save_pretrained writes it, with the tokenizer:
                  a byte-level BPE of 2048 tokens trained on the licence texts of
                  Debian's base-files (/usr/share/common-licenses), with a ChatML chat
                  template (<|im_start|>role ... <|im_end|>, as Qwen2.5's);
  OUT/train.bin, OUT/val.bin   those texts tokenized by that tokenizer (uint16 ids), the
                  last tenth held out;
  OUT/job.yaml    a trainerd job training OUT/model on them (model.kind: hf).
Then:
  build/bin/trainer-run --config OUT/job.yaml --plan auto --output-dir OUT/out
trains it, and OUT/out is a folder transformers.AutoModelForCausalLM.from_pretrained loads
(docs/hugging-face.md).

With --chat, also conversations about those texts, as a team's chat data is:
  OUT/chats-train.jsonl, OUT/chats-val.jsonl   {"messages": [...]} per line: a system
                  prompt, then two questions, each answered by a paragraph of a licence;
  OUT/job-chat.yaml   a job that learns the answers alone (data.loss_masks), each conversation
                      a document (data.document_end: the id of <|endoftext|>).
Then examples/hf/chat_to_tokens.py writes their ids and masks with the folder's template:
  chat_to_tokens.py OUT/model OUT/chats-train.jsonl OUT/chat-train   (and -val likewise)
  build/bin/trainer-run --config OUT/job-chat.yaml --output-dir OUT/chat-out
"""
import argparse
import glob
import json
import os

import numpy as np
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

TEXTS = sorted(glob.glob("/usr/share/common-licenses/*"))
VOCABULARY = 2048
CHAT_TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
                 "message['content'] + '<|im_end|>\\n' }}{% endfor %}"
                 "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def train_tokenizer():
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCABULARY,
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train([t for t in TEXTS if os.path.isfile(t)], trainer)
    return tokenizer


def paragraphs(path):
    """The paragraphs of a licence text worth quoting: 40 to 400 characters."""
    with open(path, encoding="utf-8", errors="replace") as f:
        parts = [" ".join(p.split()) for p in f.read().split("\n\n")]
    return [p for p in parts if 40 <= len(p) <= 400]


def write_chats(out, end):
    """Conversations quoting the licences, nine in ten for training, and the job on them."""
    chats = []
    for path in TEXTS:
        if os.path.isfile(path):
            name = os.path.basename(path)
            quotes = paragraphs(path)
            for k in range(0, len(quotes) - 1, 2):
                messages = [{"role": "system", "content": "You quote the licences Debian ships."}]
                for n in (k, k + 1):
                    messages += [{"role": "user", "content": "Paragraph %d of %s?" % (n + 1, name)},
                                 {"role": "assistant", "content": quotes[n]}]
                chats.append(json.dumps({"messages": messages}))
    held_out = max(1, len(chats) // 10)
    for part, lines in (("train", chats[:-held_out]), ("val", chats[-held_out:])):
        with open(os.path.join(out, "chats-%s.jsonl" % part), "w") as f:
            f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "job-chat.yaml"), "w") as f:
        f.write("# The example's model taught to answer, its prompts not learned "
                "(examples/hf/make_example.py --chat).\n"
                "model: {kind: hf, path: model, block_size: 128}\n"
                "data: {format: tokens, train: chat-train.bin, eval: [chat-val.bin], "
                "loss_masks: true, document_end: %d}\n" % end +
                "optimizer: {lr: 0.003}\n"
                "training: {effective_batch: 8, updates: 4, seed: 1}\n")
    return len(chats) - held_out, held_out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--chat", action="store_true", help="also chat data and job-chat.yaml")
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
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer,
                                                eos_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    end = tokenizer.token_to_id("<|endoftext|>")
    fast.save_pretrained(folder)
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
    if args.chat:
        print("make_example.py: %s: chats-train.jsonl (%d conversations), chats-val.jsonl (%d), "
              "job-chat.yaml" % ((args.out,) + write_chats(args.out, end)))


if __name__ == "__main__":
    main()
