#!/usr/bin/env python3
"""Chat transcripts as trainerd's token data, with loss masks that learn the assistant alone.

    chat_to_tokens.py MODEL_DIR CHATS.jsonl OUT_PREFIX [END_TOKEN]

Reads one conversation per line of CHATS.jsonl, as transformers' chat templates and TRL take
them:

    {"messages": [{"role": "system", "content": "..."}, {"role": "user", "content": "..."},
                  {"role": "assistant", "content": "..."}, ...]}

renders each with the tokenizer and chat template of the Hugging Face folder MODEL_DIR, and
writes
  OUT_PREFIX.bin   the ids of every conversation, each followed by END_TOKEN's id (default:
                   the tokenizer's EOS), so that each is a document (little-endian uint16 when
                   the vocabulary fits 16 bits, else uint32: the line printed says which);
  OUT_PREFIX.mask  one byte per id: 1 for the ids an assistant message adds (its content and
                   the template's end of turn), 0 for the rest (system and user turns, the
                   template's headers, the "assistant" prompt before each answer, the end).
A job trains on them with (docs/trainer-run.md, "Loss masks" and "Documents"), the end id as
the line printed gives it:

    data: {format: tokens, train: train.bin, eval: [val.bin], loss_masks: true,
           document_end: ID}

so that packed conversations never see each other. END_TOKEN must not occur inside a
conversation (a template whose end of turn is the EOS, as some instruct tokenizers have: name
another token, such as "<|endoftext|>").

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


def end_id(tokenizer, model_dir, token):
    """The id of `token` (the tokenizer's EOS when None), which ends each conversation."""
    token = token if token is not None else tokenizer.eos_token
    if token is None:
        fail(model_dir, "the tokenizer has no EOS token: name the token that ends a conversation")
    found = tokenizer.convert_tokens_to_ids(token)
    if found is None or found == tokenizer.unk_token_id:
        fail(model_dir, "%r is not a token of the tokenizer" % token)
    return token, found


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    model_dir, chats, out = sys.argv[1:4]
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.chat_template is None:
        fail(model_dir, "the tokenizer has no chat template (tokenizer_config.json: chat_template)")
    end_token, end = end_id(tokenizer, model_dir, sys.argv[4] if len(sys.argv) == 5 else None)
    ids, mask = [], []
    with open(chats, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                where = "%s:%d" % (chats, number)
                more_ids, more_mask = conversation(tokenizer, read_messages(line, where), where)
                if end in more_ids:
                    fail(where, "the end token %r (id %d) occurs inside the conversation: it "
                                "cannot end documents; name another (END_TOKEN)" % (end_token, end))
                ids += more_ids + [end]
                mask += more_mask + [0]
    if not any(mask):
        fail(chats, "no assistant message: nothing would be learned")
    dtype = np.uint16 if len(tokenizer) <= 1 << 16 else np.uint32
    np.array(ids, dtype=dtype).tofile(out + ".bin")
    np.array(mask, dtype=np.uint8).tofile(out + ".mask")
    print("chat_to_tokens.py: %s.bin (%d ids, data.dtype: %s, data.document_end: %d), %s.mask "
          "(%.1f%% learned)" % (out, len(ids), np.dtype(dtype).name, end, out,
                                100.0 * sum(mask) / len(mask)))


if __name__ == "__main__":
    main()
