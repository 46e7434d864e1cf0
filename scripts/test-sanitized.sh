#!/usr/bin/env bash
# Builds trainerd with AddressSanitizer and UndefinedBehaviorSanitizer (GCC, Debian's
# LibTorch 1.13) into ./build-asan and runs tests under them. A test passes only when it
# passes AND no process it started (trainerd, trainerctl, trainer-launch, and trainer-run
# where it is sanitized) wrote a sanitizer report: every report goes to a log file, and any
# log file fails the run.
#   scripts/test-sanitized.sh         the store, daemon and control tests (CI runs these),
#                                     against the unsanitized trainer-run of ./build (built
#                                     here if missing; TRAINERD_WORKER_BUILD_DIR overrides the
#                                     folder): compiling LibTorch's headers under ASan took
#                                     half of CI's time, and the worker is not what they test
#   scripts/test-sanitized.sh --all   every test, trainer-run sanitized too
# Expects the dependencies of scripts/install-deps.sh. TRAINERD_TEST_TIME_SCALE (default 4)
# lets the tests wait that many times longer for the slower sanitized processes.
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
case ${1:-} in
  --all) all=1 ;;
  "") ;;
  *) echo "test-sanitized.sh: unknown argument $1 (expected --all or nothing)" >&2; exit 2 ;;
esac
build_dir=${TRAINERD_BUILD_DIR:-build-asan}
worker=
if ((!all)); then
  worker_build_dir=${TRAINERD_WORKER_BUILD_DIR:-build}
  if [[ ! -f $worker_build_dir/CMakeCache.txt ]]; then
    cmake -S . -B "$worker_build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
  fi
  cmake --build "$worker_build_dir" --parallel "$(nproc)" --target trainer-run
  worker=$(realpath "$worker_build_dir/bin/trainer-run")
fi
# Warnings are not errors here: the instrumentation changes GCC's flow analysis (and its
# false positives); the two regular builds hold the code to -Werror.
# -Og -g1 (line tables, all a sanitizer's stack trace needs) instead of RelWithDebInfo's -O2 -g:
# GCC compiled spec/worker_protocol.cc under both sanitizers in 14.5 s instead of 62.8 s (AMD
# EPYC, one core), and this build was CI's slowest step.
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-Og -g1 -DNDEBUG" \
  -DTRAINERD_SANITIZE=address,undefined -DTRAINERD_BUILD_BENCHMARKS=OFF \
  -DTRAINERD_DAEMON_TEST_WORKER="$worker"
# The CI subset: the store, daemon and control suites (the daemon's end-to-end tests run
# the real trainerd, trainerctl and trainer-launch, built with them, and the worker above).
suites=(store_test daemon_unit_test daemon_e2e_test)
if ((all)); then
  # A link left by a run without --all: the linker would write through it into ./build.
  if [[ -L $build_dir/bin/trainer-run ]]; then rm "$build_dir/bin/trainer-run"; fi
  cmake --build "$build_dir" --parallel "$(nproc)"
  labels=()
else
  cmake --build "$build_dir" --parallel "$(nproc)" --target "${suites[@]}"
  labels=(--label-regex "^($(IFS='|'; echo "${suites[*]}"))\$")
fi
reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
export TRAINERD_TEST_TIME_SCALE=${TRAINERD_TEST_TIME_SCALE:-4}
started=$SECONDS
status=0
ctest --test-dir "$build_dir" --output-on-failure --parallel "$(nproc)" --timeout 3600 \
  "${labels[@]}" || status=$?
if compgen -G "$reports/*" >/dev/null; then
  echo "test-sanitized.sh: sanitizer reports:" >&2
  for f in "$reports"/*; do echo "== $f" >&2; cat "$f" >&2; done
  status=1
fi
echo "test-sanitized.sh: ctest under address,undefined finished in $((SECONDS - started)) s (exit $status)"
exit $status
