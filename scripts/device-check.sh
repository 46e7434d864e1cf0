#!/usr/bin/env bash
# Prepared check of trainerd's CUDA path, for a machine with an NVIDIA GPU and a Python
# torch 2.x. Run on an NVIDIA H200 with --bundle (docs/device-check.md, "First runs on a GPU").
#
#   scripts/device-check.sh [--build-dir DIR] [--out DIR] [--time-limit SECONDS]
#                           [--threads N|auto] [--updates N]
#   scripts/device-check.sh --bundle device-bundle [...]
#   scripts/device-check.sh --rehearse-on-cpu --build-dir build [...]
#
# Steps, each under `timeout` and a shared deadline (default 450 s, so the whole check ends
# within 8 minutes):
#   environment   GPU (nvidia-smi) and Python torch (version, CUDA, CMake prefix, C++ ABI)
#   build         cmake + ninja against that torch's LibTorch into ${BUILD_DIR:-build-device},
#                 skipped when --build-dir names an existing build or --bundle a prebuilt
#                 one (scripts/device-bundle.sh); trainer-run must link CUDA
#   cuda_tests    ctest -R Cuda; a Cuda test that skipped itself fails when a GPU is present
#   config        configs/default.yaml copied with runtime.device: cuda, model.dropout: 0.1 and
#                 12 updates (6 in rehearsal), plus plan files (fp32, bf16, fp16 with
#                 accumulation and checkpointed blocks; the naive plan)
#   parity_*      trainer-run --parity --json per precision: verdict and max diffs; the
#                 check's measured peak must stay within its prediction
#   ledger        trainer-run --ledger --json (naive plan): every peak field it reports
#   budget_*      --plan-only, then --plan auto training, at --budget = 60% of the naive
#                 ledger peak: the finish event's peak_bytes must stay under usable bytes
#   throughput    training with the naive plan at the job's own budget: tokens/s, MFU,
#                 measurement_valid (the budget run's figures are reported too)
#   daemon_cycle  trainerd --once on the job: one nightly cycle (plan, ledger, parity,
#                 training, gate, release) on the device, read back with trainerctl show
# One JSON summary object goes to stdout (also OUT/summary.json); progress, to stderr. Exit 0
# when every step passed, 1 when one failed, 2 on a usage error.
#
# --rehearse-on-cpu runs every step with runtime.device: cpu against the existing build named
# by --build-dir, without the Python torch build and without the skipped-test check, and
# treats "no test matches Cuda" as a pass (noted): it checks this script's logic anywhere.
#
# Environment: PYTHON (default python3: the torch whose LibTorch is built against),
# BUILD_DIR (default build-device), TORCH_CUDA_ARCH_LIST (default 9.0).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

usage() {
  sed -n '5,7p' "$0" | sed 's/^#   //'
  echo "see the header of $0 and docs/device-check.md"
}

mode=device
build_dir=${BUILD_DIR:-build-device}
build_dir_given=0
bundle=
out=
time_limit=450
threads=
updates=
# value RE ARGS...: the option's value ($2) must match RE.
value() {
  [[ $# -ge 3 && $3 =~ $1 ]] && return 0
  echo "device-check.sh: $2 needs a value matching $1" >&2
  usage >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --rehearse-on-cpu) mode=rehearse-on-cpu ;;
    --build-dir) value . "$@"; build_dir=$2; build_dir_given=1; shift ;;
    --bundle) value . "$@"; bundle=$2; build_dir=$2; build_dir_given=1; shift ;;
    --out) value . "$@"; out=$2; shift ;;
    --time-limit) value '^[0-9]+$' "$@"; time_limit=$2; shift ;;
    --threads) value '^([1-9][0-9]*|auto)$' "$@"; threads=$2; shift ;;
    --updates) value '^[1-9][0-9]*$' "$@"; updates=$2; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "device-check.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

PYTHON=${PYTHON:-python3}
if [[ $mode == device ]]; then
  device=cuda
  threads=${threads:-auto}
  updates=${updates:-12}
else
  device=cpu
  threads=${threads:-2}
  updates=${updates:-6}
  if [[ $build_dir_given -ne 1 || ( -z $bundle && ! -f $build_dir/CMakeCache.txt ) ]]; then
    echo "device-check.sh: --rehearse-on-cpu needs --build-dir DIR naming an existing build," \
      "or --bundle DIR" >&2
    exit 2
  fi
fi
command -v python3 >/dev/null || { echo "device-check.sh: python3 is required" >&2; exit 2; }

