#!/usr/bin/env bash
# Set up a development environment from scratch: .venv/ with studio installed (dev extra included),
# and bubblewrap for the command sandbox where the system package manager allows it
# (--with-browser: also Chromium for the browser test).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v bwrap >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    echo "setup: installing bubblewrap" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap git) >&2 \
      || echo "setup: could not install bubblewrap; commands fall back to Landlock or no sandbox" >&2
  else
    echo "setup: bubblewrap not found and not installable here; see docs (sandbox modes)" >&2
  fi
fi

# Headless Chromium and its driver for the run-viewer browser test (root only, like bubblewrap);
# only with --with-browser (the test setup), not for the demo.
with_browser=0
[ "${1:-}" = "--with-browser" ] && with_browser=1
if [ "$with_browser" = 1 ] && { [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; }; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    echo "setup: installing chromium and chromium-driver" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
      chromium-driver) >&2 || echo "setup: could not install chromium" >&2
  else
    echo "setup: chromium not found and not installable here (the viewer test needs it)" >&2
  fi
fi

# The agent CLIs of the legacy runtime (codex, gemini), pinned by agent-clis/package-lock.json,
# installed into agent-clis/node_modules (Node and npm from Debian when missing).
if ! command -v npm >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    echo "setup: installing nodejs and npm" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm) >&2 \
      || echo "setup: could not install nodejs/npm; the legacy runtime lacks codex and gemini" >&2
  fi
fi
# npm ci runs in the background while pip installs (both wait mostly on the network and the
# disk; about 20 s of npm ci leave the fresh clone's critical path); awaited at the end.
npm_pid=""
if command -v npm >/dev/null 2>&1 && \
   { [ ! -f agent-clis/node_modules/.package-lock.json ] || \
     [ agent-clis/package-lock.json -nt agent-clis/node_modules/.package-lock.json ]; }; then
  { (cd agent-clis && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2) \
    || echo "setup: npm ci failed in agent-clis/; the legacy runtime lacks codex and gemini" >&2
  } &
  npm_pid=$!
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.studio-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  # (this machine's pip config names extra local indexes; their "is ignored" notes are noise)
  quiet() { grep -v "is ignored: it is neither" >&2 || true; }
  .venv/bin/python -m pip install -q --upgrade pip 2>&1 | quiet
  .venv/bin/python -m pip install -q -e ".[dev]" 2>&1 | quiet
  .venv/bin/python -c "import services" || { echo "setup: install failed" >&2; exit 1; }
  touch "$stamp"
fi
[ -z "$npm_pid" ] || wait "$npm_pid"
