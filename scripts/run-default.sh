#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (as root), builds trainerd and runs one nightly cycle of
# the bundled config (configs/trainerd.yaml: the job configs/default.yaml, state in
# state/trainerd) now, on the CPU: ledger, plan, train, record, release gate. A few minutes
# on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -eq 0 ]]; then scripts/install-deps.sh; else sudo scripts/install-deps.sh; fi
scripts/build.sh -DTRAINERD_BUILD_TESTS=OFF -DTRAINERD_BUILD_BENCHMARKS=OFF
exec build/bin/trainerd --config configs/trainerd.yaml --once
