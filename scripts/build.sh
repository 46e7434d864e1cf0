#!/usr/bin/env bash
# Configures and builds trainerd (Release). Extra arguments go to cmake, e.g.
#   scripts/build.sh -DTRAINERD_WERROR=ON
#   scripts/build.sh --torch pip          LibTorch 2.x with CUDA (scripts/install-libtorch.sh)
# --torch debian (the default): Debian's LibTorch 1.13 (CPU), into ./build.
# --torch pip: the pinned PyPI wheel's LibTorch 2.x, CUDA-enabled, into ./build-cuda.
# TRAINERD_BUILD_DIR overrides the folder; TRAINERD_BUILD_TARGETS (names, space-separated)
# builds those targets instead of all.
set -euo pipefail
cd "$(dirname "$0")/.."
torch=debian
case ${1:-} in
  --torch) torch=${2:?--torch needs debian or pip}; shift 2 ;;
  --torch=*) torch=${1#--torch=}; shift ;;
esac
case $torch in
  debian) build_dir=${TRAINERD_BUILD_DIR:-build}; torch_args=() ;;
  pip)
    build_dir=${TRAINERD_BUILD_DIR:-build-cuda}
    torch_args=(-DCMAKE_PREFIX_PATH="$(scripts/install-libtorch.sh --prefix)")
    ;;
  *) echo "build.sh: --torch $torch: expected debian or pip" >&2; exit 2 ;;
esac
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${torch_args[@]}" "$@"
targets=()
[[ -n ${TRAINERD_BUILD_TARGETS:-} ]] && read -ra targets <<<"--target $TRAINERD_BUILD_TARGETS"
cmake --build "$build_dir" --parallel "$(nproc)" "${targets[@]}"
