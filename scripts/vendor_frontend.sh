#!/usr/bin/env bash
# Rebuild the vendored front-end files from frontend/package-lock.json (pinned versions with
# integrity hashes) and check them against frontend/VENDORED.sha256.
#
#   bash scripts/vendor_frontend.sh          # check: the committed files are what the lockfile gives
#   bash scripts/vendor_frontend.sh --write  # copy them in (after changing package.json + lock)
#
# The committed files are what the pages and tests use: nothing is fetched at setup or run time,
# and the pages work with no internet (no CDN).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$root/frontend/package.json" "$root/frontend/package-lock.json" "$work/"
(cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --silent)
static="$root/app/backend/src/services/api/static/vendor"
tests="$root/tests/support/vendor"
declare -A files=(
  ["$work/node_modules/@dagrejs/dagre/dist/dagre.min.js"]="$static/dagre.min.js"
  ["$work/node_modules/@dagrejs/dagre/LICENSE"]="$static/LICENSE-dagre.txt"
  ["$work/node_modules/@dagrejs/graphlib/LICENSE"]="$static/LICENSE-graphlib.txt"
  ["$work/node_modules/axe-core/axe.min.js"]="$tests/axe.min.js"
  ["$work/node_modules/axe-core/LICENSE"]="$tests/LICENSE-axe-core.txt"
)
status=0
for source in "${!files[@]}"; do
  target="${files[$source]}"
  if [[ "${1:-}" == "--write" ]]; then
    cp "$source" "$target"
  elif ! cmp -s "$source" "$target"; then
    echo "differs from the lockfile's build: ${target#"$root"/}" >&2
    status=1
  fi
done
if [[ "${1:-}" == "--write" ]]; then
  (cd "$root" && sha256sum app/backend/src/services/api/static/vendor/* tests/support/vendor/* \
    > frontend/VENDORED.sha256)
fi
(cd "$root" && sha256sum --quiet -c frontend/VENDORED.sha256) || status=1
exit $status
