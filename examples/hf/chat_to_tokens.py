#!/usr/bin/env python3
"""Chat transcripts as trainerd's token data, with loss masks that learn the assistant alone.

    chat_to_tokens.py MODEL_DIR CHATS.jsonl OUT_PREFIX

Reads one conversation per line of CHATS.jsonl, as transformers' chat templates and TRL take
them:

    {"messages": [{"role": "system", "content": "..."}, {"role": "user", "content": "..."},
                  {"role": "assistant", "content": "..."}, ...]}

renders each with the tokenizer and chat template of the Hugging Face folder MODEL_DIR, and
writes
  OUT_PREFIX.bin   the ids of every conversation, back to back (little-endian uint16 when the
                   vocabulary fits 16 bits, else uint32: the line printed says which);
  OUT_PREFIX.mask  one byte per id: 1 for the ids an assistant message adds (its content and
                   the template's end of turn), 0 for the rest (system and user turns, the
                   template's headers, the "assistant" prompt before each answer).
A job trains on them with (docs/trainer-run.md, "Loss masks"):

    data: {format: tokens, train: train.bin, eval: [val.bin], loss_masks: true}

An assistant message's ids are those the template adds for it to the rendering of the
messages before it with the generation prompt. A template under which a shorter rendering is
not the start of the longer one (it renders the start of a conversation differently once
more messages follow) is refused, naming the line, rather than masking the wrong ids; so is
a line that is not such a conversation, and a file without an assistant message.
Run with scripts/install-hf-python.sh's python (transformers, tokenizers).
"""
import json
import sys

import numpy as np
import transformers


def fail(where, why):
    sys.exit("chat_to_tokens.py: %s: %s" % (where, why))


def render(tokenizer, messages, prompt):
    """The ids of `messages` under the chat template; `prompt` adds the assistant's header."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def conversation(tokenizer, messages, where):
    """The ids of one conversation and its mask: 1 on what each assistant message adds."""
    ids = render(tokenizer, messages, False)
    mask = [0] * len(ids)
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = render(tokenizer, messages[:i], True)
        through = render(tokenizer, messages[:i + 1], False)
        if ids[:len(before)] != before or ids[:len(through)] != through:
            fail(where, "the chat template renders message %d differently once more messages "
                        "follow: its ids cannot be told apart" % (i + 1))
        mask[len(before):len(through)] = [1] * (len(through) - len(before))
    return ids, mask


def read_messages(line, where):
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        fail(where, "not JSON: %s" % e)
    messages = record.get("messages") if isinstance(record, dict) else None
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and
            isinstance(m.get("content"), str) for m in messages):
        fail(where, 'expected {"messages": [{"role": ..., "content": ...}, ...]}')
    return messages


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    model_dir, chats, out = sys.argv[1:]
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.chat_template is None:
        fail(model_dir, "the tokenizer has no chat template (tokenizer_config.json: chat_template)")
    ids, mask = [], []
    with open(chats, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                where = "%s:%d" % (chats, number)
                more_ids, more_mask = conversation(tokenizer, read_messages(line, where), where)
                ids += more_ids
                mask += more_mask
    if not any(mask):
        fail(chats, "no assistant message: nothing would be learned")
    dtype = np.uint16 if len(tokenizer) <= 1 << 16 else np.uint32
    np.array(ids, dtype=dtype).tofile(out + ".bin")
    np.array(mask, dtype=np.uint8).tofile(out + ".mask")
    print("chat_to_tokens.py: %s.bin (%d ids, data.dtype: %s), %s.mask (%.1f%% learned)"
          % (out, len(ids), np.dtype(dtype).name, out, 100.0 * sum(mask) / len(mask)))


if __name__ == "__main__":
    main()