[[ -n $out ]] || out=$(mktemp -d "${TMPDIR:-/tmp}/device-check.XXXXXX")
mkdir -p "$out"/{results,logs,plans,runs}
out=$(cd "$out" && pwd)
build_dir=$(mkdir -p "$build_dir" && cd "$build_dir" && pwd)
bin=$build_dir/bin/trainer-run
if [[ -n $bundle ]]; then
  # A bundle from scripts/device-bundle.sh: binaries built elsewhere against the same torch
  # wheel. LibTorch and its CUDA libraries come from this machine's torch, yaml-cpp from the
  # bundle; ctest gets a test file naming each Cuda test of the carried test binary.
  torch_lib=$("$PYTHON" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' \
    2>/dev/null) || torch_lib=
  cuda_lib=${torch_lib:+$(dirname "$(dirname "$torch_lib")")/nvidia/cu13/lib}
  export LD_LIBRARY_PATH=$build_dir/lib${torch_lib:+:$torch_lib:$cuda_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  {
    echo "# written by scripts/device-check.sh --bundle: one test per Cuda test of the binary"
    "$build_dir/tests/trainer_test" --gtest_list_tests --gtest_filter='*Cuda*' 2>/dev/null |
      awk -v bin="$build_dir/tests/trainer_test" '
        /^[^ ]/ { suite = $1; next }
        /^  / { name = suite $1; printf "add_test([=[%s]=] \"%s\" \"--gtest_filter=%s\")\n", name, bin, name }'
  } >"$build_dir/CTestTestfile.cmake"
fi
job=$out/job.yaml
deadline=$((SECONDS + time_limit))

log() { printf '[device-check %4ds] %s\n' "$SECONDS" "$*" >&2; }

# The judging half: a stdlib-only Python helper that reads what each step wrote and records a
# result in $out/results/<step>.json; `summary` prints the one JSON object.
helper=$out/check.py
cat >"$helper" <<'PY'
import json, os, re, shutil, subprocess, sys, time
import xml.etree.ElementTree as ET

OUT = os.environ["DC_OUT"]
MODE = os.environ["DC_MODE"]
DEVICE = os.environ["DC_DEVICE"]
REHEARSE = MODE != "device"
RES = os.path.join(OUT, "results")
ORDER = ["environment", "build", "cuda_tests", "config", "parity_fp32", "parity_bf16",
         "parity_fp16", "ledger", "budget_plan_only", "budget_training", "throughput",
         "daemon_cycle"]
EXIT_MEANING = {0: "ok", 1: "internal error", 2: "usage error or invalid config",
                3: "invalid data", 4: "out of memory", 5: "checkpoint", 6: "diverged",
                7: "parity failed", 8: "memory leak", 75: "interrupted",
                124: "timed out", 137: "killed after timeout",
                200: "not started: the check's deadline was reached"}


def save(name, result):
    with open(os.path.join(RES, name + ".json"), "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)


def load(name):
    try:
        with open(os.path.join(RES, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def tail(path, n=25):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()[-n:]
    except OSError:
        return []


def kv(argv):
    return dict(a.split("=", 1) for a in argv)


def run_info(a):
    rc = int(a.get("rc", -1))
    r = {"exit_code": rc, "exit_meaning": EXIT_MEANING.get(rc, "unknown"),
         "seconds": round(float(a.get("seconds", 0)), 1)}
    if rc in (124, 137, 200):
        r["timed_out"] = True
    return r


def json_lines(path):
    events, bad = [], 0
    try:
        with open(path, errors="replace") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    bad += 1
                    continue
                if isinstance(obj, dict):
                    events.append(obj)
    except OSError:
        pass
    return events, bad


def single_object(path):
    events, _ = json_lines(path)
    return events[-1] if events else None


def finish(result, failures, notes=None):
    result["status"] = "fail" if failures else "pass"
    if failures:
        result["failures"] = failures
    if notes:
        result["notes"] = notes
    return result


def fail_details(result, a):
    """Diagnostics for a failed step: the error event and the stderr tail."""
    if a.get("stderr"):
        result["stderr_tail"] = tail(a["stderr"], 15)


def error_event(obj):
    if isinstance(obj, dict) and obj.get("event") == "error":
        return {k: obj.get(k) for k in ("kind", "message")}
    return None


def peak_fields(obj, prefix=""):
    """Every numeric field naming a peak, reserved or allocator figure, at any depth."""
    found = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("blocks", "rejected", "eval_slices", "data"):
                continue
            name = prefix + k
            if isinstance(v, (dict, list)):
                found.update(peak_fields(v, name + "."))
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and \
                    re.search(r"peak|reserved|alloc", k) and k != "peak_flops_per_second":
                found[name] = v
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found.update(peak_fields(v, prefix + str(i) + "."))
    return found


def reserved_below(fields, peak):
    """Reserved peaks below the allocated peak: impossible for a caching allocator."""
    return {k: v for k, v in fields.items()
            if "reserved" in k and isinstance(peak, (int, float)) and v < peak}


def mib(n):
    return None if n is None else round(n / 2**20, 2)


# ---- steps ----------------------------------------------------------------------------

def cmd_environment(a):
    r, failures, notes = {}, [], []
    gpus, gpu_present = [], False
    if shutil.which("nvidia-smi"):
        try:
            p = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                                "--format=csv,noheader"], capture_output=True, text=True,
                               timeout=30)
            for line in p.stdout.splitlines():
                parts = [s.strip() for s in line.split(",")]
                if len(parts) == 3:
                    gpus.append({"name": parts[0], "memory_total": parts[1],
                                 "driver_version": parts[2]})
            gpu_present = p.returncode == 0 and bool(gpus)
        except (OSError, subprocess.SubprocessError) as e:
            notes.append("nvidia-smi failed: %s" % e)
    else:
        notes.append("nvidia-smi not found")
    code = ("import json, torch\n"
            "d = {'version': torch.__version__, 'cuda': torch.version.cuda,\n"
            "     'cuda_available': torch.cuda.is_available(),\n"
            "     'cmake_prefix_path': torch.utils.cmake_prefix_path,\n"
            "     'cxx11_abi': bool(torch._C._GLIBCXX_USE_CXX11_ABI)}\n"
            "if d['cuda_available']:\n"
            "    d['device_count'] = torch.cuda.device_count()\n"
            "    d['device_name'] = torch.cuda.get_device_name(0)\n"
            "    d['capability'] = '%d.%d' % torch.cuda.get_device_capability(0)\n"
            "print(json.dumps(d))\n")
    torch_info = None
    try:
        p = subprocess.run([a["python"], "-c", code], capture_output=True, text=True,
                           timeout=120)
        if p.returncode == 0:
            torch_info = json.loads(p.stdout.strip().splitlines()[-1])
        else:
            notes.append("%s cannot import torch: %s" % (a["python"],
                         (p.stderr.strip().splitlines() or ["?"])[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        notes.append("torch query failed: %s" % e)
    if torch_info and torch_info.get("cuda_available"):
        gpu_present = True
    r.update({"gpus": gpus, "gpu_present": gpu_present, "python": a["python"],
              "torch": torch_info, "git": a.get("git") or None, "mode": MODE})
    if torch_info:
        if torch_info.get("cxx11_abi") is False:
            notes.append("this torch uses the pre-C++11 std::string ABI: linking it with "
                         "Debian's yaml-cpp, GTest and Boost will fail")
        cap, arch = torch_info.get("capability"), a.get("arch")
        if cap and arch and cap not in re.split(r"[ ;]+", arch.replace("+PTX", "")):
            notes.append("GPU capability %s not in TORCH_CUDA_ARCH_LIST=%s" % (cap, arch))
    if not REHEARSE:
        if not gpu_present:
            failures.append("no GPU: nvidia-smi lists none and torch.cuda.is_available() "
                            "is not true")
        if a.get("need_torch") == "1" and not torch_info:
            failures.append("the build needs a Python torch (PYTHON=%s)" % a["python"])
    save("environment", finish(r, failures, notes))


def cmd_build(a):
    r, failures, notes = {"build_dir": a["build_dir"]}, [], []
    if a.get("built") == "1":
        r.update(run_info(a))
        r["cmake_prefix_path"] = a.get("prefix")
        if r["exit_code"] != 0:
            failures.append("configure or build failed (%s)" % r["exit_meaning"])
            r["log_tail"] = tail(a["log"], 40)
    else:
        r["skipped_build"] = a.get("reason")
    binary = a["bin"]
    r["trainer_run_exists"] = os.access(binary, os.X_OK)
    linked = []
    if r["trainer_run_exists"]:
        try:
            p = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30)
            for line in p.stdout.splitlines():
                name = line.strip().split(" ")[0]
                if re.match(r"lib(c10|torch)(_cuda|_cpu)?\.so|libcudart", name):
                    linked.append(name)
        except (OSError, subprocess.SubprocessError):
            notes.append("ldd failed")
    else:
        failures.append("no executable %s" % binary)
    r["torch_libraries"] = sorted(set(linked))
    r["cuda_linked"] = any(re.match(r"lib(c10|torch)_cuda", n) for n in linked)
    cache = os.path.join(a["build_dir"], "CMakeCache.txt")
    try:
        with open(cache, errors="replace") as f:
            m = re.search(r"^Torch_DIR:PATH=(.*)$", f.read(), re.M)
            r["torch_dir"] = m.group(1) if m else None
    except OSError:
        r["torch_dir"] = None
    if not REHEARSE and r["trainer_run_exists"] and not r["cuda_linked"]:
        failures.append("trainer-run does not link libc10_cuda/libtorch_cuda: a CPU LibTorch")
    save("build", finish(r, failures, notes))


def cmd_cuda_tests(a):
    r, failures, notes = run_info(a), [], []
    env = load("environment") or {}
    gpu = bool(env.get("gpu_present"))
    cases = []
    try:
        root = ET.parse(a["junit"]).getroot()
        for tc in root.iter("testcase"):
            out = "".join(e.text or "" for e in tc.iter("system-out"))
            skipped = tc.get("status") in ("notrun", "disabled") or \
                tc.find("skipped") is not None or "[  SKIPPED ]" in out
            cases.append({"name": tc.get("name"), "status": tc.get("status"),
                          "skipped": skipped, "seconds": float(tc.get("time") or 0)})
    except (OSError, ET.ParseError) as e:
        notes.append("no readable JUnit file: %s" % e)
    failed = [c["name"] for c in cases if c["status"] == "fail"]
    skipped = [c["name"] for c in cases if c["skipped"]]
    r.update({"tests": len(cases), "passed": len(cases) - len(failed) - len(skipped),
              "failed": failed, "skipped": skipped})
    if r["exit_code"] != 0 or failed:
        failures.append("ctest -R Cuda failed (%s): %s" % (r["exit_meaning"], failed))
        r["log_tail"] = tail(a["log"], 40)
    if not cases:
        if REHEARSE:
            notes.append("no test name matches 'Cuda' in this build: accepted in rehearsal only")
        else:
            failures.append("no test name matches 'Cuda': the CUDA tests are not in this build")
    if skipped:
        if REHEARSE:
            notes.append("skipped-test check off in rehearsal; skipped: %s" % skipped)
        elif gpu:
            failures.append("a GPU is present but these Cuda tests skipped themselves: %s"
                            % skipped)
    save("cuda_tests", finish(r, failures, notes))


def _set_key(lines, section, key, value):
    """Set `  key: value` inside top-level `section:`; it must occur exactly once."""
    hits, current = [], None
    for i, line in enumerate(lines):
        m = re.match(r"^([A-Za-z_]\w*):", line)
        if m:
            current = m.group(1)
        elif current == section and re.match(r"^  %s:" % re.escape(key), line):
            hits.append(i)
    if len(hits) != 1:
        raise ValueError("%s.%s occurs %d times in the source config" % (section, key, len(hits)))
    lines[hits[0]] = "  %s: %s" % (key, value)


def cmd_config(a):
    r, failures = {"source": a["src"], "config": a["dst"]}, []
    src_dir = os.path.dirname(os.path.abspath(a["src"]))
    try:
        with open(a["src"]) as f:
            lines = f.read().splitlines()
        if any(re.match(r"^plan:", l) for l in lines):
            raise ValueError("the source config has a plan: section; the checks need the "
                             "default (naive) plan")
        updates = a["updates"]
        # The bundled job's budget (64MiB) is set so that its naive plan does not fit; the
        # checks measure that plan, so the copy gets the budget the device has room for.
        # Dropout 0.1: the parity plans checkpoint blocks, whose recompute on the GPU runs on
        # LibTorch's device thread and must draw the forward's masks there.
        for section, key, value in [("memory", "budget", "24GiB"),
                                    ("model", "dropout", "0.1"),
                                    ("runtime", "device", a["device"]),
                                    ("runtime", "threads", a["threads"]),
                                    ("training", "updates", updates),
                                    ("training", "eval_interval", updates),
                                    ("training", "checkpoint_interval", updates)]:
            _set_key(lines, section, key, value)
        # Data paths: absolute, so the copy reads what the original reads; they must exist.
        current, in_files, missing, files = None, False, [], []
        for i, line in enumerate(lines):
            m = re.match(r"^([A-Za-z_]\w*):", line)
            if m:
                current, in_files = m.group(1), False
                continue
            if current == "data" and re.match(r"^  files:", line):
                in_files = True
                continue
            if in_files:
                fm = re.match(r"^(\s+- )(.+?)\s*$", line)
                if fm:
                    path = fm.group(2).strip("'\"")
                    if not os.path.isabs(path):
                        path = os.path.normpath(os.path.join(src_dir, path))
                        lines[i] = fm.group(1) + path
                    files.append(path)
                    if not os.path.exists(path):
                        missing.append(path)
                elif re.match(r"^  \S", line):
                    in_files = False
        eff = 32
        for line in lines:
            m = re.match(r"^  effective_batch:\s*(\d+)", line)
            if m:
                eff = int(m.group(1))
        n_layer = 4
        for line in lines:
            m = re.match(r"^  n_layer:\s*(\d+)", line)
            if m:
                n_layer = int(m.group(1))
        header = "# written by scripts/device-check.sh from %s\n" % a["src"]
        with open(a["dst"], "w") as f:
            f.write(header + "\n".join(lines) + "\n")
        if missing:
            failures.append("data files missing: %s" % missing)
        if eff % 8 or n_layer < 4:
            failures.append("the parity plans assume effective_batch divisible by 8 and "
                            "n_layer >= 4 (got %d, %d)" % (eff, n_layer))
        plans = {
            "fp32": {"microbatch": eff // 4, "accumulation_steps": 4,
                     "checkpoint_blocks": [0, 2], "precision": "fp32"},
            "bf16": {"microbatch": eff // 4, "accumulation_steps": 4,
                     "checkpoint_blocks": [1, 3], "precision": "bf16"},
            "fp16": {"microbatch": eff // 2, "accumulation_steps": 2,
                     "checkpoint_blocks": [0, 1, 2], "precision": "fp16"},
            "naive": {"microbatch": eff, "accumulation_steps": 1,
                      "checkpoint_blocks": "none", "precision": "fp32"},
        }
        for name, plan in plans.items():
            with open(os.path.join(a["plans"], name + ".yaml"), "w") as f:
                for k in ("microbatch", "accumulation_steps", "checkpoint_blocks", "precision"):
                    v = plan[k]
                    f.write("%s: %s\n" % (k, json.dumps(v) if isinstance(v, list) else v))
        r.update({"device": a["device"], "threads": a["threads"], "updates": int(updates),
                  "effective_batch": eff, "n_layer": n_layer, "data_files": len(files),
                  "plans": plans})
    except (OSError, ValueError) as e:
        failures.append(str(e))
    save("config", finish(r, failures))


def _plan_equal(got, want):
    if not isinstance(got, dict):
        return False
    blocks = want["checkpoint_blocks"]
    blocks = [] if blocks == "none" else blocks
    return got.get("microbatch") == want["microbatch"] and \
        got.get("accumulation_steps") == want["accumulation_steps"] and \
        list(got.get("checkpoint_blocks") or []) == blocks and \
        got.get("precision") == want["precision"]


def check_report_device(obj, r, failures):
    """A report's device_info (trainer-run adds it to --parity, --ledger and --plan-only JSON)
    must name the device the check asked for."""
    info = obj.get("device_info")
    want = (load("config") or {}).get("device")
    if isinstance(info, dict):
        r["device_info"] = info
        if want and info.get("type") != want:
            failures.append("report ran on %s, not %s" % (info.get("type"), want))


def cmd_parity(a):
    precision = a["precision"]
    r, failures = run_info(a), []
    want = ((load("config") or {}).get("plans") or {}).get(precision)
    obj = single_object(a["stdout"])
    err = error_event(obj)
    if err:
        r["error"] = err
    elif obj is None:
        failures.append("no JSON object on stdout")
    else:
        for k in ("pass", "failures", "comparisons", "plan", "checked_plan",
                  "checked_effective_batch", "reduction", "memory"):
            r[k] = obj.get(k)
        check_report_device(obj, r, failures)
        # The whole check is fitted to the usable memory from a prediction (parity.h).
        m = obj.get("memory") or {}
        if m.get("measured_peak_bytes", 0) > m.get("predicted_peak_bytes", 0):
            failures.append("the check's measured peak %s exceeds its prediction %s"
                            % (m.get("measured_peak_bytes"), m.get("predicted_peak_bytes")))
        if obj.get("pass") is not True:
            failures.append("parity verdict is not pass")
        if want and not _plan_equal(obj.get("plan"), want):
            failures.append("the JSON's plan %s is not the requested %s"
                            % (obj.get("plan"), want))
    if r["exit_code"] != 0:
        failures.append("exit %d (%s)" % (r["exit_code"], r["exit_meaning"]))
    if failures:
        fail_details(r, a)
    save("parity_" + precision, finish(r, failures))


def cmd_ledger(a):
    r, failures, notes = run_info(a), [], []
    obj = single_object(a["stdout"])
    err = error_event(obj)
    if err:
        r["error"] = err
        failures.append("error event")
    elif obj is None:
        failures.append("no JSON object on stdout")
    else:
        check_report_device(obj, r, failures)
        cats = {k: obj.get(k) for k in ("parameters_bytes", "gradients_bytes",
                                        "optimizer_state_bytes", "inputs_bytes",
                                        "activations_bytes", "temporaries_bytes")}
        peak = obj.get("peak_bytes")
        fields = peak_fields(obj)
        r.update({"plan": obj.get("plan"), "method": obj.get("method"),
                  "peak_bytes": peak, "peak_mib": mib(peak), "peak_fields": fields,
                  "categories": cats, "usable_bytes": obj.get("usable_bytes"),
                  "budget_bytes": obj.get("budget_bytes")})
        others = {k: v for k, v in fields.items() if k != "peak_bytes"}
        if others and peak:
            r["peak_vs_other_fields"] = {k: round(peak / v, 4) if v else None
                                         for k, v in others.items()}
        elif not REHEARSE:
            notes.append("the ledger JSON has no caching-allocator or reserved peak beside "
                         "peak_bytes: nothing to compare it with")
        if not isinstance(peak, (int, float)) or peak <= 0:
            failures.append("measured peak_bytes is %r" % peak)
        low = reserved_below(fields, peak)
        if low:
            failures.append("reserved peak below the allocated peak_bytes %r: %s" % (peak, low))
        negative = [k for k, v in cats.items() if isinstance(v, (int, float)) and v < 0]
        if negative:
            failures.append("negative ledger categories: %s" % negative)
        if all(isinstance(v, (int, float)) for v in cats.values()) and peak:
            r["categories_sum_bytes"] = sum(cats.values())
        want = ((load("config") or {}).get("plans") or {}).get("naive")
        if want and not _plan_equal(obj.get("plan"), want):
            failures.append("the ledger measured plan %s, not the naive plan"
                            % obj.get("plan"))
        method = obj.get("method") or ""
        if not REHEARSE and "cuda" not in method.lower():
            failures.append("ledger method %r is not the CUDA allocator" % method)
    if r["exit_code"] != 0:
        failures.append("exit %d (%s)" % (r["exit_code"], r["exit_meaning"]))
    if failures:
        fail_details(r, a)
    save("ledger", finish(r, failures, notes))


def cmd_budget(a):
    """Prints the budget: 60% of the naive plan's ledger peak (nothing if unknown)."""
    ledger = load("ledger") or {}
    peak = ledger.get("peak_bytes")
    if isinstance(peak, (int, float)) and peak > 0:
        print(int(peak * 60 // 100))


def cmd_budget_plan_only(a):
    r, failures = run_info(a), []
    budget = int(a["budget"])
    naive_peak = (load("ledger") or {}).get("peak_bytes")
    r.update({"budget_bytes": budget, "budget_mib": mib(budget),
              "naive_peak_bytes": naive_peak})
    obj = single_object(a["stdout"])
    err = error_event(obj)
    if err:
        r["error"] = err
    elif obj is None:
        failures.append("no JSON object on stdout")
    else:
        plan = {k: obj.get(k) for k in ("microbatch", "accumulation_steps",
                                        "checkpoint_blocks", "precision")}
        usable = obj.get("usable_bytes")
        r.update({"plan": plan, "usable_bytes": usable, "usable_mib": mib(usable),
                  "predicted_peak_bytes": obj.get("predicted_peak_bytes"),
                  "measured_peak_bytes": obj.get("measured_peak_bytes"),
                  "fits_memory": obj.get("fits_memory"), "fits_window": obj.get("fits_window"),
                  "probe_seconds": obj.get("probe_seconds"),
                  "rejected": len(obj.get("rejected") or [])})
        if obj.get("fits_memory") is not True:
            failures.append("fits_memory is not true")
        if isinstance(usable, (int, float)):
            if isinstance(naive_peak, (int, float)) and naive_peak <= usable:
                failures.append("the naive peak %s fits the usable %s: not a tight budget"
                                % (naive_peak, usable))
            mp = obj.get("measured_peak_bytes")
            if not isinstance(mp, (int, float)) or mp > usable:
                failures.append("measured_peak_bytes %r is not under usable %r" % (mp, usable))
        else:
            failures.append("no usable_bytes in the plan JSON")
        want = ((load("config") or {}).get("plans") or {}).get("naive")
        if want and _plan_equal(plan, want):
            failures.append("the planner chose the naive plan under a budget it exceeds")
    if r["exit_code"] != 0:
        failures.append("exit %d (%s)" % (r["exit_code"], r["exit_meaning"]))
    if failures:
        fail_details(r, a)
    save("budget_plan_only", finish(r, failures))


def _training(a, r, failures, notes):
    """Reads a training run's JSON lines into r; returns (start, finish) events."""
    events, bad = json_lines(a["stdout"])
    if bad:
        notes.append("%d stdout lines were not JSON" % bad)
    kinds = [e.get("event") for e in events]
    start = next((e for e in events if e.get("event") == "start"), None)
    fin = next((e for e in reversed(events) if e.get("event") == "finish"), None)
    plan_ev = next((e for e in events if e.get("event") == "plan"), None)
    errors = [error_event(e) for e in events if e.get("event") == "error"]
    warnings = [{"kind": e.get("kind"), "message": e.get("message")}
                for e in events if e.get("event") == "warning"]
    live = [e.get("live_bytes") for e in events if e.get("event") == "update"
            and isinstance(e.get("live_bytes"), (int, float))]
    r["updates_seen"] = kinds.count("update")
    if errors:
        r["errors"] = errors
    if warnings:
        r["warnings"] = warnings
    if plan_ev:
        p = plan_ev.get("plan") or {}
        r["planned"] = {k: p.get(k) for k in ("microbatch", "accumulation_steps",
                                              "checkpoint_blocks", "precision",
                                              "measured_peak_bytes")}
    if start:
        r["device"] = start.get("device")
        r["plan"] = start.get("plan")
        r["usable_bytes"] = start.get("usable_bytes")
        r["budget_bytes"] = start.get("budget_bytes")
        r["torch_version"] = start.get("torch_version")
        want = "cuda" if DEVICE == "cuda" else "cpu"
        if "device_info" in start:
            info = start.get("device_info")
            r["device_info"] = info
            if isinstance(info, dict) and info.get("type") not in (None, want):
                failures.append("start device_info.type %r, expected %s"
                                % (info.get("type"), want))
        if not str(start.get("device", "")).startswith(want):
            failures.append("start event device %r, expected %s" % (start.get("device"), want))
    else:
        failures.append("no start event")
    if live:
        r["max_update_live_bytes"] = max(live)
    if fin:
        for k in ("peak_bytes", "memory_method", "tokens_per_second", "samples_per_second",
                  "mfu", "measurement_valid", "measurement_note", "model_flops_per_second",
                  "peak_flops_per_second", "throughput_method", "final_train_loss",
                  "eval_mean_loss", "elapsed_seconds", "hardware", "updates"):
            r[k] = fin.get(k)
        r["peak_mib"] = mib(fin.get("peak_bytes"))
        other = {k: v for k, v in peak_fields(fin).items() if k != "peak_bytes"}
        if other:
            r["finish_peak_fields"] = other
        low = reserved_below(other, fin.get("peak_bytes"))
        if low:
            failures.append("reserved peak below the allocated peak_bytes %r: %s"
                            % (fin.get("peak_bytes"), low))
    else:
        failures.append("no finish event")
    if r["exit_code"] != 0:
        failures.append("exit %d (%s)" % (r["exit_code"], r["exit_meaning"]))
    return start, fin


def cmd_budget_training(a):
    r, failures, notes = run_info(a), [], []
    budget = int(a["budget"])
    start, fin = _training(a, r, failures, notes)
    if start and start.get("budget_bytes") != budget:
        failures.append("start budget_bytes %r is not --budget %d"
                        % (start.get("budget_bytes"), budget))
    usable = (start or {}).get("usable_bytes")
    if fin:
        peak = fin.get("peak_bytes")
        if not isinstance(peak, (int, float)) or peak <= 0:
            failures.append("finish peak_bytes is %r" % peak)
        elif not isinstance(usable, (int, float)):
            failures.append("no usable_bytes in the start event")
        else:
            r["peak_fraction_of_usable"] = round(peak / usable, 4)
            if peak > usable:
                failures.append("finish peak_bytes %d exceeds usable %d" % (peak, usable))
        for k, v in (r.get("finish_peak_fields") or {}).items():
            if "reserved" in k and isinstance(usable, (int, float)) and v > usable:
                notes.append("%s %d is above usable %d (allocated stayed under)" % (k, v, usable))
    if failures:
        fail_details(r, a)
    save("budget_training", finish(r, failures, notes))


def cmd_throughput(a):
    r, failures, notes = run_info(a), [], []
    start, fin = _training(a, r, failures, notes)
    if fin:
        tps = fin.get("tokens_per_second")
        if not isinstance(tps, (int, float)) or tps <= 0:
            failures.append("tokens_per_second is %r" % tps)
        if fin.get("measurement_valid") is not True:
            msg = "measurement_valid is %r: %s" % (fin.get("measurement_valid"),
                                                   fin.get("measurement_note"))
            (notes if REHEARSE else failures).append(msg)
        mfu = fin.get("mfu")
        if mfu is not None and not (0 < mfu <= 1):
            failures.append("mfu %r outside (0, 1]" % mfu)
    if failures:
        fail_details(r, a)
    save("throughput", finish(r, failures, notes))


def cmd_daemon_cycle(a):
    r, failures, notes = run_info(a), [], []
    log_lines = tail(a["log"], 400)
    runs = [int(m.group(1)) for m in
            (re.match(r"^trainerd: run (\d+) succeeded", line) for line in log_lines) if m]
    if r["exit_code"] != 0:
        failures.append("trainerd --once exit %d (%s)" % (r["exit_code"], r["exit_meaning"]))
    if not runs:
        failures.append("no run succeeded")
    else:
        r["run"] = runs[-1]
        try:
            p = subprocess.run([a["ctl"], "--state-dir", a["state"], "show", str(runs[-1]),
                                "--json"], capture_output=True, text=True, timeout=60)
            shown = json.loads(p.stdout)
        except (OSError, subprocess.SubprocessError, ValueError) as e:
            shown = None
            failures.append("trainerctl show %d --json failed: %s" % (runs[-1], e))
        if shown:
            run = shown.get("run") or {}
            kinds = [e.get("kind") for e in shown.get("events") or []]
            hw = run.get("hardware") or {}
            r.update({k: run.get(k) for k in ("status", "plan", "peak_memory_bytes",
                                              "tokens_per_second", "mfu", "parity_seconds",
                                              "throughput_method")})
            r["hardware"] = hw
            r["events"] = kinds
            if run.get("status") != "succeeded":
                failures.append("run status %r" % run.get("status"))
            want = ((load("environment") or {}).get("torch") or {}).get("device_name")
            if DEVICE == "cuda" and (hw.get("device") in (None, "", "cpu") or
                                     (want and hw.get("device") != want)):
                failures.append("the run's hardware is %r, not the GPU %r" % (hw.get("device"),
                                                                              want))
            for kind in ("plan", "ledger", "parity", "released"):
                if kind not in kinds:
                    failures.append("no %s event" % kind)
            if DEVICE == "cuda" and "profile_skipped" not in kinds:
                failures.append("no profile_skipped event (a CUDA plan is not profiled)")
            peak = (run.get("peak_memory_bytes") or {}).get("peak")
            if not isinstance(peak, (int, float)) or peak <= 0:
                failures.append("the run's peak memory is %r" % peak)
    if failures:
        r["log_tail"] = log_lines[-30:]
    save("daemon_cycle", finish(r, failures, notes))


def cmd_missing(a):
    """A step that could not run (no time left, or what it needs failed)."""
    save(a["step"], {"status": "fail", "failures": [a["reason"]]})


def cmd_summary(a):
    steps = {}
    for name in ORDER:
        res = load(name)
        steps[name] = res if res is not None else {"status": "fail",
                                                    "failures": ["step did not record a result"]}
    env = steps["environment"]
    torch_info = env.get("torch") or {}
    trainer_torch = steps["throughput"].get("torch_version") or \
        steps["budget_training"].get("torch_version")
    failed = [n for n, s in steps.items() if s.get("status") == "fail"]
    parity = {p: {k: steps["parity_" + p].get(k) for k in
                  ("status", "pass", "failures", "memory")}
              for p in ("fp32", "bf16", "fp16")}
    tp, bt, lg = steps["throughput"], steps["budget_training"], steps["ledger"]
    summary = {
        "check": "scripts/device-check.sh",
        "ok": not failed,
        "mode": MODE,
        "device": DEVICE,
        "gpu_run": not REHEARSE,
        "note": None if not REHEARSE else
        "CPU rehearsal: checks the script's logic, not the CUDA path",
        "elapsed_seconds": round(float(a.get("elapsed", 0)), 1),
        "time_limit_seconds": int(a.get("time_limit", 0)),
        "git": env.get("git"),
        "gpu": (env.get("gpus") or [None])[0],
        "gpus": env.get("gpus"),
        "gpu_present": env.get("gpu_present"),
        "torch_version": torch_info.get("version"),
        "torch_cuda": torch_info.get("cuda"),
        "trainer_torch_version": trainer_torch,
        "device_info": tp.get("device_info") or bt.get("device_info"),
        "build_dir": steps["build"].get("build_dir"),
        "out_dir": OUT,
        "figures": {
            "parity": parity,
            "ledger_peak_bytes": lg.get("peak_bytes"),
            "ledger_peak_fields": lg.get("peak_fields"),
            "ledger_method": lg.get("method"),
            "budget_bytes": steps["budget_plan_only"].get("budget_bytes"),
            "budget_usable_bytes": bt.get("usable_bytes"),
            "budget_plan": bt.get("plan"),
            "budget_finish_peak_bytes": bt.get("peak_bytes"),
            "budget_peak_fraction_of_usable": bt.get("peak_fraction_of_usable"),
            "tokens_per_second": tp.get("tokens_per_second"),
            "samples_per_second": tp.get("samples_per_second"),
            "mfu": tp.get("mfu"),
            "measurement_valid": tp.get("measurement_valid"),
            "throughput_plan": tp.get("plan"),
            "budget_run_tokens_per_second": bt.get("tokens_per_second"),
            "budget_run_mfu": bt.get("mfu"),
            "budget_run_measurement_valid": bt.get("measurement_valid"),
            "daemon_plan": steps["daemon_cycle"].get("plan"),
            "daemon_tokens_per_second": steps["daemon_cycle"].get("tokens_per_second"),
            "daemon_peak_memory_bytes": steps["daemon_cycle"].get("peak_memory_bytes"),
        },
        "failed_steps": failed,
        "steps": steps,
    }
    text = json.dumps(summary, indent=2, sort_keys=False)
    with open(os.path.join(OUT, "summary.json"), "w") as f:
        f.write(text + "\n")
    print(text)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    globals()["cmd_" + sys.argv[1]](kv(sys.argv[2:]))
PY

export DC_OUT=$out DC_MODE=$mode DC_DEVICE=$device
# trainer-run caches the peak-FLOPs probe behind MFU in $XDG_CACHE_HOME/trainerd: a fresh cache
# makes the check measure it here and now, as a first run on this machine would.
export XDG_CACHE_HOME=$out/cache
check() { python3 "$helper" "$@"; }
status_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("status"))' \
  "$out/results/$1.json" 2>/dev/null || echo missing; }

# timed STEP LIMIT STDOUT STDERR CMD...: runs CMD under `timeout`, capped by the deadline;
# sets $rc and $secs. A step with under 10 s left is not started (rc 200).
timed() {
  local step=$1 limit=$2 stdout=$3 stderr=$4
  shift 4
  local left=$((deadline - SECONDS))
  ((left < limit)) && limit=$left
  rc=0
  secs=0
  if ((limit < 10)); then
    log "$step: no time left before the ${time_limit}s deadline"
    echo "device-check: not started, deadline reached" >>"$stderr"
    rc=200
    return 0
  fi
  local t0=$SECONDS
  if [[ $stdout == "$stderr" ]]; then
    timeout --kill-after=5 "$limit" "$@" >"$stdout" 2>&1 || rc=$?
  else
    timeout --kill-after=5 "$limit" "$@" >"$stdout" 2>>"$stderr" || rc=$?
  fi
  secs=$((SECONDS - t0))
}

git_desc=$(git -C "$repo" describe --always --dirty 2>/dev/null || true)

# ---- 1. environment ----------------------------------------------------------------
need_torch=0
if [[ $mode == device && -z $bundle && ! ( $build_dir_given -eq 1 && -f $build_dir/CMakeCache.txt ) ]]; then
  need_torch=1
fi
log "environment: nvidia-smi and $PYTHON's torch"
check environment python="$PYTHON" need_torch=$need_torch git="$git_desc" \
  arch="${TORCH_CUDA_ARCH_LIST:-9.0}"
log "environment: $(status_of environment)"

# ---- 2. build ------------------------------------------------------------------------
if [[ $need_torch -eq 0 ]]; then
  log "build: skipped, using the existing build $build_dir"
  reason="--build-dir names an existing build"
  [[ -z $bundle ]] || reason="a prebuilt bundle (scripts/device-bundle.sh)"
  check build built=0 reason="$reason" bin="$bin" \
    build_dir="$build_dir" log=/dev/null
else
  log "build: LibTorch of $PYTHON's torch into $build_dir (log: $out/logs/build.log)"
  prefix=
  prefix=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)' \
    2>>"$out/logs/build.log") || prefix=
  if [[ -z $prefix ]]; then
    echo "device-check: $PYTHON cannot import torch" >>"$out/logs/build.log"
    rc=1
    secs=0
  else
    cat >"$out/build.sh" <<EOF
set -euo pipefail
cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \\
  -DCMAKE_PREFIX_PATH="$prefix" -DTRAINERD_BUILD_BENCHMARKS=OFF \\
  -DTORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"
cmake --build "$build_dir" --parallel "$(nproc)"
EOF
    timed build 400 "$out/logs/build.log" "$out/logs/build.log" bash "$out/build.sh"
  fi
  check build built=1 rc=$rc seconds=$secs log="$out/logs/build.log" bin="$bin" \
    build_dir="$build_dir" prefix="$prefix"
fi
log "build: $(status_of build)"

# ---- 3. CUDA tests -------------------------------------------------------------------
log "cuda_tests: ctest -R Cuda"
junit=$out/cuda-tests.xml
timed cuda_tests 240 "$out/logs/cuda-tests.log" "$out/logs/cuda-tests.log" \
  ctest --test-dir "$build_dir" -R Cuda --output-on-failure --timeout 120 \
  --output-junit "$junit"
check cuda_tests rc=$rc seconds=$secs junit="$junit" log="$out/logs/cuda-tests.log"
log "cuda_tests: $(status_of cuda_tests)"

# ---- 4. job config and plans -----------------------------------------------------------
check config src="$repo/configs/default.yaml" dst="$job" plans="$out/plans" device=$device \
  threads="$threads" updates="$updates"
log "config: $(status_of config) ($job, device: $device, threads: $threads)"

if [[ $(status_of config) != pass || ! -x $bin ]]; then
  for step in parity_fp32 parity_bf16 parity_fp16 ledger budget_plan_only budget_training \
    throughput daemon_cycle; do
    check missing step=$step reason="not run: the job config or trainer-run is missing"
  done
else
  # ---- 5a. parity per precision --------------------------------------------------------
  for precision in fp32 bf16 fp16; do
    log "parity_$precision: trainer-run --parity"
    timed "parity_$precision" 120 "$out/parity-$precision.json" \
      "$out/logs/parity-$precision.stderr" \
      "$bin" --config "$job" --plan "$out/plans/$precision.yaml" --parity --json
    check parity precision=$precision rc=$rc seconds=$secs \
      stdout="$out/parity-$precision.json" stderr="$out/logs/parity-$precision.stderr"
    log "parity_$precision: $(status_of "parity_$precision")"
  done

  # ---- 5b. ledger (the config has no plan: the naive one) ------------------------------
  log "ledger: trainer-run --ledger"
  timed ledger 90 "$out/ledger.json" "$out/logs/ledger.stderr" \
    "$bin" --config "$job" --ledger --json
  check ledger rc=$rc seconds=$secs stdout="$out/ledger.json" stderr="$out/logs/ledger.stderr"
  log "ledger: $(status_of ledger)"

  # ---- 5c. planner into 60% of the naive peak ------------------------------------------
  budget=$(check budget)
  if [[ -z $budget ]]; then
    check missing step=budget_plan_only reason="not run: no ledger peak to derive a budget"
    check missing step=budget_training reason="not run: no ledger peak to derive a budget"
  else
    log "budget_plan_only: trainer-run --plan-only --budget $budget"
    timed budget_plan_only 150 "$out/budget-plan.json" "$out/logs/budget-plan.stderr" \
      "$bin" --config "$job" --budget "$budget" --plan-only --json
    check budget_plan_only budget="$budget" rc=$rc seconds=$secs \
      stdout="$out/budget-plan.json" stderr="$out/logs/budget-plan.stderr"
    log "budget_plan_only: $(status_of budget_plan_only)"

    log "budget_training: trainer-run --plan auto --budget $budget"
    timed budget_training 180 "$out/budget-run.jsonl" "$out/logs/budget-run.stderr" \
      "$bin" --config "$job" --plan auto --budget "$budget" --json \
      --output-dir "$out/runs/budget"
    check budget_training budget="$budget" rc=$rc seconds=$secs \
      stdout="$out/budget-run.jsonl" stderr="$out/logs/budget-run.stderr"
    log "budget_training: $(status_of budget_training)"
  fi

  # ---- 5d. throughput and MFU: the naive plan at the job's own budget ------------------
  # (a fixed plan: a second planner probe would double the step's time for no new check)
  log "throughput: trainer-run --plan naive"
  timed throughput 180 "$out/throughput-run.jsonl" "$out/logs/throughput-run.stderr" \
    "$bin" --config "$job" --plan "$out/plans/naive.yaml" --json \
    --output-dir "$out/runs/throughput"
  check throughput rc=$rc seconds=$secs stdout="$out/throughput-run.jsonl" \
    stderr="$out/logs/throughput-run.stderr"
  log "throughput: $(status_of throughput)"

  # ---- 5e. one nightly cycle of the daemon on the job ----------------------------------
  log "daemon_cycle: trainerd --once"
  mkdir -p "$out/daemon"
  printf '%s\n' "job: $job" "state_dir: $out/daemon/state" 'metrics: {listen: ""}' \
    "parity: {updates: 2}" >"$out/daemon/trainerd.yaml"
  timed daemon_cycle 240 "$out/logs/daemon.log" "$out/logs/daemon.log" \
    "$build_dir/bin/trainerd" --config "$out/daemon/trainerd.yaml" --once
  check daemon_cycle rc=$rc seconds=$secs log="$out/logs/daemon.log" \
    ctl="$build_dir/bin/trainerctl" state="$out/daemon/state"
  log "daemon_cycle: $(status_of daemon_cycle)"
fi

# ---- summary -------------------------------------------------------------------------
rc=0
check summary elapsed=$SECONDS time_limit="$time_limit" || rc=$?
log "done in ${SECONDS}s: $([[ $rc -eq 0 ]] && echo 'every step passed' || echo 'FAILED') \
(summary: $out/summary.json, logs: $out/logs)"
exit "$rc"
