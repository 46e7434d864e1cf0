#!/usr/bin/env bash
# What the output layer in chunks (plan output_chunk, docs/memory-ledger.md) saves and costs:
# a GPT whose vocabulary (`--vocab`, default 32768) dwarfs its width (128, block 128), trained
# `--updates` updates of microbatch 8 by `trainer-run --plan` with the output layer whole and
# in chunks of `--chunk` positions (default 128: one sample's), `--repeats` times each,
# interleaved. Prints one JSON document with every run's samples/s and peak bytes (the
# evaluation's included) and their medians. Not a test (docs/benchmarks.md).
#
# usage: bench/output_chunks.sh [--bin DIR] [--vocab V] [--chunk C] [--updates N] [--repeats K]
set -euo pipefail

bin=build/bin vocab=32768 chunk=128 updates=12 repeats=3
while (($#)); do
  case $1 in
    --bin) bin=$2 ;;
    --vocab) vocab=$2 ;;
    --chunk) chunk=$2 ;;
    --updates) updates=$2 ;;
    --repeats) repeats=$2 ;;
    *)
      echo "usage: $0 [--bin DIR] [--vocab V] [--chunk C] [--updates N] [--repeats K]" >&2
      exit 2
      ;;
  esac
  shift 2
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/job.yaml" << YAML
model: {kind: gpt, n_layer: 2, n_head: 4, n_embd: 128, block_size: 128, vocab_size: $vocab}
data:
  files: [/usr/share/common-licenses/GPL-3, /usr/share/common-licenses/Apache-2.0]
  eval_windows_per_slice: 8
training: {effective_batch: 8, updates: $updates, seed: 3, eval_interval: 1000,
           checkpoint_interval: 1000}
YAML
finish() {  # the finish event's samples/s and peak bytes of a run with output_chunk $1
  echo "{microbatch: 8, accumulation_steps: 1, precision: fp32, output_chunk: $1}" > "$tmp/plan.yaml"
  rm -rf "$tmp/out"
  "$bin/trainer-run" --config "$tmp/job.yaml" --plan "$tmp/plan.yaml" --output-dir "$tmp/out" \
    --json 2> /dev/null | grep '"event":"finish"'
}
runs=()
for ((r = 0; r < repeats; ++r)); do
  runs+=("$(finish 0)" "$(finish "$chunk")")
done
/usr/bin/python3 - "$vocab" "$chunk" "${runs[@]}" << 'PY'
import json, statistics, sys
vocab, chunk, *lines = sys.argv[1:]
events = [json.loads(line) for line in lines]
out = {"vocab": int(vocab), "output_chunk": int(chunk)}
for name, runs in (("whole", events[0::2]), ("chunked", events[1::2])):
    out[name] = {
        "samples_per_second": [e["samples_per_second"] for e in runs],
        "peak_bytes": [e["peak_bytes"] for e in runs],
        "median_samples_per_second": statistics.median(e["samples_per_second"] for e in runs),
        "median_peak_bytes": statistics.median(e["peak_bytes"] for e in runs),
    }
out["chunked_over_whole_speed"] = (out["chunked"]["median_samples_per_second"] /
                                   out["whole"]["median_samples_per_second"])
out["chunked_over_whole_peak"] = (out["chunked"]["median_peak_bytes"] /
                                  out["whole"]["median_peak_bytes"])
print(json.dumps(out, indent=1))
PY
