#!/usr/bin/env bash
# scripts/sim-regimes end to end on tiny runs (--quick: 8 jobs, one seed): every study runs on
# tellus-sim and the page has each study's section and a verdict line per comparison.
# Usage: sim_regimes_test.sh TELLUS_SIM REPO_ROOT
set -euo pipefail
sim=$1
root=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A 12-job trace in the SWIM format (name, submit s, gap s, map input, shuffle and output bytes):
# the shared FB-2009 trace is not part of the repository.
for i in $(seq 0 11); do
  printf 'job%d\t%d\t30\t%d\t%d\t1000000\n' "$i" $((i * 30)) $((200000000 + i * 50000000)) $((i * 20000000))
done >"$work/trace.tsv"
TELLUS_TRACE="$work/trace.tsv" /usr/bin/python3 "$root/scripts/sim-regimes" --quick --sim "$sim" --out "$work/raw" \
  --doc "$work/regimes.md" --parallel 2
sections=$(grep -c '^## ' "$work/regimes.md")
# placement and houtu: 2 workloads x 2 comparisons each; order: 3 workloads x 2
verdicts=$(grep -c '^- .*: [0-9]* / [0-9]* / [0-9]*$' "$work/regimes.md")
if [ "$sections" != 3 ] || [ "$verdicts" != 14 ]; then
  echo "sim_regimes_test: expected 3 studies and 14 verdict lines, got $sections and $verdicts:" >&2
  cat "$work/regimes.md" >&2
  exit 1
fi
echo "sim_regimes_test: 3 studies, 14 verdict lines"
