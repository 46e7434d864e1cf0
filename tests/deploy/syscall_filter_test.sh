#!/usr/bin/env bash
# The unit's SystemCallFilter= lines, applied with seccomp as systemd applies them (after
# dropping to an unprivileged user, as User= does), leave the service working: trainerd under
# the filter answers trainerctl, serves /metrics, runs a nightly cycle (parity, ledger,
# training in bf16, release) and stops cleanly on SIGTERM; trainer-run under the filter runs
# oneDNN's JIT-compiled kernels. Any call outside the set kills the process (SIGSYS), so one
# the service needs fails the test loudly. A call outside the set is shown to be refused first.
#
# Usage: syscall_filter_test.sh SOURCE_DIR BIN_DIR SYSTEMD_ANALYZE SYSCALL_FILTER_EXEC
# Runs as root (to become user nobody, 65534); exit 77 (skipped) where this machine cannot
# install a seccomp filter or the test is not root.
set -euo pipefail

source_dir=$1
bin_dir=$2
systemd_analyze=$3
filter_exec=$4
unit=$source_dir/deploy/trainerd.service
scale=${TRAINERD_TEST_TIME_SCALE:-1}

fail() {
  echo "FAIL: $*" >&2
  [[ -f ${tmp:-}/daemon.log ]] && sed 's/^/  daemon: /' "$tmp/daemon.log" >&2
  exit 1
}
[[ -x $systemd_analyze ]] || fail "systemd-analyze not found ('$systemd_analyze'): scripts/install-deps.sh"

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: needs root, to run the service as an unprivileged user as systemd's User= does"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/trainerd-syscalls-XXXXXX")
daemon_pid=
cleanup() {
  [[ -n $daemon_pid ]] && kill -KILL "$daemon_pid" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# The system calls of a set name (@group, recursively) or a plain name.
expand() {
  local item
  for item in "$@"; do
    if [[ $item == @* ]]; then
      # The first line repeats the name, then a "# description" line, then the members.
      mapfile -t members < <("$systemd_analyze" syscall-filter --no-pager "$item" |
        awk 'NR > 1 && $1 !~ /^#/ && NF { print $1 }')
      [[ ${#members[@]} -gt 0 ]] || fail "systemd-analyze knows no set $item"
      expand "${members[@]}"
    else
      echo "$item"
    fi
  done
}

# systemd's semantics: the first line without ~ is the allow list; a ~ line removes calls.
allow=() deny=()
while IFS= read -r line; do
  value=${line#SystemCallFilter=}
  if [[ $value == ~* ]]; then
    read -ra names <<< "${value#\~}"
    deny+=("${names[@]}")
  else
    read -ra names <<< "$value"
    allow+=("${names[@]}")
  fi
done < <(grep -E '^SystemCallFilter=' "$unit")
[[ ${#allow[@]} -gt 0 ]] || fail "deploy/trainerd.service has no SystemCallFilter= allow list"
expand "${allow[@]}" | sort -u > "$tmp/allowed"
if ((${#deny[@]})); then
  expand "${deny[@]}" | sort -u > "$tmp/denied"
  comm -23 "$tmp/allowed" "$tmp/denied" > "$tmp/syscalls"
else
  cp "$tmp/allowed" "$tmp/syscalls"
fi
echo "the unit allows $(wc -l < "$tmp/syscalls") system calls (${allow[*]} less ${deny[*]:-nothing})"

# 1. The filter is real: hostname(1) setting the host name calls sethostname (@privileged,
#    denied) and is killed before it can change anything.
set +e
"$filter_exec" "$tmp/syscalls" /bin/true 2> "$tmp/probe.err"
rc=$?
set -e
if [[ $rc -eq 126 ]]; then
  echo "SKIP: this machine cannot install a seccomp filter: $(cat "$tmp/probe.err")"
  exit 77
fi
[[ $rc -eq 0 ]] || fail "/bin/true under the filter exited $rc: $(cat "$tmp/probe.err")"
grep -qx sethostname "$tmp/syscalls" && fail "sethostname is allowed; expected @privileged denied"
set +e
"$filter_exec" "$tmp/syscalls" /bin/hostname "$(hostname)" 2> /dev/null
rc=$?
set -e
[[ $rc -eq $((128 + 31)) ]] || fail "hostname under the filter exited $rc, expected 159 (SIGSYS)"
echo "ok: a call outside the set (sethostname) kills the process with SIGSYS"

# 2. The service under the filter. A tiny GPT in bf16 (oneDNN's JIT kernels) over Debian's
#    licence texts; the schedule's start is 12 hours away, so only run-now starts a cycle.
# shellcheck source=../support/tiny_job.sh
source "$(dirname "$0")/../support/tiny_job.sh"
tiny_job_yaml 8 12 6 "plan: {microbatch: 4, accumulation_steps: 2, precision: bf16}" \
  > "$tmp/job.yaml"
port=$((20000 + RANDOM % 20000))
cat > "$tmp/trainerd.yaml" << EOF
job: job.yaml
schedule: {start: "$(date -u -d '+12 hours' +%H:%M)", window: 1h}
state_dir: state
metrics: {listen: "127.0.0.1:$port"}
parity: {updates: 2}
regression: {beat_baseline: false}
EOF
ctl() { "$bin_dir/trainerctl" --state-dir "$tmp/state" "$@"; }
# As the unit runs it: an unprivileged user (SQLite run by root calls fchown, which
# @privileged denies; as any other user it does not), its cache in a folder of its own.
chown 65534:65534 "$tmp"
# (exec: the process a caller starts in the background is the program itself, pid and all.)
as_service() {
  XDG_CACHE_HOME=$tmp/cache exec setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$filter_exec" "$tmp/syscalls" "$@"
}
# A build whose libraries an unprivileged user cannot read (LibTorch 2.x from the pip wheel
# under /root/.cache) cannot be run as one at all, filter or not: that is this machine's
# layout, not the unit's, so the test skips. The check runs without the filter.
if ! unfiltered=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$bin_dir/trainer-run" \
  --version 2>&1); then
  echo "SKIP: trainer-run cannot start as an unprivileged user here: $unfiltered"
  exit 77
fi
as_service "$bin_dir/trainerd" --config "$tmp/trainerd.yaml" > "$tmp/daemon.log" 2>&1 &
daemon_pid=$!
for ((i = 0; i < 100 * scale; ++i)); do
  ctl status > /dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2> /dev/null || fail "trainerd under the filter died before it answered"
  sleep 0.2
done
ctl status > /dev/null || fail "trainerd under the filter does not answer trainerctl status"
ctl run-now > /dev/null || fail "run-now refused"
for ((i = 0; i < 300 * scale; ++i)); do
  status=$(ctl runs --json | python3 -c 'import json, sys
runs = json.load(sys.stdin)["runs"]
print(runs[0]["status"] if runs else "none")')
  [[ $status == succeeded ]] && break
  [[ $status == none || $status == running || $status == scheduled ]] ||
    fail "run 1 ended $status under the filter: $(cat "$tmp/state/logs/run-1.log" 2> /dev/null)"
  kill -0 "$daemon_pid" 2> /dev/null || fail "trainerd under the filter died during the cycle"
  sleep 1
done
[[ $status == succeeded ]] || fail "run 1 did not succeed in time (last status $status)"
echo "ok: trainerd under the filter answered trainerctl and its run succeeded"

metrics=$(python3 -c "import urllib.request
print(urllib.request.urlopen('http://127.0.0.1:$port/metrics', timeout=10).read().decode())") ||
  fail "GET http://127.0.0.1:$port/metrics failed"
grep -q '^trainerd_runs_total{.*outcome="succeeded"} 1' <<< "$metrics" ||
  fail "/metrics has no succeeded run: $(grep '^trainerd_runs_total' <<< "$metrics")"
echo "ok: /metrics served under the filter"

kill -TERM "$daemon_pid"
set +e
wait "$daemon_pid"
rc=$?
set -e
daemon_pid=
[[ $rc -eq 0 ]] || fail "trainerd under the filter exited $rc on SIGTERM, expected 0"
echo "ok: trainerd under the filter stopped cleanly on SIGTERM"

# 3. oneDNN's JIT under the filter: trainer-run on the same job, oneDNN naming each primitive
#    it runs and its implementation (on stdout, so not through the daemon, whose worker pipe
#    carries JSON lines only).
set +e
(ONEDNN_VERBOSE=1 DNNL_VERBOSE=1 as_service "$bin_dir/trainer-run" --config "$tmp/job.yaml" \
  --output-dir "$tmp/worker" > "$tmp/worker.out" 2> "$tmp/worker.err")
rc=$?
set -e
[[ $rc -eq 0 ]] || fail "trainer-run under the filter exited $rc: $(tail -5 "$tmp/worker.err")"
# oneDNN 2 (LibTorch 1.13) writes onednn_verbose,exec,...; oneDNN 3 onednn_verbose,v1,primitive,exec,...
executed='^(onednn|dnnl)_verbose,(v1,primitive,)?exec,'
jit=$(grep -E "$executed" "$tmp/worker.out" | grep -cE ',(jit|brg)[^,]*,' || true)
[[ $jit -gt 0 ]] || fail "trainer-run ran no JIT-compiled oneDNN primitive: $(head -5 "$tmp/worker.out")"
echo "ok: trainer-run ran $jit JIT-compiled oneDNN primitives under the filter"
echo "PASS: the service works inside its SystemCallFilter="
