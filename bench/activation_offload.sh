#!/usr/bin/env bash
# What keeping the blocks' activations in host memory (plan offload_activations,
# docs/model-state.md) saves and costs against keeping them and against checkpointing every
# block: the bundled job's GPT (4 layers, width 128, block 128, dropout 0.1) with the CPU
# simulating an accelerator (memory.simulated_device), trained `--updates` updates of
# microbatch 8 x 4 by `trainer-run --plan` with each of the three, `--repeats` times each,
# interleaved. Prints one JSON document with every run's samples/s and peak bytes (the
# evaluation's included), their medians and the ratios to the activations kept. Not a test
# (docs/benchmarks.md).
#
# usage: bench/activation_offload.sh [--bin DIR] [--updates N] [--repeats K]
set -euo pipefail

bin=build/bin updates=12 repeats=3
while (($#)); do
  case $1 in
    --bin) bin=$2 ;;
    --updates) updates=$2 ;;
    --repeats) repeats=$2 ;;
    *)
      echo "usage: $0 [--bin DIR] [--updates N] [--repeats K]" >&2
      exit 2
      ;;
  esac
  shift 2
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/job.yaml" << YAML
model: {kind: gpt, n_layer: 4, n_head: 4, n_embd: 128, block_size: 128, dropout: 0.1}
data:
  files: [/usr/share/common-licenses/GPL-3, /usr/share/common-licenses/Apache-2.0]
  eval_windows_per_slice: 8
training: {effective_batch: 32, updates: $updates, seed: 3, eval_interval: 1000,
           checkpoint_interval: 1000}
memory: {budget: 1GiB, simulated_device: true}
YAML
plans=("checkpoint_blocks: none" "checkpoint_blocks: all" "offload_activations: true")
finish() {  # the finish event's samples/s and peak bytes of a run with plan keys $1
  echo "{microbatch: 8, accumulation_steps: 4, precision: fp32, $1}" > "$tmp/plan.yaml"
  rm -rf "$tmp/out"
  "$bin/trainer-run" --config "$tmp/job.yaml" --plan "$tmp/plan.yaml" --output-dir "$tmp/out" \
    --json 2> /dev/null | grep '"event":"finish"'
}
runs=()
for ((r = 0; r < repeats; ++r)); do
  for plan in "${plans[@]}"; do runs+=("$(finish "$plan")"); done
done
/usr/bin/python3 - "${runs[@]}" << 'PY'
import json, statistics, sys
events = [json.loads(line) for line in sys.argv[1:]]
names = ("kept", "every_block_checkpointed", "offloaded")
out = {}
for i, name in enumerate(names):
    runs = events[i::len(names)]
    out[name] = {
        "samples_per_second": [e["samples_per_second"] for e in runs],
        "peak_bytes": [e["peak_bytes"] for e in runs],
        "median_samples_per_second": statistics.median(e["samples_per_second"] for e in runs),
        "median_peak_bytes": statistics.median(e["peak_bytes"] for e in runs),
    }
for name in names[1:]:
    out[name + "_over_kept_speed"] = (out[name]["median_samples_per_second"] /
                                      out["kept"]["median_samples_per_second"])
    out[name + "_over_kept_peak"] = (out[name]["median_peak_bytes"] /
                                     out["kept"]["median_peak_bytes"])
print(json.dumps(out, indent=1))
PY
