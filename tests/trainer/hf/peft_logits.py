#!/usr/bin/env python3
"""What peft computes with an adapter trainerd released (tests/trainer/hf_model_test.cc).

    peft_logits.py BASE_FOLDER ADAPTER_FOLDER IDS.safetensors OUT.safetensors

Loads BASE_FOLDER with AutoModelForCausalLM.from_pretrained (eager attention, float32), puts
the adapter of ADAPTER_FOLDER (adapter_config.json, adapter_model.safetensors) on it with
peft's PeftModel.from_pretrained, fails unless the model's adapter tensors are the file's by
name and value, and writes the logits of the `input_ids` of IDS.safetensors in evaluation
mode to OUT.safetensors as `logits`.
"""
import sys

import peft
import torch
import transformers
from safetensors.torch import load_file
from transformers_logits import write_logits


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    base_folder, adapter_folder, ids_path, out_path = sys.argv[1:]
    base = transformers.AutoModelForCausalLM.from_pretrained(
        base_folder, attn_implementation="eager", dtype=torch.float32)
    model = peft.PeftModel.from_pretrained(base, adapter_folder)
    # The model's adapter tensors are the file's, by name and value.
    stored = load_file(adapter_folder + "/adapter_model.safetensors")
    loaded = {name: tensor for name, tensor in model.state_dict().items() if "lora_" in name}
    names = {name.replace(".default", "") for name in loaded}
    if names != set(stored):
        sys.exit("peft_logits.py: the adapter's tensors %s, the model's %s"
                 % (sorted(set(stored) - names), sorted(names - set(stored))))
    for name, tensor in loaded.items():
        if not torch.equal(tensor, stored[name.replace(".default", "")]):
            sys.exit("peft_logits.py: %s was not loaded as stored" % name)
    write_logits(model, ids_path, out_path)


if __name__ == "__main__":
    main()
