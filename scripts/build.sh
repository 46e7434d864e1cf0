#!/usr/bin/env bash
# Configures and builds trainerd into ./build (Release). Extra arguments go to cmake, e.g.
#   scripts/build.sh -DTRAINERD_WERROR=ON
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build --parallel "$(nproc)"
