#!/usr/bin/env bash
# Installs every Debian 12 package trainerd needs to build, test and run.
# Run as root on a fresh Debian 12 machine. Idempotent.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libgloo-dev
  # Without an optimized BLAS LibTorch falls back to the reference BLAS (~30x slower fp32).
  libopenblas0-openmp
  libyaml-cpp-dev libboost-dev libsqlite3-dev libsystemd-dev zlib1g-dev
  prometheus-cpp-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # trainerctl's command line; the unit's syscall filter applied in a test (libseccomp).
  libcli11-dev libseccomp-dev
  # Tests: the run report page rendered by a real browser (headless), with the fonts its
  # screenshot is drawn in (a recommendation of chromium, which this script does not install).
  chromium fonts-liberation
  # Training corpus: real English prose nobody on this project wrote.
  base-files
  # Integration tests: promtool and a real Prometheus server; systemd-analyze.
  prometheus systemd
  # /bin/kill for the unit's ExecReload (systemd-analyze verify checks it exists).
  procps
  # The .deb (scripts/package.sh): CPack's DEB generator, dpkg-deb and dpkg-shlibdeps; man
  # renders and checks the man pages (tests/deploy/cli_docs_test.sh).
  dpkg-dev man-db
  # The daemon's schedule timezone (IANA names in /usr/share/zoneinfo), read through the
  # date library so that no thread's local-time state changes.
  tzdata libhowardhinnant-date-dev
  # scripts/install-libtorch.sh: pip downloads the pinned LibTorch 2.x wheel, unzip unpacks it.
  python3-pip unzip
  # Tests and examples/torchscript: models exported from Python by real PyTorch (1.13),
  # and .npy datasets written by numpy.
  python3-torch python3-numpy
  # scripts/fuzz.sh: clang 14 with libFuzzer and the sanitizer runtimes; clang-format.
  clang libclang-rt-14-dev clang-format
)

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps.sh: must run as root (apt-get install)" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
echo "install-deps.sh: all ${#packages[@]} packages present"
