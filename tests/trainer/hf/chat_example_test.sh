#!/usr/bin/env bash
# examples/hf's chat data as a team runs it: make_example.py --chat writes conversations and
# a job; chat_to_tokens.py writes their ids and loss masks with the folder's chat template;
# the learned ids are exactly the assistant's answers and their ends of turn; trainer-run
# profiles the masks and the conversations as documents and trains on them; a mask that learns
# every id is refused.
#
# Usage: chat_example_test.sh HF_PYTHON TRAINER_RUN OUT_DIR
set -euo pipefail
python=$1
trainer_run=$2
out=$3
source_dir=$(cd "$(dirname "$0")/../../.." && pwd)
rm -rf "$out"
"$python" "$source_dir/examples/hf/make_example.py" "$out" --updates 4 --chat > /dev/null
for part in train val; do
  "$python" "$source_dir/examples/hf/chat_to_tokens.py" "$out/model" "$out/chats-$part.jsonl" \
    "$out/chat-$part" > /dev/null
done
"$python" - "$out" << 'PY'
import json
import sys

import numpy as np
import transformers

out = sys.argv[1]
tokenizer = transformers.AutoTokenizer.from_pretrained(out + "/model")
ids = np.fromfile(out + "/chat-train.bin", dtype=np.uint16)
mask = np.fromfile(out + "/chat-train.mask", dtype=np.uint8)
assert len(ids) == len(mask), (len(ids), len(mask))
edges = np.flatnonzero(np.diff(np.concatenate(([0], mask, [0]))))
learned = [tokenizer.decode(ids[a:b].tolist()) for a, b in zip(edges[::2], edges[1::2])]
answers = [m["content"] + "<|im_end|>\n"
           for line in open(out + "/chats-train.jsonl") for m in json.loads(line)["messages"]
           if m["role"] == "assistant"]
assert learned == answers, "learned %d runs, %d answers; first differing: %r" % (
    len(learned), len(answers), next((l, a) for l, a in zip(learned, answers) if l != a))
print("PASS: the masks learn exactly the %d answers (%d of %d ids)"
      % (len(answers), int(mask.sum()), len(ids)))
PY
cd "$out"
"$trainer_run" --config job-chat.yaml --data-profile --json > profile.json
learned=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["profile"]["learned_targets"])' profile.json)
expected=$("$python" -c 'import numpy; m = numpy.fromfile("chat-train.mask", numpy.uint8); print(int(m[1:].sum()))')
[ "$learned" = "$expected" ] || { echo "FAIL: --data-profile learned_targets $learned, the mask $expected" >&2; exit 1; }
documents=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["profile"]["documents"]["count"])' profile.json)
conversations=$(grep -c . chats-train.jsonl)
[ "$documents" = "$conversations" ] || { echo "FAIL: --data-profile counted $documents documents in $conversations conversations" >&2; exit 1; }
"$trainer_run" --config job-chat.yaml --output-dir chat-out --json > train.jsonl
grep -q '"event":"finish"' train.jsonl || { echo "FAIL: no finish event" >&2; exit 1; }
"$python" -c 'import numpy; numpy.ones(numpy.fromfile("chat-train.mask", numpy.uint8).size, numpy.uint8).tofile("chat-train.mask")'
set +e
"$trainer_run" --config job-chat.yaml --data-profile > refused.txt 2>&1
code=$?
set -e
[ "$code" = 3 ] && grep -q "chat-train.mask: every id is marked 1, the same as no mask" refused.txt ||
  { echo "FAIL: an all-ones mask exited $code:" >&2; cat refused.txt >&2; exit 1; }
echo "PASS: trainer-run profiled $learned learned targets in $documents documents, trained on them, refused an all-ones mask"
