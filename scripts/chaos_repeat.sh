#!/usr/bin/env bash
# Run the chaos tests N times in a row (default 10) and report each run: passed or failed, its
# seed, how long it took and the load average when it ended. Meant to run while the machine is
# loaded (the parallel suite, other suites), the way CI sees it; docs/sphinx/testing.rst.
#
#   bash scripts/chaos_repeat.sh [N] [pytest arguments...]
#
# Each run's whole output is kept in $CHAOS_LOGS (default a new directory under /tmp); the exit
# status is 0 only when all N passed. Every run goes on after a failure, so the report counts them.
set -uo pipefail
cd "$(dirname "$0")/.."
runs="${1:-10}"
shift $(( $# > 0 ? 1 : 0 ))
case "$runs" in ''|*[!0-9]*|0) echo "usage: $0 [N >= 1] [pytest arguments...]" >&2; exit 2;; esac
export CI="${CI:-true}"
logs="${CHAOS_LOGS:-$(mktemp -d /tmp/chaos-repeat.XXXXXX)}"
mkdir -p "$logs"
tests=(tests/integration/test_chaos.py tests/integration/worker/test_chaos.py)
passed=0
for i in $(seq 1 "$runs"); do
  log="$logs/run-$i.log"
  start=$(date +%s)
  # -rA: the report of passed tests too, for the seed and the fault table each test prints.
  .venv/bin/pytest -n 0 -q -rA -p no:cacheprovider "${tests[@]}" "$@" >"$log" 2>&1
  status=$?
  took=$(( $(date +%s) - start ))
  seed=$(grep -m1 -oE 'chaos seed: [0-9]+' "$log" | cut -d' ' -f3)
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  if [ "$status" = 0 ]; then verdict=passed; passed=$((passed + 1)); else verdict=FAILED; fi
  echo "run $i/$runs: $verdict in ${took}s, seed ${seed:-?}, load $load ($(tail -n1 "$log"))"
done
echo "chaos_repeat: $passed of $runs passed; logs in $logs"
[ "$passed" = "$runs" ]
