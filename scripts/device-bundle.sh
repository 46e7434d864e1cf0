#!/usr/bin/env bash
# Packs what scripts/device-check.sh needs from the CUDA build (scripts/build.sh --torch pip)
# into device-bundle/, for a GPU machine that cannot build trainerd itself: those machines
# have the same torch 2.11.0+cu130 and CMake, but none of Debian's -dev packages and no
# network. The bundle holds trainer-run, trainerd and trainerctl (the daemon_cycle step), the
# trainer test binary (the Cuda* tests), the libraries they link besides LibTorch, CUDA and
# the C and C++ runtimes (yaml-cpp, SQLite, prometheus-cpp, libsystemd...), and a note of
# what built it;
# LibTorch and CUDA come from the GPU machine's own torch (device-check.sh --bundle sets
# LD_LIBRARY_PATH). About 19 MB; ignored by git, sent with the device tool's `carry`.
#
#   scripts/device-bundle.sh [BUILD_DIR (default build-cuda)] [BUNDLE_DIR (default device-bundle)]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build-cuda}
bundle=${2:-device-bundle}
binaries=("$build_dir/bin/trainer-run" "$build_dir/bin/trainerd" "$build_dir/bin/trainerctl")
for f in "${binaries[@]}" "$build_dir/tests/trainer/trainer_test"; do
  [[ -x $f ]] || { echo "device-bundle.sh: $f missing: run scripts/build.sh --torch pip" >&2; exit 1; }
done
if ! ldd "$build_dir/bin/trainer-run" | grep -q libtorch_cuda; then
  echo "device-bundle.sh: $build_dir/bin/trainer-run does not link libtorch_cuda: not a CUDA build" >&2
  exit 1
fi
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/tests" "$bundle/lib"
cp "${binaries[@]}" "$bundle/bin/"
cp "$build_dir/tests/trainer/trainer_test" "$bundle/tests/"
# Libraries outside LibTorch, CUDA and the C/C++ runtimes, which the GPU machine may lack.
ldd "$bundle"/bin/* "$bundle/tests/trainer_test" | awk '/=> \// {print $3}' | sort -u |
  grep -vE '/lib(c|m|dl|rt|util|pthread|stdc\+\+|gcc_s)\.so|/ld-linux|torch|c10|/nvidia/|cuda|cublas|cudnn|nccl|nvrtc|cufft|curand|cusparse|cusolver|nvjitlink|cupti|gomp' |
  xargs -r cp -L -t "$bundle/lib/"
{
  echo "built from $(git describe --always --dirty 2>/dev/null || echo unknown)"
  echo "torch $(sed -n 's/^torch==\([^ ]*\) .*/\1/p' scripts/libtorch-pip.txt) (scripts/libtorch-pip.txt)"
  echo "compiler $(c++ --version | head -n 1)"
} >"$bundle/BUNDLE"
echo "device-bundle.sh: $(du -sh "$bundle" | cut -f1) in $bundle ($(ls "$bundle/lib" | tr '\n' ' '))"
