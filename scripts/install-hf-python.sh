#!/usr/bin/env bash
# A Python with the real `transformers` on the pinned torch 2.11 wheel, for the tests that
# make Hugging Face model folders and their reference logits and gradients: a virtual
# environment of the Python 3.11 on PATH (the wheel's), holding the torch wheel of
# scripts/libtorch-pip.txt (downloaded by scripts/install-libtorch.sh, which also unpacks the
# CUDA libraries torch loads; the rest of CUDA is the toolkit's) and the packages of
# scripts/hf-python-packages.txt, each checked by hash. Idempotent; a second run only checks
# the marker.
#
#   scripts/install-hf-python.sh            install
#   scripts/install-hf-python.sh --python   print the environment's python; exit 1 if absent
#
# The cache folder is $TRAINERD_CACHE_DIR, by default ${XDG_CACHE_HOME:-~/.cache}/trainerd.
set -euo pipefail
cd "$(dirname "$0")/.."

requirements=scripts/hf-python-packages.txt
cache=${TRAINERD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trainerd}
stamp=$(cat "$requirements" scripts/libtorch-pip.txt | sha256sum | cut -c1-12)
site="$cache/hf-python-$stamp"

case ${1:-} in
  --python)
    if [[ ! -f "$site/.complete" ]]; then
      echo "install-hf-python.sh: not installed in $site; run scripts/install-hf-python.sh" >&2
      exit 1
    fi
    echo "$site/bin/python"
    exit 0
    ;;
  "") ;;
  *) echo "usage: scripts/install-hf-python.sh [--python]" >&2; exit 2 ;;
esac
if [[ -f "$site/.complete" ]]; then
  echo "install-hf-python.sh: present in $site"
  exit 0
fi
version=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [[ $version != 3.11 ]]; then
  echo "install-hf-python.sh: the pinned torch wheel is for Python 3.11; python3 is $version" >&2
  exit 1
fi
scripts/install-libtorch.sh
libtorch=$(dirname "$(scripts/install-libtorch.sh --prefix)")

staging="$site.partial"
rm -rf "$staging"
python3 -m venv "$staging"
pip=("$staging/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps
  --require-hashes --only-binary=:all:)
"${pip[@]}" --no-index --find-links "$cache/wheels" -r <(grep '^torch==' scripts/libtorch-pip.txt)
"${pip[@]}" -r "$requirements"
packages=$("$staging/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ln -s "$libtorch/nvidia" "$packages/nvidia"
"$staging/bin/python" -c 'import torch, transformers, peft' ||
  { echo "install-hf-python.sh: torch, transformers or peft does not import" >&2; exit 1; }
touch "$staging/.complete"
rm -rf "$site"
mv "$staging" "$site"
# A virtual environment's python names its folder: point it at the final one.
sed -i "s|$staging|$site|g" "$site"/bin/activate* "$site"/pyvenv.cfg 2>/dev/null || true
echo "install-hf-python.sh: transformers on torch $(sed -n 's/^torch==\([^ ]*\) .*/\1/p' scripts/libtorch-pip.txt) in $site"
