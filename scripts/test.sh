#!/usr/bin/env bash
# Second README command: set up, then run every check and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-browser
bash scripts/services.sh
export PATH="$PWD/.venv/bin:$PATH"
# Bytecode: the suite starts over a thousand Python processes (studio api, worker, execute, the
# CLIs, the fakes), and each compiled every project module it imported again when the
# environment forbids writing bytecode (PYTHONDONTWRITEBYTECODE, set on these machines):
# compile the project once, and let the suite's processes keep what they compile (pytest's
# rewritten test modules too). __pycache__ is git-ignored.
unset PYTHONDONTWRITEBYTECODE
python -m compileall -q -j 0 -x '/evals/builtin/tasks/' app/backend/src tests bench >/dev/null
echo "== ruff" && ruff check .
echo "== import contracts" && lint-imports

# mypy, the docs build and the confinement corpus once more under each real sandbox (issue 19)
# need no service: they run beside the suite, which waits on processes most of its time
# (docs/sphinx/testing.rst, "Where the time goes"). Not niced: on a loaded machine a niced mypy
# was starved for longer than the suite took.
# Their output is shown after the suite's; any of them failing fails the run.
beside_dir="$(mktemp -d "${TMPDIR:-/tmp}/studio-checks.XXXXXX")"
beside_names=()
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
beside() {  # beside NAME COMMAND...: run COMMAND in the background, its output kept for later
  local name="$1" slot="${#beside_names[@]}"
  shift
  beside_names+=("$name")
  { "$@" >"$beside_dir/$slot.log" 2>&1; echo $? >"$beside_dir/$slot.rc"; } &
}
# mypy's cache is kept outside the clone, shared by every checkout on this machine: a fresh
# clone then checks only what changed (about 1.5 CPU-s instead of 45). mypy validates every
# entry against its file's hash and its own version, so a stale entry is checked again; an
# empty directory (a new machine) means a full check. STUDIO_MYPY_CACHE moves it.
mypy_cache="${STUDIO_MYPY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/studio-backend/mypy}"
mkdir -p "$mypy_cache"
beside "mypy" mypy --cache-dir "$mypy_cache"
beside "docs" sphinx-build -q -W --keep-going -b html docs/sphinx docs/sphinx/_build/html
for mode in bwrap landlock; do
  beside "confinement corpus under $mode" env STUDIO_CONFINEMENT_SANDBOX="$mode" \
    pytest -q -p no:cacheprovider --basetemp "$beside_dir/corpus-$mode" \
    tests/unit/execution/test_confinement_cases.py tests/unit/execution/test_confinement_property.py
done

echo "== pytest"
# In parallel (pytest-xdist): STUDIO_TEST_WORKERS workers (docs/sphinx/testing.rst); 0 runs serially.
status=0
pytest -n "${STUDIO_TEST_WORKERS:-3}" "$@" || status=$?

wait
for slot in "${!beside_names[@]}"; do
  echo "== ${beside_names[$slot]}"
  cat "$beside_dir/$slot.log"
  rc="$(cat "$beside_dir/$slot.rc" 2>/dev/null || echo 1)"
  if [ "$rc" != 0 ]; then
    echo "== ${beside_names[$slot]} FAILED (exit $rc)"
    [ "$status" != 0 ] || status=1
  fi
done
rm -rf "$beside_dir"
exit "$status"
