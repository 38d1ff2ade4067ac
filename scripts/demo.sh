#!/usr/bin/env bash
# First README command: set up, then run the main job on the embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/studio demo "$@"
