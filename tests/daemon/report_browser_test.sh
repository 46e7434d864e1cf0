#!/usr/bin/env bash
# The run report in a real browser. trainerd --once trains a tiny job whose naive plan (16 x 1,
# fp32, a 4.4 MiB peak) does not fit its 2 MiB budget, so the planner finds another. The run
# that trains is run 1, or a later one when run 1 fails and the daemon re-plans (CI once saw
# run 1's bf16 plan fail its parity check for memory, before the planner knew that check's
# size). Of that run:
#   - the daemon profiled its plan (trainerctl profile RUN, a Chrome trace), wrote
#     reports/run-RUN.html, and `trainerctl report RUN --output` writes the same page (an
#     unknown run is exit 4);
#   - the HTML parses (Python's html.parser) into every section, its ledger bar's category
#     segments equal the categories `trainerctl show RUN --json` recorded, it has no script and
#     loads nothing, and it is under 300 KB;
#   - headless Chromium parses it into the same sections and SVG charts (--dump-dom) and renders
#     it to OUT_DIR/report.png, which is not blank. Look at that picture after a change.
#
# Usage: report_browser_test.sh BIN_DIR OUT_DIR CHROMIUM
set -euo pipefail

bin_dir=$1
out_dir=$2
chromium=$3
scale=${TRAINERD_TEST_TIME_SCALE:-1}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
[[ -x $chromium ]] ||
  fail "chromium not found ('$chromium'): Debian package chromium, scripts/install-deps.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/trainerd-report-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../support/tiny_job.sh
source "$(dirname "$0")/../support/tiny_job.sh"
tiny_job_yaml 16 20 5 "memory: {budget: 2MiB, reserve: 10%}" > "$tmp/job.yaml"
cat > "$tmp/trainerd.yaml" << EOF
job: job.yaml
state_dir: state
metrics: {listen: ""}
parity: {updates: 2}
regression: {beat_baseline: false}
EOF

timeout $((300 * scale)) "$bin_dir/trainerd" --config "$tmp/trainerd.yaml" --once \
  2> "$tmp/daemon.log" || fail "trainerd --once failed: $(cat "$tmp/daemon.log")"
run=$(sed -n 's/^trainerd: run \([0-9]*\) succeeded.*/\1/p' "$tmp/daemon.log" | tail -1)
[[ -n $run ]] || fail "no run succeeded: $(cat "$tmp/daemon.log")"
grep -q "report: $tmp/state/reports/run-$run.html" "$tmp/daemon.log" ||
  fail "the cycle did not print the report's path: $(cat "$tmp/daemon.log")"
[[ -s $tmp/state/reports/run-$run.html ]] || fail "the daemon wrote no reports/run-$run.html"

ctl() { "$bin_dir/trainerctl" --state-dir "$tmp/state" "$@"; }
ctl report "$run" --output "$tmp/page.html" 2> /dev/null || fail "trainerctl report $run failed"
set +e
ctl report 7 > /dev/null 2>&1
rc=$?
set -e
[[ $rc -eq 4 ]] || fail "trainerctl report 7 (no such run) exited $rc, expected 4"
ctl show "$run" --json > "$tmp/show.json"
python3 -c 'import json, sys; t = json.load(open(sys.argv[1]))
assert len(t["traceEvents"]) > 100 and all(e["ph"] == "X" for e in t["traceEvents"])' \
  "$tmp/state/profiles/run-$run.trace.json" ||
  fail "no Chrome trace of the new plan's profile; the run's events:
