#!/usr/bin/env bash
# What ZeRO sharding (plan.zero_stage, docs/model-state.md) saves and costs per rank: the job of
# bench/gpt_wide.yaml (50 M parameters, its model state the largest category) as 2 ranks x 1
# thread (trainer-launch, loopback Gloo), each rank's 4 samples in microbatches of
# `--microbatch`, unsharded and at ZeRO stages 1 and 2, interleaved, each `--repeats` times. Prints one JSON document: per stage rank 0's device peak bytes and
# samples/s of every run (trainer-run's finish event, warm-up excluded) and their medians.
# Not a test (docs/benchmarks.md).
#
# usage: bench/state_sharding.sh [--bin DIR] [--microbatch M] [--updates N] [--repeats K]
set -euo pipefail

bin=build/bin microbatch=4 updates=12 repeats=3
while (($#)); do
  case $1 in
    --bin) bin=$2 ;;
    --microbatch) microbatch=$2 ;;
    --updates) updates=$2 ;;
    --repeats) repeats=$2 ;;
    *) echo "usage: $0 [--bin DIR] [--microbatch M] [--updates N] [--repeats K]" >&2; exit 2 ;;
  esac
  shift 2
done
source_dir=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "peak_bytes samples_per_second" of one 2-rank run at ZeRO stage `stage`.
run() {  # stage
  local config=$tmp/job-$1.yaml out=$tmp/out-$1
  sed -e "s/^  updates: .*/  updates: $updates/" -e "s/^  threads: .*/  threads: 1/" \
      -e "s/^  microbatch: .*/  microbatch: $microbatch\n  zero_stage: $1/" \
      "$source_dir/bench/gpt_wide.yaml" > "$config"
  printf 'distributed: {ranks: 2}\n' >> "$config"
  rm -rf "$out"
  "$bin/trainer-launch" --ranks 2 -- "$bin/trainer-run" --config "$config" --output-dir "$out" \
      --json 2> "$tmp/stderr" | tail -n 1 |
    /usr/bin/python3 -c 'import json, sys; f = json.load(sys.stdin)
print(f["peak_bytes"], f["samples_per_second"])' || { cat "$tmp/stderr" >&2; exit 1; }
}

declare -A runs
for ((i = 0; i < repeats; ++i)); do
  for stage in 0 1 2; do runs[$stage]+="$(run "$stage"),"; done
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
/usr/bin/python3 - "$cpu" "$microbatch" "$updates" "$repeats" "${runs[0]}" "${runs[1]}" \
  "${runs[2]}" <<'PY'
import json, statistics, sys
cpu, microbatch, updates, repeats = sys.argv[1], *map(int, sys.argv[2:5])
out = {"cpu": cpu, "job": "bench/gpt_wide.yaml as 2 ranks x 1 thread, 4 samples per rank in "
                          f"microbatches of {microbatch}",
       "updates": updates, "repeats": repeats,
       "method": "rank 0's device peak (counting allocator) and samples/s of trainer-run's "
                 "finish event (first 2 updates excluded), stages interleaved",
       "results": []}
for stage, text in enumerate(sys.argv[5:8]):
    pairs = [run.split() for run in text.split(",") if run]
    peaks = [int(p) for p, _ in pairs]
    speeds = [float(s) for _, s in pairs]
    out["results"].append({"zero_stage": stage, "peak_bytes": peaks,
                           "median_peak_mib": statistics.median(peaks) / 2**20,
                           "samples_per_second": speeds,
                           "median_samples_per_second": statistics.median(speeds)})
base = out["results"][0]
for r in out["results"]:
    r["peak_vs_unsharded"] = r["median_peak_mib"] / base["median_peak_mib"]
    r["speed_vs_unsharded"] = r["median_samples_per_second"] / base["median_samples_per_second"]
print(json.dumps(out, indent=2))
PY
