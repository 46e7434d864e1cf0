#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (as root), builds trainerd and trains the bundled
# default job (configs/default.yaml) once on the CPU: a few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -eq 0 ]]; then scripts/install-deps.sh; else sudo scripts/install-deps.sh; fi
scripts/build.sh -DTRAINERD_BUILD_TESTS=OFF -DTRAINERD_BUILD_BENCHMARKS=OFF
exec build/trainer/trainer-run --config configs/default.yaml --output-dir state/default
