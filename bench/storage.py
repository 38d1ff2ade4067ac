"""Bytes an execution leaves in the database, as a user runs it (``studio run --repo``, replay).

Run from the repository root (about half a minute on 2 cores)::

    .venv/bin/python -m bench.storage
    .venv/bin/python bench/storage.py --postgres postgresql://postgres@127.0.0.1:5432/test

Two executions, each the real ``studio run --repo <local repository> --no-pr --provider replay``
in a subprocess, each into a fresh SQLite database (and, with ``--postgres``, a fresh PostgreSQL
database created next to the one named, dropped afterwards):

- ``rewrite``: a repository holding a 480 KB source file (this project's own Python sources, so
  it compresses as real code does); the agent writes the whole file 20 times, each version with
  a few lines changed (20 distinct 480 KB contents), then finishes;
- ``rewrite-all``: the same, but every line of the file changes in every version (20 wholly
  different contents, and a checkpoint that is the whole file removed and added again);
- ``typical``: 50 steps of a usual run (small file writes, ``cat`` of a file, file reads), then
  a final answer.

Measured for each: the bytes the database grew by (SQLite: the file after a WAL checkpoint and
``VACUUM``, against the same database before the run; PostgreSQL: the growth of the database as
``pg_database_size`` reports it after ``VACUUM FULL``: without it, the space of the deleted
checkpoints, reusable but not given back, counts too), the payload per table (the stored column
values, what ``length()`` gives: JSON as text, blobs as stored) and, as the baseline of the same
run, the bytes of content the agent wrote. Target: the ``rewrite`` execution stores under 5 MB.
Results go to ``bench/results/storage.json`` (git-ignored); the exit status is 0 whatever the
numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "storage.json"
STUDIO = Path(sys.executable).with_name("studio")
SOURCES = ROOT / "app" / "backend" / "src" / "services"
BIG_FILE = "module.py"
FILE_BYTES = 480 * 1024
REWRITES = 20
TYPICAL_STEPS = 50
TARGET_BYTES = 5_000_000
TABLES = ("node_executions", "execution_events", "tool_calls", "workspace_checkpoints",
          "content_blobs")
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}


@dataclass(frozen=True)
class Measured:
    case: str
    database: str
    written_bytes: int
    stored_bytes: int
    tables: dict[str, int]

    @property
    def ratio(self) -> float:
        return self.stored_bytes / self.written_bytes if self.written_bytes else 0.0


def source_text(size: int) -> str:
    """``size`` bytes of real Python source (this project's own), in a stable order."""
    chunks: list[str] = []
    total = 0
    for path in sorted(SOURCES.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        chunks.append(text)
        total += len(text.encode())
        if total >= size:
            break
    return "".join(chunks).encode()[:size].decode("utf-8", "ignore")


def version(base: str, n: int) -> str:
    """The file's ``n``-th rewrite: every 400th line changed (a rename, as an agent's edit)."""
    lines = base.splitlines(keepends=True)
    for index in range(n % 400, len(lines), 400):
        lines[index] = f"# revision {n}, line {index}\n"
    return "".join(lines)


def version_all_lines(base: str, n: int) -> str:
    """The file's ``n``-th rewrite with every line changed (a reformatting, say)."""
    return "".join(f"{line.rstrip(chr(10))}  # v{n}\n" for line in base.splitlines())


def rewrite_script(base: str, every_line: bool = False) -> tuple[dict[str, Any], int]:
    make = version_all_lines if every_line else version
    contents = [make(base, n + 1) for n in range(REWRITES)]
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": BIG_FILE, "content": text}}]} for text in contents]
    turns.append({"final": json.dumps({"status": "success", "summary": "rewritten"})})
    return {"turns": turns}, sum(len(text.encode()) for text in contents)


def typical_script(steps: int = TYPICAL_STEPS) -> tuple[dict[str, Any], int]:
    """``steps`` turns of a usual run (write a small file, ``cat`` it, read it), then a final
    answer; and the bytes of content written."""
    turns: list[dict[str, Any]] = []
    written = 0
    for step in range(steps):
        name = f"notes/step_{step // 3}.md"
        if step % 3 == 0:
            content = "".join(f"- item {step}.{i}: some notes on what was found\n"
                              for i in range(40))
            written += len(content.encode())
            call = {"tool": "workspace.write_file", "args": {"path": name, "content": content}}
        elif step % 3 == 1:
            call = {"tool": "command.run", "args": {"argv": ["cat", name]}}
        else:
            call = {"tool": "workspace.read_file", "args": {"path": name}}
        turns.append({"tool_calls": [call]})
    turns.append({"final": json.dumps({"status": "success", "summary": "done"})})
    return {"turns": turns}, written


def make_repository(root: Path, base: str) -> Path:
    work, bare = root / "seed", root / "origin.git"
    work.mkdir(parents=True)
    (work / BIG_FILE).write_text(base)
    (work / "README.md").write_text("bench repository\n")
    env = {**os.environ, **GIT_ENV}
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "seed"]):
        subprocess.run(["git", *argv], cwd=work, env=env, check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], env=env, check=True)
    return bare


