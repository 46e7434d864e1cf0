#!/usr/bin/env bash
# Installs LibTorch 2.x with CUDA for trainerd's second build: the torch wheel pinned in
# scripts/libtorch-pip.txt (version and SHA-256), plus the three CUDA libraries it links that
# the CUDA toolkit does not ship, unpacked in the wheels' own layout (torch/, nvidia/*/lib) so
# the libraries' RPATHs find each other. The rest of CUDA (cudart, cuBLAS, cuDNN, NCCL, ...)
# comes from the machine's toolkit. Idempotent; a second run only checks the marker.
#
#   scripts/install-libtorch.sh            install (downloads about 760 MB once)
#   scripts/install-libtorch.sh --prefix   print the CMake prefix of the install; exit 1 if absent
#
# The cache folder is $TRAINERD_CACHE_DIR, by default ${XDG_CACHE_HOME:-~/.cache}/trainerd.
set -euo pipefail
cd "$(dirname "$0")/.."

requirements=scripts/libtorch-pip.txt
cache=${TRAINERD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trainerd}
version=$(sed -n 's/^torch==\([^ ]*\) .*/\1/p' "$requirements")
stamp=$(sha256sum "$requirements" | cut -c1-12)
site="$cache/libtorch-$version-$stamp"
prefix="$site/torch"

if [[ ${1:-} == --prefix ]]; then
  if [[ ! -f "$site/.complete" ]]; then
    echo "install-libtorch.sh: LibTorch $version is not installed in $site;" \
      "run scripts/install-libtorch.sh" >&2
    exit 1
  fi
  echo "$prefix"
  exit 0
fi
if [[ $# -gt 0 ]]; then
  echo "usage: scripts/install-libtorch.sh [--prefix]" >&2
  exit 2
fi
if [[ -f "$site/.complete" ]]; then
  echo "install-libtorch.sh: LibTorch $version present in $site"
  exit 0
fi

command -v nvcc >/dev/null || {
  echo "install-libtorch.sh: nvcc not found: the CUDA build needs the CUDA toolkit" >&2
  exit 1
}
cuda_major=$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
if [[ $cuda_major != 13 ]]; then
  echo "install-libtorch.sh: $requirements pins a CUDA 13 wheel but nvcc is CUDA $cuda_major" >&2
  exit 1
fi

wheels="$cache/wheels"
mkdir -p "$wheels"
# The wheel is the same LibTorch whatever Python runs pip: ask for the pinned CPython tag and
# the manylinux platforms of the pinned files rather than this interpreter's.
python3 -m pip download --quiet --no-deps --no-cache-dir --require-hashes \
  --only-binary=:all: --implementation cp --python-version 3.11 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$wheels" -r "$requirements"

staging="$site.partial"
rm -rf "$staging"
mkdir -p "$staging"
while read -r requirement; do
  name=${requirement%%==*}
  file=$(ls "$wheels"/"${name//-/_}"-"$(sed 's/^[^=]*==\([^ ]*\) .*/\1/' <<<"$requirement")"-*.whl)
  # Headers, libraries and CMake config only: no Python modules, no bundled binaries.
  unzip -q -o "$file" 'torch/include/*' 'torch/lib/*' 'torch/share/*' 'nvidia/*/lib/*' \
    -d "$staging" 2>/dev/null || [[ $? -eq 11 ]]  # 11: a pattern matched nothing in this wheel
done < <(grep -E '^[a-z]' "$requirements")
touch "$staging/.complete"
rm -rf "$site"
mv "$staging" "$site"
echo "install-libtorch.sh: LibTorch $version (CUDA $cuda_major) installed in $site"
