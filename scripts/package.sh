#!/usr/bin/env bash
# Builds trainerd against Debian's LibTorch (scripts/build.sh, into ./build) and its Debian
# package (cmake/TrainerdPackage.cmake):
#   scripts/package.sh        -> build/trainerd_<version>_amd64.deb
#   sudo apt install ./build/trainerd_<version>_amd64.deb
# Expects the dependencies of scripts/install-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cpack --config build/CPackConfig.cmake -B build
ls build/trainerd_*_amd64.deb