def studio_env(root: Path, database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    env.update(STUDIO_DATABASE_URL=database_url, STUDIO_DATA_DIR=str(root / "data"),
               STUDIO_WORKSPACE_DIR=str(root / "workspaces"), STUDIO_SANDBOX="none",
               HOME=str(root), **GIT_ENV)
    return env


def run_case(root: Path, repo: Path, script: dict[str, Any], database_url: str,
             steps: int) -> None:
    script_path = root / f"script-{uuid.uuid4().hex[:8]}.json"
    script_path.write_text(json.dumps(script))
    env = studio_env(root, database_url)
    subprocess.run([str(STUDIO), "db", "upgrade"], env=env, check=True, capture_output=True)
    proc = subprocess.run(
        [str(STUDIO), "run", "--repo", str(repo), "--no-pr", "--provider", "replay",
         "--script", str(script_path), "--max-iterations", str(steps + 5), "--json",
         "bench storage"], env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"studio run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")


def sqlite_size(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
    return path.stat().st_size


def sqlite_tables(path: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    with sqlite3.connect(path) as conn:
        for table in TABLES:
            columns = [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]
            total = " + ".join(f'coalesce(length(CAST("{c}" AS BLOB)), 0)' for c in columns)
            found[table] = int(conn.execute(f'SELECT coalesce(sum({total}), 0) FROM "{table}"')
                               .fetchone()[0])
    return found


def measure_sqlite(case: str, root: Path, repo: Path, script: dict[str, Any],
                   written: int, steps: int) -> Measured:
    path = root / f"{case}.db"
    url = f"sqlite:///{path}"
    subprocess.run([str(STUDIO), "db", "upgrade"], env=studio_env(root, url), check=True,
                   capture_output=True)
    before = sqlite_size(path)
    run_case(root, repo, script, url, steps)
    return Measured(case, "sqlite", written, sqlite_size(path) - before, sqlite_tables(path))


def measure_postgres(case: str, root: Path, repo: Path, script: dict[str, Any], written: int,
                     steps: int, admin: str) -> Measured:
    import psycopg

    name = f"studio_bench_storage_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = admin.rsplit("/", 1)[0] + f"/{name}"
    try:
        subprocess.run([str(STUDIO), "db", "upgrade"], env=studio_env(root, url), check=True,
                       capture_output=True)

        def size() -> int:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM FULL")  # dead rows (deleted checkpoints) out, as SQLite's
                row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
                return int(row[0]) if row else 0

        before = size()
        run_case(root, repo, script, url, steps)
        stored = size() - before
        with psycopg.connect(url) as conn:
            tables = {t: int((conn.execute(
                f'SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM "{t}" t').fetchone()
                or (0,))[0]) for t in TABLES}
        return Measured(case, "postgresql", written, stored, tables)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def print_table(results: list[Measured]) -> None:
    print(f"{'case':<12}{'database':<12}{'written':>12}{'stored':>12}{'ratio':>8}  per table")
    for m in results:
        tables = ", ".join(f"{k}={v / 1e6:.2f}" for k, v in m.tables.items())
        print(f"{m.case:<12}{m.database:<12}{m.written_bytes / 1e6:>10.2f}MB"
              f"{m.stored_bytes / 1e6:>10.2f}MB{m.ratio:>8.2f}  {tables} (MB)")
    for m in results:
        if m.case.startswith("rewrite"):
            verdict = "met" if m.stored_bytes < TARGET_BYTES else "MISSED"
            print(f"target: {m.case} on {m.database} under {TARGET_BYTES / 1e6:.0f} MB: {verdict}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--postgres", help="an admin URL (database `test`) to create one on")
    args = parser.parse_args(argv)
    base = source_text(FILE_BYTES)
    cases = {"rewrite": (*rewrite_script(base), REWRITES),
             "rewrite-all": (*rewrite_script(base, every_line=True), REWRITES),
             "typical": (*typical_script(), TYPICAL_STEPS)}
    results: list[Measured] = []
    with tempfile.TemporaryDirectory(prefix="studio-bench-storage-") as tmp:
        root = Path(tmp)
        repo = make_repository(root / "repo", base)
        for case, (script, written, steps) in cases.items():
            results.append(measure_sqlite(case, root, repo, script, written, steps))
            if args.postgres:
                results.append(measure_postgres(case, root, repo, script, written, steps,
                                                args.postgres))
    print_table(results)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps([{**asdict(m), "ratio": m.ratio} for m in results], indent=2))


if __name__ == "__main__":
    main()
