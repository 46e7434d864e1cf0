#!/usr/bin/env python3
"""Small random Hugging Face causal-LM folders, made by the real `transformers`, with what
its implementation computes on them, for trainerd's tests (tests/trainer/hf_model_test.cc).

    make_hf_models.py OUT_DIR

For each variant, OUT_DIR/<variant>/ is the folder save_pretrained wrote (config.json,
model.safetensors or an index with shards, generation_config.json) and
OUT_DIR/<variant>.reference.safetensors holds, for input_ids [2, 24] drawn at random:
`logits` of the model in evaluation mode (eager attention, float32), `loss`, the mean
next-token cross-entropy of those logits, and `grad.<name>` for every parameter, the
gradient of one backward of that loss; and `labels` (the ids, -100 at positions a loss mask
leaves out), `masked_loss`, the model's own loss of those labels (model(input_ids,
labels=labels).loss), and `masked_grad.<name>`, its gradients; and `packed_position_ids`, the
positions of documents of 9, 4 and 11 ids packed in the first row and of 15 and 9 in the
second, and `packed_logits`, the logits
of the ids under them (transformers' flattening collator: position_ids without an attention
mask and without a cache make a block-diagonal causal mask).
Run with scripts/install-hf-python.sh's python.
"""
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file

COMMON = dict(vocab_size=96, hidden_size=32, intermediate_size=56, num_hidden_layers=2,
              num_attention_heads=4, max_position_embeddings=64, initializer_range=0.1)
PACKED_DOCUMENTS = ((9, 4, 11), (15, 9))  # each row's 24 ids as documents
GPT2 = dict(vocab_size=96, n_embd=32, n_inner=56, n_layer=2, n_head=4, n_positions=64,
            initializer_range=0.1)
LLAMA3 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 16}

# name: (config class, its keys, how the folder is saved); Llama-family keys add to COMMON
VARIANTS = {
    # grouped-query attention (2 key/value heads for 4), untied head, a padding token (its
    # embedding row takes no gradient)
    "llama_gqa": (transformers.LlamaConfig, dict(num_key_value_heads=2, pad_token_id=5), {}),
    # multi-head, tied embedding, biases on attention and MLP, Llama 3.1's rope scaling
    "llama_tied_llama3_bias": (transformers.LlamaConfig,
                               dict(num_key_value_heads=4, tie_word_embeddings=True,
                                    attention_bias=True, mlp_bias=True, rope_parameters=LLAMA3),
                               {}),
    # the same model with config.json as transformers 4.x wrote it (rope_theta, rope_scaling)
    "llama_v4_config": (transformers.LlamaConfig,
                        dict(num_key_value_heads=4, tie_word_embeddings=True,
                             attention_bias=True, mlp_bias=True, rope_parameters=LLAMA3),
                        {"v4_config": True}),
    # biases on q, k and v only; tied as Qwen2.5-0.5B is; a padding token counted from the end
    # (the tied head's gradient reaches its row, the embedding's does not)
    "qwen2": (transformers.Qwen2Config,
              dict(num_key_value_heads=2, tie_word_embeddings=True, pad_token_id=-2), {}),
    # one key/value head (multi-query), no sliding window
    "mistral": (transformers.MistralConfig, dict(num_key_value_heads=1, sliding_window=None), {}),
    # every layer attends over its last 5 positions (of the 24 the reference feeds it)
    "mistral_window": (transformers.MistralConfig, dict(num_key_value_heads=1, sliding_window=5),
                       {}),
    # Qwen2's window on the layers from max_window_layers on: the first layer attends over all
    # positions, the second over its last 6
    "qwen2_window": (transformers.Qwen2Config,
                     dict(num_key_value_heads=2, use_sliding_window=True, sliding_window=6,
                          max_window_layers=1), {}),
    # weights in shards named by model.safetensors.index.json
    "llama_sharded": (transformers.LlamaConfig, dict(num_key_value_heads=2),
                      {"max_shard_size": "20KB"}),
    # GPT-2: LayerNorm, learned positions, Conv1D weights [in, out], tied head, gelu_new
    "gpt2": (transformers.GPT2Config, GPT2, {}),
    # the same with the weights named as the Hub's GPT-2 checkpoints name them: no
    # "transformer." prefix, and the causal-mask buffers h.N.attn.bias
    "gpt2_hub_names": (transformers.GPT2Config, GPT2, {"hub_names": True}),
    # vocabularies that outweigh the layers, as the models teams fine-tune have (the output
    # layer in chunks, tests/trainer/hf_paper_ledger_test.cc): untied, and tied as Qwen2.5 is
    "llama_wide_vocab": (transformers.LlamaConfig, dict(num_key_value_heads=2, vocab_size=4096),
                         {}),
    "qwen2_wide_vocab": (transformers.Qwen2Config,
                         dict(num_key_value_heads=2, tie_word_embeddings=True, vocab_size=4096),
                         {}),
}


