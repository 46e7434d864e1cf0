#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz (ASan + UBSan, every trainerd library
# instrumented) and runs them one after the other, one process each (docs/fuzzing.md):
#   scripts/fuzz.sh --smoke             each harness on its seeds, then 15 s of mutation (CI)
#   scripts/fuzz.sh --runs 1000000      each harness to 1,000,000 executions
#   scripts/fuzz.sh --time 600 NAME     one harness for 600 s
#   scripts/fuzz.sh --build-only
# NAME... limits the run to some harnesses: job_spec_parser array_file daemon_config
# control_request worker_report operator_commands outcome_lines hf_folder (clang, ./build-fuzz)
# and training_checkpoint (GCC, ./build-fuzz/gcc: clang cannot compile LibTorch 1.13's
# headers). Each run writes libFuzzer's log to
# build-fuzz/fuzz/logs/NAME.log and prints a summary line (executions, exec/s, wall time, cov,
# ft, peak RSS, result). A crash, leak, hang (-timeout), UBSan report or out-of-memory input
# goes to build-fuzz/fuzz/findings/NAME/ and makes the script exit 1. The seeds in
# tests/fuzz/corpus/NAME are read, not written: inputs with new coverage go to
# build-fuzz/fuzz/corpus/NAME.
# FUZZ_SMOKE_SECONDS, FUZZ_RSS_LIMIT_MB, FUZZ_TIMEOUT_SECONDS and FUZZ_JOBS (build jobs,
# default 2) override the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

all=(job_spec_parser array_file daemon_config control_request worker_report operator_commands
  outcome_lines hf_folder training_checkpoint)
mode=smoke
limit=()
names=()
while (($#)); do
  case $1 in
    --smoke) mode=smoke; shift ;;
    --runs) mode=runs; limit=(-runs="${2:?--runs needs a count}"); shift 2 ;;
    --time) mode=time; limit=(-max_total_time="${2:?--time needs seconds}"); shift 2 ;;
    --build-only) mode=build; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
((${#names[@]})) || names=("${all[@]}")
if [[ $mode == smoke ]]; then limit=(-max_total_time="${FUZZ_SMOKE_SECONDS:-15}"); fi

# The clang build (build-fuzz) has every harness but the LibTorch one, which the GCC build
# (build-fuzz/gcc) has: clang cannot compile LibTorch 1.13's headers (docs/fuzzing.md).
dir_of() { [[ $1 == training_checkpoint ]] && echo build-fuzz/gcc || echo build-fuzz; }
# -Og -g1 (-O1 for clang, line tables for the reports) instead of RelWithDebInfo's -O2 -g:
# compiling LibTorch's headers under the sanitizers is slow (the GCC build compiles the
# checkpoint reader alone for that reason, tests/fuzz/CMakeLists.txt).
configure() {  # DIR CC CXX; ccache, when installed, is the compiler launcher
  CC=$2 CXX=$3 cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-Og -g1 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-Og -g1 -DNDEBUG" \
    -DTRAINERD_BUILD_FUZZERS=ON -DTRAINERD_BUILD_TESTS=OFF -DTRAINERD_BUILD_BENCHMARKS=OFF >/dev/null
}
for dir in build-fuzz build-fuzz/gcc; do
  targets=()
  for name in "${names[@]}"; do [[ $(dir_of "$name") == "$dir" ]] && targets+=("${name}_fuzzer"); done
  ((${#targets[@]})) || continue
  if [[ $dir == build-fuzz ]]; then configure "$dir" clang clang++; else configure "$dir" gcc g++; fi
  cmake --build "$dir" --parallel "${FUZZ_JOBS:-2}" --target "${targets[@]}"
done
[[ $mode == build ]] && exit 0

out=build-fuzz/fuzz
asan_options=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Leaks inside third-party libraries trainerd cannot free, each with its reason.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0}
failed=0
printf '%-20s %10s %8s %7s %6s %6s %9s  %s\n' harness executions exec/s wall_s cov ft peak_rss result
for name in "${names[@]}"; do
  seeds=tests/fuzz/corpus/$name
  mkdir -p "$out/corpus/$name" "$out/findings/$name" "$out/logs"
  log=$out/logs/$name.log
  started=$SECONDS
  status=ok
  # -timeout: an input running longer is a hang; -rss_limit_mb: one using more is a finding.
  extra=()
  options=$asan_options
  if [[ $name == training_checkpoint ]]; then
    # GCC gives libFuzzer comparisons, not edges: value profiles are its only guidance.
    extra=(-use_value_profile=1)
    # LibTorch has no frame pointers: without the slow unwinder a leak's stack ends in
    # libtorch_cpu.so and no suppression can name the function.
    options+=:fast_unwind_on_malloc=0
  fi
  if ! ASAN_OPTIONS=$options "$(dir_of "$name")/fuzz/${name}_fuzzer" "${limit[@]}" "${extra[@]}" \
      -rss_limit_mb="${FUZZ_RSS_LIMIT_MB:-2048}" \
      -timeout="${FUZZ_TIMEOUT_SECONDS:-10}" -detect_leaks=1 -print_final_stats=1 \
      -artifact_prefix="$out/findings/$name/" "$out/corpus/$name" "$seeds" >"$log" 2>&1; then
    status="FAILED (see $log)"
    failed=1
  fi
  wall=$((SECONDS - started))
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  printf '%-20s %10s %8s %7s %6s %6s %6s MB  %s\n' "$name" "$(stat number_of_executed_units)" \
    "$(stat average_exec_per_sec)" "$wall" "${cov:--}" "${ft:--}" "$(stat peak_rss_mb)" "$status"
done
exit $failed
