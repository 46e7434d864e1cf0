#!/usr/bin/env bash
# Checks the Prometheus files in deploy/prometheus with promtool.
#
# Usage: prometheus_test.sh config|rules|rule-tests SOURCE_DIR PROMTOOL
#   config      promtool check config prometheus.yml (also checks the rule file it loads)
#   rules       promtool check rules trainerd-alerts.yml
#   rule-tests  promtool test rules trainerd-alerts.test.yml (each alert fires and does not)
# The promtool path comes from CMake's find_program; a missing promtool is a failure.
set -euo pipefail

mode=$1
dir=$2/deploy/prometheus
promtool=$3

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

[[ -x $promtool ]] ||
  fail "promtool not found (CMake found '$promtool'). It is part of Debian's prometheus" \
    "package: run scripts/install-deps.sh, then re-run cmake."

# Run from elsewhere: relative paths inside the files must resolve against the files' own
# directory, as they will when installed.
cd "${TMPDIR:-/tmp}"
case $mode in
  config) "$promtool" check config "$dir/prometheus.yml" ;;
  rules) "$promtool" check rules "$dir/trainerd-alerts.yml" ;;
  rule-tests) "$promtool" test rules "$dir/trainerd-alerts.test.yml" ;;
  *) fail "unknown mode '$mode' (config, rules or rule-tests)" ;;
esac
