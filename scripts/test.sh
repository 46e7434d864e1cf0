#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (as root), builds trainerd and runs every test.
#   scripts/test.sh                 Debian's LibTorch 1.13 (CPU), in ./build
#   scripts/test.sh --torch pip     LibTorch 2.x with CUDA from the pinned PyPI wheel
#                                   (scripts/install-libtorch.sh), in ./build-cuda; tests that
#                                   need a GPU skip themselves where there is none
#   --torch-suites                  only the suites of the code that LibTorch compiles (the
#                                   trainer's, its plugins', the Hugging Face models'),
#                                   building only what they run: what a second LibTorch can
#                                   change (CI's 2.x stage; the store, daemon and control code
#                                   is the same)
# Further arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
torch=debian
torch_suites=0
while (($#)); do
  case $1 in
    --torch) torch=${2:?--torch needs debian or pip}; shift 2 ;;
    --torch=*) torch=${1#--torch=}; shift ;;
    --torch-suites) torch_suites=1; shift ;;
    *) break ;;
  esac
done
sudo_if_needed() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
sudo_if_needed scripts/install-deps.sh
scripts/install-python-packages.sh
scripts/install-hf-python.sh  # transformers on the pinned torch wheel, for the Hugging Face tests
case $torch in
  debian) build_dir=${TRAINERD_BUILD_DIR:-build} ;;
  pip) build_dir=${TRAINERD_BUILD_DIR:-build-cuda}; scripts/install-libtorch.sh ;;
  *) echo "test.sh: --torch $torch: expected debian or pip" >&2; exit 2 ;;
esac
ctest_selection=()
if ((torch_suites)); then
  suites=(trainer_test hf_model_test model_plugin_test)
  # The suites and the binaries their tests start.
  export TRAINERD_BUILD_TARGETS="${suites[*]} trainer-run trainer-launch"
  # Each GoogleTest case is labelled with its executable (tests/CMakeLists.txt), the
  # fixtures these suites need with theirs.
  ctest_selection=(-L "^($(IFS='|'; echo "${suites[*]}"))\$")
fi
# CI sets CI=true: warnings are errors there. The suites and benches are switched on by name:
# scripts/run-default.sh configures the same build folder without them, and the cache would
# keep that (ctest then found no tests, or stale ones, and passed).
TRAINERD_BUILD_DIR=$build_dir scripts/build.sh --torch "$torch" -DTRAINERD_BUILD_TESTS=ON \
  -DTRAINERD_BUILD_BENCHMARKS=ON ${CI:+-DTRAINERD_WERROR=ON} "$@"
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error --parallel "$(nproc)" \
  "${ctest_selection[@]}"
