#!/usr/bin/env bash
# The command-line documentation that ships in the package, checked against the binaries it
# documents:
#   man         each man page renders without a warning (man --warnings), and every --option
#               that the binary's --help lists is in its page
#   completion  the bash completion offers every trainerctl command its --help lists, and
#               each command's own options
# Usage: cli_docs_test.sh man|completion SOURCE_DIR BIN_DIR
set -euo pipefail

mode=$1
source_dir=$2
bin_dir=$3

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# The --options in the --help of `binary`.
help_options() { "$bin_dir/$1" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u; }
# The commands in trainerctl's --help (the indented words of its "commands:" section).
trainerctl_commands() {
  "$bin_dir/trainerctl" --help | awk '/^commands:/ { on = 1; next } /^[^ ]/ { on = 0 }
    on && /^  [a-z]/ { print $1 }' | sort -u
}

case $mode in
  man)
    command -v man > /dev/null || fail "man not found (Debian package man-db)"
    for page in trainerd.8 trainerctl.1 trainer-run.1 trainer-launch.1; do
      file=$source_dir/docs/man/$page
      [[ -f $file ]] || fail "$file missing"
      warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$file" 2>&1 > /dev/null)
      [[ -z $warnings ]] || fail "$page: $warnings"
      text=$(LC_ALL=C.UTF-8 MANWIDTH=200 man -E UTF-8 -l "$file" 2> /dev/null)
      binary=${page%.*}
      while read -r option; do
        grep -qE -- "(^|[^a-z-])$option([^a-z-]|\$)" <<< "$text" ||
          fail "$page does not document $option ($binary --help has it)"
      done < <(help_options "$binary")
    done
    echo "ok: four man pages, no warnings, every --help option documented"
    ;;
  completion)
    # shellcheck source=/dev/null
    source "$source_dir/deploy/bash-completion/trainerctl"
    complete_words() {  # WORDS...: what completing the last word offers
      COMP_WORDS=("$@")
      COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
      COMPREPLY=()
      _trainerctl
      printf '%s\n' "${COMPREPLY[@]}"
    }
    offered=$(complete_words trainerctl "")
    while read -r command; do
      grep -qx -- "$command" <<< "$offered" || fail "completion does not offer '$command'"
    done < <(trainerctl_commands)
    [[ -n $(trainerctl_commands) ]] || fail "found no commands in trainerctl --help"
    for option in --config --state-dir --socket --json; do
      grep -qx -- "$option" <<< "$offered" || fail "completion does not offer $option"
    done
    [[ $(complete_words trainerctl ru | sort) == $'run-now\nruns' ]] ||
      fail "'ru' completes to $(complete_words trainerctl ru)"
    [[ $(complete_words trainerctl --state-dir /tmp rollback --) == $'--to\n--model\n--release' ]] ||
      fail "rollback options: $(complete_words trainerctl --state-dir /tmp rollback --)"
    [[ $(complete_words trainerctl runs --) == --limit ]] || fail "runs options"
    [[ $(complete_words trainerctl report 1 --) == --output ]] || fail "report options"
    [[ $(complete_words trainerctl --state-dir "$source_dir/dep") == "$source_dir/deploy" ]] ||
      fail "--state-dir does not complete folders"
    echo "ok: every trainerctl command and option completes"
    ;;
  *)
    fail "unknown mode $mode (man or completion)"
    ;;
esac