$(ctl show "$run" --json | python3 -c 'import json, sys
for e in json.load(sys.stdin)["events"]: print(e["kind"], e["message"])')
the daemon's log:
$(tail -20 "$tmp/daemon.log")"
ctl profile "$run" > "$tmp/profile.txt" || fail "trainerctl profile $run failed"
grep -q "^  matrix products" "$tmp/profile.txt" || fail "trainerctl profile $run: $(cat "$tmp/profile.txt")"
# The daemon's page and trainerctl's differ only in the time they were written.
diff <(grep -v 'Written by trainerd at' "$tmp/state/reports/run-$run.html") \
  <(grep -v 'Written by trainerd at' "$tmp/page.html") > /dev/null ||
  fail "the daemon's reports/run-$run.html and trainerctl report $run differ"

python3 - "$tmp/page.html" "$tmp/show.json" << 'EOF' || fail "the page's HTML (above)"
import html.parser, json, sys

page = open(sys.argv[1], encoding="utf-8").read()
run = json.load(open(sys.argv[2]))["run"]

class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.sections, self.tags, self.loads, self.bar, self.in_bar = [], set(), [], {}, 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        if tag == "section":
            self.sections.append(a.get("id"))
        for key in ("src", "href"):
            if a.get(key, "").startswith(("http:", "https:", "//")):
                self.loads.append(a[key])
        if tag == "div" and a.get("id") == "ledger-bar":
            self.in_bar = 1
        elif tag == "div" and self.in_bar:
            self.in_bar += 1
        if self.in_bar and tag == "rect" and "segment" in a.get("class", ""):
            self.bar[a["data-name"]] = self.bar.get(a["data-name"], 0) + int(a["data-bytes"])
    def handle_endtag(self, tag):
        if tag == "div" and self.in_bar:
            self.in_bar -= 1

p = Page()
p.feed(page)
problems = []
want = ["plan", "memory", "profile", "curves", "throughput", "night", "input", "gate", "outcomes",
        "provenance"]
if p.sections != want:
    problems.append("sections %s, expected %s" % (p.sections, want))
if "script" in p.tags or p.loads:
    problems.append("a script or a load from elsewhere: %s" % p.loads)
if len(page.encode()) >= 300 * 1024:
    problems.append("%d bytes, over 300 KB" % len(page.encode()))
recorded = {k: v for k, v in run["peak_memory_bytes"].items() if k != "peak"}
drawn = {k: v for k, v in p.bar.items() if k in recorded}
if drawn != recorded:
    problems.append("ledger bar %s, recorded %s" % (drawn, recorded))
naive = {"microbatch": 16, "accumulation_steps": 1, "checkpoint_blocks": [], "precision": "fp32"}
if run["plan"] == naive:  # its ledger peak is 4.4 MiB: it cannot fit 1.8 MiB usable
    problems.append("the 2 MiB budget did not force a trade: plan %s" % run["plan"])
if "rejected" not in page or "exceeds usable" not in page:
    problems.append("no rejected candidate with its reason on the plan card")
if 'class="dot" data-name="matrix products"' not in page or 'id="op-groups"' not in page:
    problems.append("no op profile with matrix products on the roofline")
print("\n".join(problems) or "ok: %d sections, ledger bar = recorded categories %s, %d bytes"
      % (len(p.sections), recorded, len(page.encode())))
sys.exit(1 if problems else 0)
EOF

# A real browser: the DOM it builds, then the picture it draws.
browser() {
  "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$tmp/chromium" "$@" 2> "$tmp/chromium.log"
}
browser --dump-dom "file://$tmp/page.html" > "$tmp/dom.html" ||
  fail "chromium --dump-dom failed: $(tail -5 "$tmp/chromium.log")"
for section in plan memory profile curves throughput night input gate outcomes provenance; do
  grep -q "<section id=\"$section\">" "$tmp/dom.html" || fail "Chromium's DOM has no section $section"
done
charts=$(grep -o '<svg' "$tmp/dom.html" | wc -l)
[[ $charts -ge 7 ]] ||
  fail "Chromium's DOM has $charts SVG elements, expected the bars, 4 charts and the roofline"
mkdir -p "$out_dir"
rm -f "$out_dir/report.png"
browser --window-size=1000,3000 --screenshot="$out_dir/report.png" "file://$tmp/page.html" ||
  fail "chromium --screenshot failed: $(tail -5 "$tmp/chromium.log")"
python3 - "$out_dir/report.png" << 'EOF' || fail "the screenshot (above)"
import struct, sys, zlib

data = open(sys.argv[1], "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit("not a PNG")
width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
chunks, at = [], 8
while at < len(data):
    length, kind = struct.unpack(">I4s", data[at:at + 8])
    if kind == b"IDAT":
        chunks.append(data[at + 8:at + 8 + length])
    at += 12 + length
raw = zlib.decompress(b"".join(chunks))
stride = 1 + width * (4 if colour == 6 else 3)
# Rows that are not one flat colour (the filter byte aside): a blank page has none.
busy = sum(1 for r in range(height) if len(set(raw[r * stride + 1:(r + 1) * stride])) > 2)
if (width, height) != (1000, 3000) or busy < height // 5:
    sys.exit("%dx%d, %d of %d rows drawn on" % (width, height, busy, height))
print("ok: screenshot %dx%d, %d rows drawn on" % (width, height, busy))
EOF
echo "PASS: the report page is complete, in HTML and in Chromium ($out_dir/report.png, run $run)"
