#!/usr/bin/env bash
# `tellus completion bash` (argument: the tellus binary): the script loads, registers a
# completion for `tellus`, and completes commands, a command's options and the shell name.
set -euo pipefail
tellus=$1
fail() { echo "FAIL: $*" >&2; exit 1; }

script=$("$tellus" completion bash) || fail "tellus completion bash exited $?"
# Parsed as a whole first: a syntax error would otherwise only stop at the first broken line.
bash -n <<<"$script" || fail "the completion script is not valid bash"
source <(printf '%s\n' "$script")
registered=$(complete -p tellus) || fail "no completion registered for tellus"
[[ $registered == *"-F _tellus"* ]] || fail "unexpected registration: $registered"

# complete WORDS...: what _tellus offers for the last word.
complete_words() {
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  _tellus
  echo "${COMPREPLY[*]}"
}
got=$(complete_words tellus su)
[[ $got == "submit" ]] || fail "tellus su -> '$got'"
got=$(complete_words tellus lo)
[[ $got == "logs" ]] || fail "tellus lo -> '$got'"
got=$(complete_words tellus logs job-1 --f)
[[ $got == "--follow" ]] || fail "tellus logs job-1 --f -> '$got'"
got=$(complete_words tellus --master 127.0.0.1:1 status job-1 --wa)
[[ $got == "--watch" ]] || fail "tellus --master X status job-1 --wa -> '$got'"
got=$(complete_words tellus completion b)
[[ $got == "bash" ]] || fail "tellus completion b -> '$got'"
echo "completion ok: $registered"
