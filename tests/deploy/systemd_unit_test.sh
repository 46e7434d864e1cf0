#!/usr/bin/env bash
# Checks deploy/trainerd.service and deploy/trainerd.sysusers.conf with systemd's own tools.
#
# Usage: systemd_unit_test.sh verify|security|sysusers SOURCE_DIR SYSTEMD_ANALYZE SYSTEMD_SYSUSERS
#   verify    the unit's required settings, then `systemd-analyze verify` on it
#   security  `systemd-analyze security --offline` keeps the exposure at most 1.5
#   sysusers  `systemd-sysusers --dry-run` accepts the sysusers.d file
# The tool paths come from CMake's find_program; a missing tool is a failure, not a skip.
set -euo pipefail

mode=$1
source_dir=$2
systemd_analyze=$3
systemd_sysusers=$4
unit=$source_dir/deploy/trainerd.service
sysusers=$source_dir/deploy/trainerd.sysusers.conf

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

require_tool() {  # PATH NAME
  [[ -x $1 ]] ||
    fail "$2 not found (CMake found '$1'). It is part of Debian's systemd package: run" \
      "scripts/install-deps.sh, then re-run cmake."
}

# Unit files must not be world-writable or executable or systemd warns about them.
umask 022
tmp=$(mktemp -d "${TMPDIR:-/tmp}/trainerd-deploy-test-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# A copy of the unit that systemd-analyze can check on this machine: /usr/bin/trainerd is not
# installed here, and verify fails on any Exec*= binary that does not exist. Only the
# executable changes; every other line stays as it is.
make_checkable_copy() {
  local true_bin
  true_bin=$(type -P true) || fail "no 'true' executable in PATH"
  sed -E "s|^ExecStart=/usr/bin/trainerd |ExecStart=$true_bin |" "$unit" >"$tmp/trainerd.service"
  # /bin/kill comes from procps, which minimal containers lack; any systemd host has it.
  if [[ ! -x /bin/kill ]]; then
    echo "note: /bin/kill is missing here (package procps); checking ExecReload with $true_bin"
    sed -i -E "s|^ExecReload=/bin/kill |ExecReload=$true_bin |" "$tmp/trainerd.service"
  fi
  local changed
  changed=$(diff "$unit" "$tmp/trainerd.service" | grep -c '^>' || true)
  [[ $(wc -l <"$unit") -eq $(wc -l <"$tmp/trainerd.service") ]] ||
    fail "the checkable copy lost or gained lines"
  [[ $changed -ge 1 && $changed -le 2 ]] ||
    fail "expected the ExecStart line (and at most ExecReload) to change, $changed lines did"
}

# Fails unless the unit has a line matching the extended regex $1 (whole line).
require_line() {
  grep -Eqx -- "$1" "$unit" || fail "deploy/trainerd.service has no line matching '$1'"
}

case $mode in
  verify)
    require_tool "$systemd_analyze" systemd-analyze
    require_line 'Type=notify'
    require_line 'NotifyAccess=main'
    require_line 'ExecStart=/usr/bin/trainerd --config /etc/trainerd/trainerd.yaml --state-dir /var/lib/trainerd'
    require_line 'ExecReload=/bin/kill -HUP \$MAINPID'
    require_line 'WatchdogSec=[1-9][0-9]*(s|min)?'
    require_line 'Restart=on-failure'
    require_line 'OOMPolicy=continue'
    require_line 'KillMode=mixed'
    require_line 'TimeoutStopSec=[1-9][0-9]*(s|min)?'
    require_line 'StateDirectory=trainerd'
    require_line 'RuntimeDirectory=trainerd'
    require_line 'ConfigurationDirectory=trainerd'
    require_line 'User=trainerd'
    require_line 'ProtectSystem=strict'
    require_line 'UMask=0007'
    require_line 'CacheDirectory=trainerd'
    require_line 'Environment=XDG_CACHE_HOME=/var/cache'
    require_line 'Documentation=man:trainerd\(8\) .*'
    require_line 'Documentation=file:///usr/share/doc/trainerd/operations.md'
    require_line 'ProtectClock=yes'
    require_line 'ProtectProc=invisible'
    require_line 'SystemCallFilter=@system-service'
    require_line 'SystemCallFilter=~@privileged'
    # Control-socket peers outside a user namespace would all be the overflow uid; the run
    # records read /proc/cpuinfo and /proc/meminfo.
    for setting in PrivateUsers ProcSubset; do
      if grep -Eq "^[[:space:]]*$setting[[:space:]]*=" "$unit"; then
        fail "deploy/trainerd.service sets $setting=, which breaks trainerd (see the unit's comments)"
      fi
    done
    # oneDNN JIT-compiles kernels into writable+executable memory.
    if grep -Eq '^[[:space:]]*MemoryDenyWriteExecute[[:space:]]*=' "$unit"; then
      fail "deploy/trainerd.service sets MemoryDenyWriteExecute, which breaks oneDNN's JIT"
    fi

    make_checkable_copy
    set +e
    output=$("$systemd_analyze" verify --man=no "$tmp/trainerd.service" 2>&1)
    rc=$?
    set -e
    [[ -n $output ]] && printf '%s\n' "$output"
    [[ $rc -eq 0 ]] || fail "systemd-analyze verify exited with $rc"
    # Warnings about other units of this machine (containers have odd ones) are not ours.
    if grep -q 'trainerd\.service' <<<"$output"; then
      fail "systemd-analyze verify reported problems with trainerd.service (above)"
    fi
    echo "PASS: systemd-analyze verify accepts trainerd.service"
    ;;
  security)
    require_tool "$systemd_analyze" systemd-analyze
    make_checkable_copy
    # Exposure is 0.0 (locked down) to 10.0 (unprotected); the unit is at 1.4 today (3.3
    # before the syscall filter and ProtectProc). The threshold catches hardening lines being
    # dropped: without the syscall filter the unit rates 2.8.
    set +e
    output=$("$systemd_analyze" security --offline=yes --threshold=15 --no-pager \
      "$tmp/trainerd.service" 2>&1)
    rc=$?
    set -e
    grep -E 'Overall exposure' <<<"$output" || true
    if [[ $rc -ne 0 ]]; then
      printf '%s\n' "$output"
      fail "systemd-analyze security: exposure above 1.5 or error (exit $rc)"
    fi
    echo "PASS: exposure of trainerd.service is at most 1.5"
    ;;
  sysusers)
    require_tool "$systemd_sysusers" systemd-sysusers
    mkdir "$tmp/root"
    set +e
    output=$("$systemd_sysusers" --dry-run --root="$tmp/root" "$sysusers" 2>&1)
    rc=$?
    set -e
    printf '%s\n' "$output"
    [[ $rc -eq 0 ]] || fail "systemd-sysusers rejected deploy/trainerd.sysusers.conf (exit $rc)"
    grep -q "Creating user 'trainerd'" <<<"$output" ||
      fail "deploy/trainerd.sysusers.conf does not create user trainerd"
    grep -q "Creating group 'trainerd'" <<<"$output" ||
      fail "deploy/trainerd.sysusers.conf does not create group trainerd"
    echo "PASS: systemd-sysusers accepts trainerd.sysusers.conf"
    ;;
  *)
    fail "unknown mode '$mode' (verify, security or sysusers)"
    ;;
esac
