#!/usr/bin/env python3
"""The parameters the transformers Trainer decays (tests/trainer/hf_model_test.cc).

    transformers_decay_names.py FOLDER

Loads FOLDER with AutoModelForCausalLM.from_pretrained and prints, one per line, the names
of the parameters that Trainer.get_decay_parameter_names returns for it: those AdamW's
weight decay shrinks when the Trainer builds its optimizer (create_optimizer). Each
parameter once, by the name named_parameters() gives it: a tied head is the embedding,
which get_decay_parameter_names also lists as the head.
"""
import sys

import transformers


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1])
    named = {name for name, _ in model.named_parameters()}
    # The method reads nothing of the Trainer it belongs to.
    for name in transformers.Trainer.get_decay_parameter_names(None, model):
        if name in named:
            print(name)


if __name__ == "__main__":
    main()
