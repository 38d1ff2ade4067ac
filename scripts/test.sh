#!/usr/bin/env bash
# Second README command: set up, then run every check and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-browser
bash scripts/services.sh
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff" && ruff check .
echo "== mypy" && mypy
echo "== import contracts" && lint-imports
echo "== docs" && sphinx-build -q -W --keep-going -b html docs/sphinx docs/sphinx/_build/html
echo "== pytest"
# In parallel (pytest-xdist): STUDIO_TEST_WORKERS workers (docs/sphinx/testing.rst); 0 runs serially.
pytest -n "${STUDIO_TEST_WORKERS:-3}" "$@"
# The confinement corpus and its property tests, once more under each real sandbox (issue 19).
for mode in bwrap landlock; do
  echo "== confinement corpus under $mode"
  STUDIO_CONFINEMENT_SANDBOX=$mode pytest -q tests/unit/execution/test_confinement_cases.py \
    tests/unit/execution/test_confinement_property.py
done
