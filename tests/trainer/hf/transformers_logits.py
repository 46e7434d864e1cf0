#!/usr/bin/env python3
"""What transformers computes for a folder trainerd released (tests/trainer/hf_model_test.cc).

    transformers_logits.py FOLDER IDS.safetensors OUT.safetensors

Loads FOLDER with AutoModelForCausalLM.from_pretrained (eager attention, float32), fails when
it reports a missing, unexpected or mismatched weight, and writes the logits of the
`input_ids` of IDS.safetensors in evaluation mode to OUT.safetensors as `logits`.
"""
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file


def write_logits(model, ids_path, out_path):
    """Writes `model`'s logits of the input_ids of `ids_path`, in evaluation mode."""
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=load_file(ids_path)["input_ids"]).logits
    save_file({"logits": logits.contiguous()}, out_path)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    folder, ids_path, out_path = sys.argv[1:]
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="eager", output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        sys.exit("transformers_logits.py: %s loads with %s" % (folder, problems))
    if model.dtype != torch.float32:
        sys.exit("transformers_logits.py: %s loads as %s, not float32" % (folder, model.dtype))
    write_logits(model, ids_path, out_path)


if __name__ == "__main__":
    main()
