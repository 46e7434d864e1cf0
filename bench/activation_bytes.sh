#!/usr/bin/env bash
# Saved activation bytes per sample of the built-in GPT under both model.kernels, at several
# block sizes: bench/gpt256.yaml (4 blocks of 4 heads, width 256, dropout 0.1, microbatch 16,
# fp32) with its block_size replaced, measured by `trainer-run --ledger` (the ledger's
# `activations` category: live bytes after one microbatch's forward and loss, minus before
# it). Prints one JSON document: per block size and kernels the activation bytes per sample
# and the ledger's peak, and per block size the fused over explicit ratio of each.
#
# usage: bench/activation_bytes.sh [--bin DIR] [--blocks "128 256 512"]
set -euo pipefail

bin=build/bin blocks="128 256 512"
while (($#)); do
  case $1 in
    --bin) bin=$2 ;;
    --blocks) blocks=$2 ;;
    *) echo "usage: $0 [--bin DIR] [--blocks \"128 256 512\"]" >&2; exit 2 ;;
  esac
  shift 2
done
source_dir=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rows=()
for block in $blocks; do
  for kernels in explicit fused; do
    config=$tmp/gpt_${block}_$kernels.yaml
    sed -e "s/^  block_size: 256$/  block_size: $block/" \
        -e "s/^  bias: false$/  bias: false\n  kernels: $kernels/" "$source_dir/bench/gpt256.yaml" >"$config"
    ledger=$("$bin/trainer-run" --config "$config" --base-dir "$source_dir/bench" --ledger --json |
             tail -n 1)
    rows+=("{\"block_size\": $block, \"kernels\": \"$kernels\", \"ledger\": $ledger}")
  done
done
printf '%s\n' "${rows[@]}" | python3 -c '
import json, sys
rows = [json.loads(line) for line in sys.stdin]
out = {"benchmark": "activation_bytes", "config": "bench/gpt256.yaml", "results": [], "ratios": {}}
for r in rows:
    l = r["ledger"]
    per_sample = l["activations_bytes"] / l["plan"]["microbatch"]
    out["results"].append({"block_size": r["block_size"], "kernels": r["kernels"],
                           "activation_bytes_per_sample": per_sample, "peak_bytes": l["peak_bytes"],
                           "device": l["device_info"]["name"]})
by = {(x["block_size"], x["kernels"]): x for x in out["results"]}
for (block, kernels), x in by.items():
    if kernels == "fused" and (block, "explicit") in by:
        e = by[(block, "explicit")]
        out["ratios"][str(block)] = {
            "activation_bytes_fused_over_explicit": x["activation_bytes_per_sample"] / e["activation_bytes_per_sample"],
            "peak_fused_over_explicit": x["peak_bytes"] / e["peak_bytes"]}
print(json.dumps(out, indent=2))'
