#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (as root), builds trainerd and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -eq 0 ]]; then scripts/install-deps.sh; else sudo scripts/install-deps.sh; fi
# CI sets CI=true: warnings are errors there.
scripts/build.sh ${CI:+-DTRAINERD_WERROR=ON} "$@"
ctest --test-dir build --output-on-failure --parallel "$(nproc)"