def as_v4_config(path):
    """Rewrites config.json's rope_parameters as transformers 4.x wrote rope settings."""
    with open(path) as f:
        config = json.load(f)
    rope = dict(config.pop("rope_parameters"))
    config["rope_theta"] = rope.pop("rope_theta")
    config["rope_scaling"] = rope
    with open(path, "w") as f:
        json.dump(config, f, indent=2)


def as_hub_names(path, config):
    """Renames model.safetensors' tensors as the Hub's gpt2 checkpoint has them."""
    tensors = {k.removeprefix("transformer."): v for k, v in load_file(path).items()}
    n = config.n_positions
    for layer in range(config.n_layer):
        tensors["h.%d.attn.bias" % layer] = torch.tril(torch.ones(n, n)).view(1, 1, n, n)
    save_file(tensors, path, metadata={"format": "pt"})


def masked_labels(ids):
    """`ids` as labels with -100 where a chat's prompt would be: unequal between the rows."""
    labels = ids.clone()
    labels[:, :6] = -100
    labels[0, 10:15] = -100
    labels[1, 18:] = -100
    return labels


def make(out_dir, name, config_class, keys, how):
    torch.manual_seed(sum(map(ord, name)))
    config = config_class(**keys) if config_class is transformers.GPT2Config else \
        config_class(**{**COMMON, **keys})
    config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(config).float()
    folder = os.path.join(out_dir, name)
    model.save_pretrained(folder, max_shard_size=how.get("max_shard_size", "5GB"))
    if how.get("v4_config"):
        as_v4_config(os.path.join(folder, "config.json"))
    if how.get("hub_names"):
        as_hub_names(os.path.join(folder, "model.safetensors"), config)
    model.eval()
    ids = torch.randint(0, COMMON["vocab_size"], (2, 24))
    if getattr(config, "pad_token_id", None) is not None:
        ids[:, 3] = config.pad_token_id % COMMON["vocab_size"]  # among the inputs
    logits = model(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
    loss.backward()
    reference = {"input_ids": ids, "logits": logits.detach().contiguous(),
                 "loss": loss.detach().reshape(1)}
    for pname, p in model.named_parameters():
        reference["grad." + pname] = p.grad.contiguous()
    model.zero_grad()
    labels = masked_labels(ids)
    masked = model(input_ids=ids, labels=labels).loss
    masked.backward()
    reference.update({"labels": labels, "masked_loss": masked.detach().reshape(1)})
    positions = torch.stack([torch.cat([torch.arange(n) for n in row]) for row in PACKED_DOCUMENTS])
    with torch.no_grad():
        # Without use_cache=False transformers makes a cache in evaluation mode, and with a
        # cache it does not read position_ids as packing: the documents would see each other.
        packed = model(input_ids=ids, position_ids=positions, use_cache=False).logits
    reference.update({"packed_position_ids": positions, "packed_logits": packed.contiguous()})
    for pname, p in model.named_parameters():
        reference["masked_grad." + pname] = p.grad.contiguous()
    save_file(reference, os.path.join(out_dir, name + ".reference.safetensors"),
              metadata={"transformers": transformers.__version__, "torch": torch.__version__})


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    for name, (config_class, keys, how) in VARIANTS.items():
        make(out_dir, name, config_class, keys, how)
    print("make_hf_models.py: %d folders in %s (transformers %s, torch %s)"
          % (len(VARIANTS), out_dir, transformers.__version__, torch.__version__))


if __name__ == "__main__":
    main()
