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
pytest "$@"
