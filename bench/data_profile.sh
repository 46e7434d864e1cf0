#!/usr/bin/env bash
# What the input-quality profile costs (docs/data-quality.md): a uint16 token file of
# `--tokens` million Zipf-distributed ids (vocabulary 50304), profiled by
# `trainer-run --data-profile` with an empty digest cache (the file streamed: SHA-256 and the
# ids' counts in one pass) and again with the cache filled (nothing read), against
# `sha256sum` of the same file, the hash alone. Each `--repeats` times, interleaved; the page
# cache is warm for all of them. Prints one JSON document with every wall time and the
# medians. Not a test (docs/benchmarks.md).
#
# usage: bench/data_profile.sh [--bin DIR] [--tokens MILLIONS] [--repeats K]
set -euo pipefail

bin=build/bin tokens=100 repeats=3
while (($#)); do
  case $1 in
    --bin) bin=$2 ;;
    --tokens) tokens=$2 ;;
    --repeats) repeats=$2 ;;
    *) echo "usage: $0 [--bin DIR] [--tokens MILLIONS] [--repeats K]" >&2; exit 2 ;;
  esac
  shift 2
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -c "
import numpy, sys
n = int(float(sys.argv[1]) * 1e6)
ids = numpy.minimum(numpy.random.default_rng(7).zipf(1.2, n) - 1, 50303).astype(numpy.uint16)
ids.tofile(sys.argv[2] + '/train.bin'); ids[:100000].tofile(sys.argv[2] + '/val.bin')
" "$tokens" "$tmp"
cat > "$tmp/job.yaml" << YAML
model: {kind: gpt, n_layer: 1, n_head: 1, n_embd: 16, block_size: 64, vocab_size: 50304}
data: {format: tokens, train: $tmp/train.bin, eval: [$tmp/val.bin]}
YAML
seconds() {  # wall seconds of "$@", its output discarded
  local start end
  start=$(date +%s.%N)
  "$@" > /dev/null
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}
hash=() cold=() cached=()
for ((r = 0; r < repeats; ++r)); do
  hash+=("$(seconds sha256sum "$tmp/train.bin")")
  rm -rf "$tmp/cache"
  profile=(env "XDG_CACHE_HOME=$tmp/cache" "$bin/trainer-run" --config "$tmp/job.yaml" --data-profile --json)
  cold+=("$(seconds "${profile[@]}")")
  cached+=("$(seconds "${profile[@]}")")
done
/usr/bin/python3 - "$tokens" "$(stat -c %s "$tmp/train.bin")" "${hash[*]}" "${cold[*]}" "${cached[*]}" << 'PY'
import json, statistics, sys
tokens, size, *runs = sys.argv[1:]
names = ("sha256sum_seconds", "profile_streamed_seconds", "profile_cached_seconds")
out = {"tokens_millions": float(tokens), "file_bytes": int(size)}
for name, values in zip(names, runs):
    v = [float(x) for x in values.split()]
    out[name] = v
    out[name.replace("_seconds", "_median_seconds")] = statistics.median(v)
print(json.dumps(out, indent=1))
PY
