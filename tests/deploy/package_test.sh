#!/usr/bin/env bash
# Builds the Debian package from a finished build folder (cpack -G DEB, as scripts/package.sh
# does), then checks it the way dpkg and systemd will see it: the control data (dependencies
# from dpkg-shlibdeps, conffiles, maintainer scripts), every file at its Debian path, the
# installed binaries running, postinst's systemd-sysusers and systemd-tmpfiles in a scratch
# root, and `systemd-analyze verify --root` of the installed unit with its real ExecStart (the
# package's trainerd binary, not a stand-in).
#
# Usage: package_test.sh BUILD_DIR SYSTEMD_ANALYZE SYSTEMD_SYSUSERS SYSTEMD_TMPFILES
set -euo pipefail

build_dir=$1
systemd_analyze=$2
systemd_sysusers=$3
systemd_tmpfiles=$4

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
for tool in "$systemd_analyze" "$systemd_sysusers" "$systemd_tmpfiles"; do
  [[ -x $tool ]] || fail "$tool not found: it is part of Debian's systemd package (scripts/install-deps.sh)"
done
command -v dpkg-deb > /dev/null || fail "dpkg-deb not found"

umask 022
tmp=$(mktemp -d "${TMPDIR:-/tmp}/trainerd-package-test-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# 1. The package.
if ! cpack --config "$build_dir/CPackConfig.cmake" -B "$tmp/out" > "$tmp/cpack.log" 2>&1; then
  cat "$tmp/cpack.log" >&2
  fail "cpack -G DEB failed"
fi
shopt -s nullglob
debs=("$tmp"/out/trainerd_*_amd64.deb)
((${#debs[@]} == 1)) || fail "expected one trainerd_<version>_amd64.deb in $tmp/out, got: $(ls "$tmp/out")"
deb=${debs[0]}
echo "package: $(basename "$deb") ($(du -h "$deb" | cut -f1))"

# 2. Control data.
info=$(dpkg-deb --info "$deb")
field() { dpkg-deb --field "$deb" "$1"; }
[[ $(field Package) == trainerd ]] || fail "Package: $(field Package)"
depends=$(field Depends)
for dependency in 'libtorch' 'libsqlite3' 'libyaml-cpp' 'libsystemd0' 'systemd'; do
  [[ $depends == *"$dependency"* ]] || fail "Depends lacks $dependency: $depends"
done
[[ $(field Recommends) == *libopenblas0-openmp* ]] || fail "Recommends: $(field Recommends)"
mkdir "$tmp/control"
dpkg-deb --control "$deb" "$tmp/control"
[[ $(cat "$tmp/control/conffiles") == $'/etc/trainerd/trainerd.yaml\n/etc/trainerd/job.yaml' ]] ||
  fail "conffiles: $(cat "$tmp/control/conffiles")"
for script in postinst prerm postrm; do
  [[ -x $tmp/control/$script ]] || fail "no executable $script maintainer script"
  sh -n "$tmp/control/$script" || fail "$script is not valid sh"
done
grep -q 'systemd-sysusers /usr/lib/sysusers.d/trainerd.conf' "$tmp/control/postinst" ||
  fail "postinst does not create the trainerd user"

# 3. Files at their Debian paths.
root=$tmp/root
dpkg-deb -x "$deb" "$root"
for binary in trainerd trainerctl trainer-run trainer-launch; do
  [[ -x $root/usr/bin/$binary ]] || fail "usr/bin/$binary missing or not executable"
done
for file in lib/systemd/system/trainerd.service usr/lib/sysusers.d/trainerd.conf \
  usr/lib/tmpfiles.d/trainerd.conf etc/trainerd/trainerd.yaml etc/trainerd/job.yaml \
  usr/share/doc/trainerd/operations.md usr/share/doc/trainerd/examples/configs/default.yaml \
  usr/share/doc/trainerd/examples/prometheus/trainerd-alerts.yml \
  usr/share/doc/trainerd/examples/grafana/dashboards/trainerd.json \
  usr/share/doc/trainerd/examples/plugin/residual_mlp.cc \
  usr/share/man/man8/trainerd.8.gz usr/share/man/man1/trainerctl.1.gz \
  usr/share/man/man1/trainer-run.1.gz usr/share/man/man1/trainer-launch.1.gz usr/share/bash-completion/completions/trainerctl; do
  [[ -f $root/$file ]] || fail "$file missing from the package"
done
grep -q '^ExecStart=/usr/bin/trainerd ' "$root/lib/systemd/system/trainerd.service" ||
  fail "the unit does not start /usr/bin/trainerd"

man -l "$root/usr/share/man/man8/trainerd.8.gz" 2> /dev/null | grep -q 'nightly LibTorch training daemon' ||
  fail "the installed trainerd(8) does not render"

# 4. The installed binaries run; the installed job parses.
"$root/usr/bin/trainerd" --version > /dev/null || fail "trainerd --version failed"
"$root/usr/bin/trainerctl" --help > /dev/null || fail "trainerctl --help failed"
"$root/usr/bin/trainer-run" --config "$root/etc/trainerd/job.yaml" --device-info > "$tmp/device.json" ||
  fail "trainer-run rejects the installed job $root/etc/trainerd/job.yaml"
grep -q '"device_info"' "$tmp/device.json" || fail "trainer-run --device-info: $(cat "$tmp/device.json")"

# 5. postinst's systemd steps in the scratch root: the user and group, then the state folder
#    owned by them.
"$systemd_sysusers" --root="$root" "$root/usr/lib/sysusers.d/trainerd.conf"
uid=$(awk -F: '$1 == "trainerd" { print $3 }' "$root/etc/passwd")
[[ -n $uid ]] || fail "systemd-sysusers created no trainerd user in $root/etc/passwd"
"$systemd_tmpfiles" --root="$root" --create "$root/usr/lib/tmpfiles.d/trainerd.conf"
[[ $(stat -c %u "$root/var/lib/trainerd") == "$uid" ]] || fail "/var/lib/trainerd is not owned by trainerd"
[[ $(stat -c %a "$root/var/lib/trainerd") == 750 ]] || fail "/var/lib/trainerd is not mode 0750"

# 6. The installed unit, unchanged, against the installed binary. The rest of a Debian system
#    the unit names (systemd's own targets, /bin/kill from procps) comes from this machine;
#    nothing of the package is overwritten (cp -n).
mkdir -p "$root/bin"
cp -n /lib/systemd/system/*.target "$root/lib/systemd/system/"
cp /bin/kill "$root/bin/kill"
# verify would look for the Documentation= man pages with this machine's man, not in the root:
# they are checked against the package's own files instead.
"$systemd_analyze" verify --man=no --root="$root" "$root/lib/systemd/system/trainerd.service" ||
  fail "systemd-analyze verify rejects the installed unit"
pages=$(grep -E '^Documentation=' "$root/lib/systemd/system/trainerd.service" |
  grep -oE 'man:[a-z-]+\([0-9]\)') || fail "the unit names no man page in Documentation="
for page in $pages; do
  name=${page#man:} name=${name%(*} section=${page##*(} section=${section%)}
  [[ -f $root/usr/share/man/man$section/$name.$section.gz ]] ||
    fail "Documentation=$page: the package has no /usr/share/man/man$section/$name.$section.gz"
done
for url in $(grep -E '^Documentation=' "$root/lib/systemd/system/trainerd.service" |
  grep -oE 'file://[^ ]+'); do
  [[ -f $root${url#file://} ]] || fail "Documentation=$url: the package has no ${url#file://}"
done
echo "ok: $(basename "$deb") installs a unit systemd would start"
