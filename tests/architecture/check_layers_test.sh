#!/usr/bin/env bash
# scripts/check-layers.py passes on this tree, and fails, naming the rule, on a copy of it with
# one forbidden include added at a time: a layer reaching up, a sibling, another folder's
# private header, LibTorch in the store, SQLite in the trainer, the trainer in common/.
#   check_layers_test.sh SOURCE_DIR
set -euo pipefail
source_dir=${1:?usage: check_layers_test.sh SOURCE_DIR}
check=$source_dir/scripts/check-layers.py
"$check" --root "$source_dir"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
# expect_rejected FILE INCLUDE MESSAGE: with INCLUDE appended to FILE, the check fails saying
# MESSAGE about that file.
expect_rejected() {
  local file=$1 include=$2 message=$3
  rm -rf "$work/tree" && mkdir "$work/tree"
  cp -r "$source_dir"/{common,store,daemon,trainer} "$work/tree/"
  echo "#include $include" >> "$work/tree/$file"
  local out rc=0
  out=$("$check" --root "$work/tree" 2>&1) || rc=$?
  if [[ $rc -ne 1 || $out != *"$file:"*"$message"* ]]; then
    echo "FAIL: $file with #include $include: exit $rc, expected 1 and '$message'; got:"
    echo "$out"
    failures=$((failures + 1))
  fi
}
expect_rejected trainer/src/loop/trainer.cc '"trainerd/trainer/plan/planner.h"' \
  "trainer/loop includes a higher layer, trainer/plan"
expect_rejected trainer/src/plan/planner.cc '"trainerd/trainer/profile/update_profile.h"' \
  "trainer/plan includes a sibling, trainer/profile"
expect_rejected trainer/src/plan/parity.cc '"models/gpt/gpt.h"' \
  "a private header of trainer/src/models outside it"
expect_rejected trainer/include/trainerd/trainer/loop/trainer.h '"loop/zip_check.h"' \
  "a public header includes a private one"
expect_rejected store/src/store.cc '<torch/torch.h>' "LibTorch in torch-free code"
expect_rejected daemon/src/daemon.cc '"trainerd/trainer/loop/trainer.h"' \
  "torch-free code includes trainer/loop"
expect_rejected trainer/src/spec/units.cc '"trainerd/trainer/device/device_memory.h"' \
  "torch-free code includes trainer/device"
expect_rejected trainer/src/loop/trainer.cc '<sqlite3.h>' "the trainer runs without SQLite"
expect_rejected common/src/sha256.cc '"trainerd/store/store.h"' "common/ depends on nothing else"
((failures == 0)) && echo "check-layers.py passes this tree and rejects every forbidden include"
exit $((failures > 0))
