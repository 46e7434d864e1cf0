#!/usr/bin/env bash
# examples/hf as a user runs it: make_example.py makes a model, its tokenizer, train.bin and
# a job; trainer-run trains it (4 updates); transformers loads the trained folder, its
# tokenizer included, with no missing or unexpected weight.
#
# Usage: example_test.sh HF_PYTHON TRAINER_RUN OUT_DIR
set -euo pipefail
python=$1
trainer_run=$2
out=$3
source_dir=$(cd "$(dirname "$0")/../../.." && pwd)
rm -rf "$out"
"$python" "$source_dir/examples/hf/make_example.py" "$out" --updates 4 > /dev/null
(cd "$out" && "$trainer_run" --config job.yaml --output-dir out --json > train.jsonl)
grep -q '"event":"finish"' "$out/train.jsonl" || { echo "FAIL: no finish event" >&2; exit 1; }
"$python" - "$out/out" << 'PY'
import sys
import transformers
model, info = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], output_loading_info=True)
assert not any(info.values()), info
tokenizer = transformers.AutoTokenizer.from_pretrained(sys.argv[1])
ids = tokenizer("Everyone is permitted to copy", return_tensors="pt").input_ids
print("PASS: examples/hf trained, loaded by transformers: %d parameters, %d tokens, logits %s"
      % (model.num_parameters(), ids.shape[1], tuple(model(ids).logits.shape)))
PY
