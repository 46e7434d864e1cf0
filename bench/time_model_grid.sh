#!/usr/bin/env bash
# The planner's time model against measured updates over the grid of issue 50: the built-in
# GPT at three sizes, a Hugging Face Llama and Qwen2 (random, made by the real
# `transformers`), and an LSTM exported to TorchScript by Debian's PyTorch; for each,
# bench/time_model_bench.cc's grid of levers (microbatch, accumulation, checkpointing, bf16,
# the optimizer state on the host; bf16 on gpt_small and hf_llama alone). Prints one JSON document: over all jobs, each lever's
# median and worst absolute error, and each job's bench output. Not a test (docs/benchmarks.md).
#
# usage: bench/time_model_grid.sh [--bin DIR] [--rounds N] [--jobs a,b]
#   --bin     the build's bench folder (default build/bench)
#   --jobs    of gpt_small, gpt_wide, gpt_deep, hf_llama, hf_qwen2, lstm (default all)
# Needs scripts/install-hf-python.sh's python (the Hugging Face folders) and /usr/bin/python3
# with Debian's python3-torch (the TorchScript LSTM).
set -euo pipefail

bin=build/bench rounds=3 jobs=gpt_small,gpt_wide,gpt_deep,hf_llama,hf_qwen2,lstm
while (($#)); do
  case $1 in
    --bin) bin=$2 ;;
    --rounds) rounds=$2 ;;
    --jobs) jobs=$2 ;;
    *)
      echo "usage: $0 [--bin DIR] [--rounds N] [--jobs a,b]" >&2
      exit 2
      ;;
  esac
  shift 2
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
licences="[/usr/share/common-licenses/GPL-3, /usr/share/common-licenses/Apache-2.0]"
gpt_job() {  # name n_layer n_embd block_size effective_batch
  cat > "$tmp/$1.yaml" << YAML
model: {kind: gpt, n_layer: $2, n_head: 4, n_embd: $3, block_size: $4, dropout: 0.0}
data: {files: $licences}
training: {effective_batch: $5, updates: 100}
runtime: {threads: auto}
YAML
}
gpt_job gpt_small 4 128 128 32 # configs/default.yaml's model
gpt_job gpt_wide 4 256 128 16
gpt_job gpt_deep 8 128 256 8

if [[ $jobs == *hf_* ]]; then
  python=$(scripts/install-hf-python.sh --python)
  "$python" examples/hf/make_example.py "$tmp/hf" > /dev/null # Llama, 4 x 128, 2048 ids
  "$python" - "$tmp/hf" << 'PY'
import sys, transformers
llama = transformers.AutoConfig.from_pretrained(sys.argv[1] + "/model")
qwen2 = transformers.Qwen2Config(
    vocab_size=llama.vocab_size, hidden_size=llama.hidden_size,
    intermediate_size=llama.intermediate_size, num_hidden_layers=llama.num_hidden_layers,
    num_attention_heads=llama.num_attention_heads, num_key_value_heads=llama.num_key_value_heads,
    max_position_embeddings=llama.max_position_embeddings)
transformers.Qwen2ForCausalLM(qwen2).save_pretrained(sys.argv[1] + "/qwen2")
PY
  for kind in llama qwen2; do
    folder=$([[ $kind == llama ]] && echo model || echo qwen2)
    cat > "$tmp/hf_$kind.yaml" << YAML
model: {kind: hf, path: $tmp/hf/$folder, block_size: 128}
data: {format: tokens, train: $tmp/hf/train.bin, eval: [$tmp/hf/val.bin]}
training: {effective_batch: 16, updates: 100}
runtime: {threads: auto}
YAML
  done
fi
if [[ $jobs == *lstm* ]]; then
  /usr/bin/python3 examples/torchscript/export_models.py --out "$tmp/ts" --width 256 \
    --block-size 64 > /dev/null
  sed -e 's/effective_batch: 16/effective_batch: 32/' "$tmp/ts/lstm.yaml" > "$tmp/lstm.yaml"
  sed -i -e "s|path: lstm.pt|path: $tmp/ts/lstm.pt|" "$tmp/lstm.yaml"
fi

mkdir "$tmp/out"
for job in ${jobs//,/ }; do
  echo "time_model_grid: $job" >&2
  # bf16 on the bundled job's model and on the Llama: on a CPU without bf16 hardware its
  # updates take 25 times fp32's.
  bf16=$([[ $job == gpt_small || $job == hf_llama ]] && echo 1 || echo 0)
  "$bin/time_model_bench" --config "$tmp/$job.yaml" --rounds "$rounds" --bf16 "$bf16" \
    > "$tmp/out/$job.json"
done
python3 - "$tmp/out" ${jobs//,/ } << 'PY'
import json, statistics, sys
out, names = sys.argv[1], sys.argv[2:]
jobs = {name: json.load(open("%s/%s.json" % (out, name))) for name in names}
levers = {}
for job in jobs.values():
    for point in job["points"]:
        for lever in point["levers"] + ["all"]:
            levers.setdefault(lever, []).append(abs(point["error"]))
cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
           if line.startswith("model name"))
print(json.dumps({"cpu": cpu, "measurement_noise": {
    name: job["measurement_noise"] for name, job in jobs.items()}, "levers": {
    lever: {"points": len(e), "median_abs_error": statistics.median(e), "worst_abs_error": max(e)}
    for lever, e in levers.items()}, "jobs": jobs}, indent=1))
PY
