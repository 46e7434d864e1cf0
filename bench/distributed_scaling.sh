#!/usr/bin/env bash
# Data-parallel scaling on this host: the bundled default job (GPT 4 x 128, block 128,
# effective batch 32) trained as 1 rank x T threads and as R ranks x T/R threads (trainer-launch,
# loopback Gloo), interleaved, each `--repeats` times, in fp32 and bf16. Prints one JSON
# document: per configuration the samples/s of every run (warm-up excluded, trainer-run's
# finish event) and their median, and the ratio of the medians. Not a test (docs/benchmarks.md).
#
# usage: bench/distributed_scaling.sh [--bin DIR] [--ranks R] [--threads T] [--updates N]
#                                     [--repeats K]
set -euo pipefail

bin=build/bin ranks=2 threads=2 updates=30 repeats=5
while (($#)); do
  case $1 in
    --bin) bin=$2 ;;
    --ranks) ranks=$2 ;;
    --threads) threads=$2 ;;
    --updates) updates=$2 ;;
    --repeats) repeats=$2 ;;
    *) echo "usage: $0 [--bin DIR] [--ranks R] [--threads T] [--updates N] [--repeats K]" >&2
       exit 2 ;;
  esac
  shift 2
done
((threads % ranks == 0)) || { echo "$0: --threads must be a multiple of --ranks" >&2; exit 2; }
source_dir=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The default job with its budget lifted (every plan fits) and a fixed plan per rank.
job() {  # ranks threads precision
  local share=$((32 / $1))
  sed -e "s/^  updates: .*/  updates: $updates/" -e "s/^  eval_interval: .*/  eval_interval: 1000/" \
      -e "s/^  checkpoint_interval: .*/  checkpoint_interval: 1000/" \
      -e "s/^  threads: .*/  threads: $2/" -e "s/^  budget: .*/  budget: 8GiB/" \
      "$source_dir/configs/default.yaml"
  printf 'distributed: {ranks: %d}\nplan: {microbatch: %d, precision: %s}\n' "$1" "$share" "$3"
}

# samples/s of one run of `ranks` ranks.
run() {  # ranks threads precision
  local config=$tmp/job-$1-$3.yaml out=$tmp/out-$1-$3
  job "$@" > "$config"
  rm -rf "$out"
  local command=("$bin/trainer-run" --config "$config" --base-dir "$source_dir/configs"
                 --output-dir "$out" --json)
  if (($1 > 1)); then command=("$bin/trainer-launch" --ranks "$1" -- "${command[@]}"); fi
  "${command[@]}" 2> "$tmp/stderr" | tail -n 1 |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["samples_per_second"])' ||
    { cat "$tmp/stderr" >&2; exit 1; }
}

declare -A samples
for ((i = 0; i < repeats; ++i)); do
  for precision in fp32 bf16; do
    samples[1-$precision]+="$(run 1 "$threads" "$precision") "
    samples[$ranks-$precision]+="$(run "$ranks" $((threads / ranks)) "$precision") "
  done
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
/usr/bin/python3 - "$cpu" "$ranks" "$threads" "$updates" "$repeats" \
  "${samples[1-fp32]}" "${samples[$ranks-fp32]}" "${samples[1-bf16]}" "${samples[$ranks-bf16]}" <<'EOF'
import json, statistics, sys
cpu, ranks, threads, updates, repeats = sys.argv[1], *map(int, sys.argv[2:6])
runs = [list(map(float, text.split())) for text in sys.argv[6:10]]
out = {"cpu": cpu, "job": "configs/default.yaml, effective batch 32", "updates": updates,
       "repeats": repeats, "method": "samples/s of trainer-run's finish event (first 2 updates "
       "excluded), configurations interleaved", "results": []}
for precision, one, many in (("fp32", runs[0], runs[1]), ("bf16", runs[2], runs[3])):
    out["results"].append({
        "precision": precision,
        f"1_rank_x_{threads}_threads": {"samples_per_second": one,
                                          "median": statistics.median(one)},
        f"{ranks}_ranks_x_{threads // ranks}_threads": {"samples_per_second": many,
                                                       "median": statistics.median(many)},
        "ratio_of_medians": statistics.median(many) / statistics.median(one)})
print(json.dumps(out, indent=2))
EOF
