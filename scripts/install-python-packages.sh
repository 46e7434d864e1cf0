#!/usr/bin/env bash
# Installs the pinned packages of scripts/python-packages.txt (wheels from PyPI, checked by
# hash) into a folder of their own for Debian's /usr/bin/python3, leaving the system's Python
# untouched: PYTHONPATH=<folder> /usr/bin/python3 then imports them beside python3-torch.
# Idempotent; a second run only checks the marker.
#
#   scripts/install-python-packages.sh           install
#   scripts/install-python-packages.sh --prefix  print the folder; exit 1 if absent
#
# The cache folder is $TRAINERD_CACHE_DIR, by default ${XDG_CACHE_HOME:-~/.cache}/trainerd.
set -euo pipefail
cd "$(dirname "$0")/.."

requirements=scripts/python-packages.txt
cache=${TRAINERD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trainerd}
site="$cache/python-packages-$(sha256sum "$requirements" | cut -c1-12)"

case ${1:-} in
  --prefix)
    if [[ ! -f "$site/.complete" ]]; then
      echo "install-python-packages.sh: not installed in $site; run" \
        "scripts/install-python-packages.sh" >&2
      exit 1
    fi
    echo "$site"
    exit 0
    ;;
  "") ;;
  *) echo "usage: scripts/install-python-packages.sh [--prefix]" >&2; exit 2 ;;
esac
if [[ -f "$site/.complete" ]]; then
  echo "install-python-packages.sh: present in $site"
  exit 0
fi
python_version=$(/usr/bin/python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
# Any pip can fetch wheels for another interpreter: the pyenv python3 on PATH, or Debian's.
pip=(python3 -m pip)
rm -rf "$site"
"${pip[@]}" install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --require-hashes \
  --only-binary=:all: --python-version "$python_version" --platform manylinux2014_x86_64 \
  --target "$site" -r "$requirements"
PYTHONPATH="$site" /usr/bin/python3 -c 'import safetensors.numpy'
touch "$site/.complete"
echo "install-python-packages.sh: installed in $site"
