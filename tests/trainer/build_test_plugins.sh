#!/usr/bin/env bash
# ctest fixture of model_plugin_test: installs trainerd's plugin package from BUILD_DIR into
# OUT_DIR/sdk (cmake --install --component plugin_sdk) and builds tests/trainer/plugins against
# it into OUT_DIR/build, as a team builds its plugin (docs/bring-your-own-model.md).
#   build_test_plugins.sh BUILD_DIR OUT_DIR TORCH_DIR CXX_COMPILER
set -euo pipefail
if (($# != 4)); then
  echo "usage: build_test_plugins.sh BUILD_DIR OUT_DIR TORCH_DIR CXX_COMPILER" >&2
  exit 2
fi
build_dir=$1 out_dir=$2 torch_dir=$3 cxx=$4
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
# Afresh each time: a cached find_library result of an older package config would stay.
rm -rf "$out_dir/sdk" "$out_dir/build"
cmake --install "$build_dir" --component plugin_sdk --prefix "$out_dir/sdk"
# ccache with the base directory, so that a clone elsewhere hits the same entries.
launcher=()
if command -v ccache > /dev/null; then
  launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_BASEDIR=$source_dir;ccache")
fi
cmake -S "$source_dir/tests/trainer/plugins" -B "$out_dir/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" "${launcher[@]}" \
  -DCMAKE_PREFIX_PATH="$out_dir/sdk" -DTorch_DIR="$torch_dir" \
  -DTRAINERD_EXAMPLE_PLUGIN_DIR="$source_dir/examples/plugin"
cmake --build "$out_dir/build"
