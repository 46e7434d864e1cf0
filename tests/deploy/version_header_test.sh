#!/usr/bin/env bash
# cmake/TrainerdVersion.cmake, the build-time version: a new commit changes trainerd_version.h
# without a re-configure (the configure-time version kept the old one after `git pull`), an
# unchanged tree leaves the file untouched (nothing rebuilds), and a tree without git gets
# the project version alone.
#   version_header_test.sh SOURCE_DIR CMAKE
set -euo pipefail
source_dir=${1:?usage: version_header_test.sh SOURCE_DIR CMAKE}
cmake=${2:?usage: version_header_test.sh SOURCE_DIR CMAKE}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
header=$work/out/trainerd_version.h
generate() { "$cmake" -DSOURCE_DIR="$1" -DPROJECT_VERSION=1.2.3 -DOUTPUT="$header" \
  -P "$source_dir/cmake/TrainerdVersion.cmake"; }
expect_version() {
  grep -qx "#define TRAINERD_VERSION \"$1\"" "$header" ||
    { echo "FAIL: expected version $1 in:"; cat "$header"; exit 1; }
}
repo=$work/repo
git init -q "$repo"
commit() {
  echo "$1" > "$repo/file"
  git -C "$repo" add file
  git -C "$repo" -c user.name=t -c user.email=t@t commit -qm "$1"
}
commit one
generate "$repo"
expect_version "1.2.3+g$(git -C "$repo" rev-parse --short=7 HEAD)"

touch -d '2000-01-01' "$header"
generate "$repo"
[[ $(stat -c %Y "$header") == $(date -d '2000-01-01' +%s) ]] ||
  { echo "FAIL: an unchanged version rewrote the header"; exit 1; }
commit two
generate "$repo"
expect_version "1.2.3+g$(git -C "$repo" rev-parse --short=7 HEAD)"
echo edited > "$repo/file"
generate "$repo"
expect_version "1.2.3+g$(git -C "$repo" rev-parse --short=7 HEAD)-dirty"
mkdir "$work/tarball"
generate "$work/tarball"
expect_version "1.2.3"
echo "trainerd_version.h follows each commit at build time"
