"""Provisioning a large repository: ``studio run --repo`` against a plain ``git clone``.

A repository the size of SymPy's (by default 3,000 commits for a quick run; ``--commits 60000
--files 2500 --lines 300`` for the documented one: 60,000 commits over 2,500 files) is generated
once with ``git fast-import`` and cached under ``$TMPDIR/studio-bench-provision/``, then served
over smart HTTP by the test git host (``tests/support/git_http_server.py``, ``git
http-backend``-compatible, token-guarded). In one run it measures, on the same host:

* ``git clone --depth 1`` and a full ``git clone`` of it (time and size on disk);
* ``studio run --repo URL --provider codex --no-pr`` whose scripted model (``ScriptedModelServer``)
  answers at once: the time from starting the process to its first model request, with a cold
  mirror cache (empty data dir), with a warm one (the same data dir again), and with
  ``STUDIO_REPO_MIRRORS=false`` (an executor pod: no mirror shared);
* at that first request, the workspace's size against its checkout (the files outside ``.git``);
* ``provision_workspace`` alone on the warm mirror, and on the warm mirror of a *twin*: the same
  files, the same changes per commit, ``--twin-commits`` commits (1,000) instead of
  ``--commits``: a warm path independent of the history's depth takes the same time on both;
* where one warm ``provision_workspace`` spends its time (cProfile of its steps: the mirror's
  update, the clone, the branch, the disk measure, the eviction check).

Targets (issues 12 and 35): warm-mirror time to the first model request <= 2x the shallow clone;
the workspace's own disk use at most its checkout plus 10 % (``.git`` holds an index, refs and
config; the objects stay in the mirror). The load average is printed at the start and the end.

    python bench/provision.py                     # quick: 3,000 commits
    python bench/provision.py --commits 60000 --files 2500 --lines 300   # SymPy's size (once:
                                                  # minutes on a quiet machine, more under load)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.git_http_server import GIT_ENV, git_http_server  # noqa: E402
from tests.support.github_api import github_api  # noqa: E402
from tests.support.model_requests import RequestRecord  # noqa: E402
from tests.support.model_script import Reply, text  # noqa: E402
from tests.support.model_server import ScriptedModelServer  # noqa: E402

from bench.overhead_common import API_KEY, FINAL  # noqa: E402

TOKEN = "ghs_BenchProvisionToken0123456789abcdef"
REPO = "bench/big"
LINE = 64  # hex characters per line of a generated file


def _du(path: Path) -> int:
    """Bytes on disk under ``path`` (as ``du`` counts them: blocks, hard links once)."""
    out = subprocess.run(["du", "-sb", "--", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return int(out.split()[0])


def _git(*args: str, cwd: Path | None = None, stdin: bytes | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, input=stdin, check=True, capture_output=True,
                   env={**GIT_ENV, "HOME": tempfile.gettempdir()})


def generate(bare: Path, commits: int, files: int, lines: int, changed: int, seed: int) -> None:
    """A bare repository with ``commits`` commits over ``files`` files of ``lines`` random hex
    lines; each commit rewrites ``changed`` lines of one file (``git fast-import``)."""
    rng = random.Random(seed)
    bare.parent.mkdir(parents=True, exist_ok=True)
    partial = bare.with_suffix(".partial")
    shutil.rmtree(partial, ignore_errors=True)
    _git("init", "-q", "--bare", "-b", "main", str(partial))
    tree = [[rng.randbytes(LINE // 2).hex() for _ in range(lines)] for _ in range(files)]
    proc = subprocess.Popen(["git", "fast-import", "--quiet", "--depth=50"], cwd=partial,
                            stdin=subprocess.PIPE, env={**GIT_ENV, "HOME": str(partial)})
    assert proc.stdin is not None
    write = proc.stdin.write

    def blob(content: bytes) -> None:
        write(b"data %d\n" % len(content))
        write(content)
        write(b"\n")

    stamp = 1_500_000_000
    for n in range(commits):
        author = f"Dev {n % 997} <dev{n % 997}@example.invalid> {stamp + n * 60} +0000"
        write(f"commit refs/heads/main\nauthor {author}\ncommitter {author}\n".encode())
        blob(f"change {n}\n".encode())
        if n == 0:
            for index, content in enumerate(tree):
                write(f"M 100644 inline src/f{index:05d}.txt\n".encode())
                blob(("\n".join(content) + "\n").encode())
        else:
            index = rng.randrange(files)
            content = tree[index]
            start = rng.randrange(max(1, lines - changed))
            for line in range(start, min(lines, start + changed)):
                content[line] = rng.randbytes(LINE // 2).hex()
            write(f"M 100644 inline src/f{index:05d}.txt\n".encode())
            blob(("\n".join(content) + "\n").encode())
        write(b"\n")
    proc.stdin.close()
    if proc.wait() != 0:
        raise RuntimeError("git fast-import failed")
    # fast-import deltifies a blob only against the blob written just before it (another
    # file here): a full repack finds the real deltas, as the history of a real project has.
    _git("--git-dir", str(partial), "repack", "-a", "-d", "-f", "-q", "--depth=50",
         "--window=10")
    partial.rename(bare)


def add_refs(bare: Path, tags: int, branches: int) -> None:
    """``tags`` annotated release tags spread evenly over the history (SymPy has hundreds) and
    ``branches`` maintenance branches, each at a tag (``git fast-import``: one pack, no
    rewrite of the history)."""
    found = subprocess.run(["git", "--git-dir", str(bare), "rev-list", "--first-parent",
                            "--reverse", "refs/heads/main"], capture_output=True, text=True,
                           check=True, env={**GIT_ENV, "HOME": tempfile.gettempdir()})
    commits = found.stdout.split()
    stream = []
    for n in range(tags):
        sha = commits[(n + 1) * len(commits) // (tags + 1)]
        message = f"release 1.{n}\n"
        stream.append(f"tag v1.{n}\nfrom {sha}\ntagger Release <release@example.invalid> "
                      f"{1_500_000_000 + n * 86_400} +0000\ndata {len(message)}\n{message}\n")
    for n in range(min(branches, tags)):
        sha = commits[(n * tags // max(1, branches) + 1) * len(commits) // (tags + 1)]
        stream.append(f"reset refs/heads/release-1.{n}\nfrom {sha}\n\n")
    _git("--git-dir", str(bare), "fast-import", "--quiet", stdin="".join(stream).encode())
    _git("--git-dir", str(bare), "pack-refs", "--all")


def cached_repository(args: argparse.Namespace) -> Path:
    """The generated bare repository, made once per set of parameters; with tags or branches,
    made from the one without (its pack hard-linked, not copied)."""
    name = f"c{args.commits}-f{args.files}-l{args.lines}-x{args.changed}-s{args.seed}"
    refs = getattr(args, "tags", 0), getattr(args, "branches", 0)
    if any(refs):
        plain = cached_repository(argparse.Namespace(**{**vars(args), "tags": 0, "branches": 0}))
        name += f"-t{refs[0]}-b{refs[1]}"
    cache = Path(tempfile.gettempdir()) / "studio-bench-provision" / name
    bare = cache / "git" / f"{REPO}.git"
    if not bare.is_dir():
        started = time.perf_counter()
        print(f"generating {bare} ...", file=sys.stderr)
        if any(refs):
            partial = bare.with_suffix(".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-al", str(plain / "git" / f"{REPO}.git"), str(partial)],
                           check=True)
            add_refs(partial, *refs)
            partial.rename(bare)
        else:
            generate(bare, args.commits, args.files, args.lines, args.changed, args.seed)
        print(f"  {time.perf_counter() - started:.0f} s, {_du(bare) / 1e6:.0f} MB",
              file=sys.stderr)
    return cache


@dataclass
class FirstRequest:
    """What the scripted model saw at the first request: when, and the workspace's sizes."""

    at: float = 0.0
    workspace_bytes: int = 0
    checkout_bytes: int = 0
    git_bytes: int = 0


def _measuring(workspaces: Path, seen: FirstRequest) -> object:
    def step(record: RequestRecord) -> Reply:
        seen.at = time.perf_counter()
        clones = [p for p in workspaces.rglob("repo") if (p / ".git").is_dir()]
        if clones:
            clone = clones[0]
            seen.workspace_bytes = _du(clone.parent)
            seen.git_bytes = _du(clone / ".git")
            seen.checkout_bytes = seen.workspace_bytes - seen.git_bytes
        return text(FINAL)
    return step


@dataclass
class Measured:
    label: str
    first_request_s: float
    total_s: float
    workspace_bytes: int
    checkout_bytes: int
    git_bytes: int


def studio_run(label: str, url: str, env: dict[str, str], workspaces: Path,
               profile: Path | None = None) -> Measured:
    """One ``studio run --repo`` whose model answers at once; the time to its first request."""
    seen = FirstRequest()
    shutil.rmtree(workspaces, ignore_errors=True)
    with ScriptedModelServer([_measuring(workspaces, seen)]) as server:  # type: ignore[list-item]
        run_env = {**env, "OPENAI_BASE_URL": server.url + "/v1", "OPENAI_API_KEY": API_KEY,
                   "STUDIO_WORKSPACE_DIR": str(workspaces)}
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, *(["-m", "cProfile", "-o", str(profile)] if profile else []),
             "-m", "services.cli", "run", "Answer at once.", "--repo", url,
             "--provider", "codex", "--no-pr", "--json"],
            env=run_env, capture_output=True, text=True, timeout=1800, check=False)
        total = time.perf_counter() - started
    if done.returncode != 0 or not seen.at:
        raise RuntimeError(f"studio run ({label}) failed: {done.stderr[-2000:]}")
    return Measured(label, seen.at - started, total, seen.workspace_bytes, seen.checkout_bytes,
                    seen.git_bytes)


def provision_only(url: str, work: Path, label: str = "provision_workspace, warm",
                   profile: Path | None = None) -> Measured:
    """``provision_workspace`` alone, in this process, on the warm mirror of ``work/data``
    (``profile``: under cProfile, its statistics written there)."""
    import cProfile

    from tests.support.settings import studio_settings

    from services.repos.workspaces import cleanup, provision_workspace

    settings = studio_settings(work / "data", workspace_dir=work / "ws-inproc",
                               repo_allowed_hosts=["127.0.0.1"])
    profiler = cProfile.Profile() if profile else None
    started = time.perf_counter()
    if profiler:
        profiler.enable()
    ws = provision_workspace(f"bench-{time.monotonic_ns()}", url, base_branch=None,
                             git_auth=None, settings=settings, slug="bench")
    if profiler:
        profiler.disable()
        profiler.dump_stats(str(profile))
    took = time.perf_counter() - started
    size, git = _du(ws.root), _du(ws.path / ".git")
    cleanup(ws)
    return Measured(label, took, took, size, size - git, git)


STEPS = (("the mirror's update (head, fetch)", "mirrors.py", "_update"),
         ("the clone from the mirror", "workspaces.py", "_clone"),
         ("the branch and identity", "workspaces.py", "_start_branch"),
         ("the disk measure", "disk_use.py", "measure"),
         ("the eviction check", "mirrors.py", "evict"),
         ("provision_workspace", "workspaces.py", "provision_workspace"))


def print_steps(profile: Path) -> None:
    """Cumulative seconds of each step of one profiled warm ``provision_workspace``."""
    import pstats

    stats = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    print("one warm provision_workspace, by step (cumulative s; the clone includes the update):")
    for label, filename, function in STEPS:
        found = [v[3] for (path, _line, name), v in stats.items()
                 if path.endswith(filename) and name == function]
        print(f"  {label:36} {sum(found):6.3f}")


def load_average() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def git_clone(label: str, url: str, dest: Path, *extra: str) -> Measured:
    shutil.rmtree(dest, ignore_errors=True)
    started = time.perf_counter()
    _git("clone", "-q", *extra, url, str(dest))
    took = time.perf_counter() - started
    size, git = _du(dest), _du(dest / ".git")
    return Measured(label, took, took, size, size - git, git)


@contextlib.contextmanager
def _host(cache: Path) -> Iterator[tuple[str, str, str]]:
    with git_http_server(cache / "git", TOKEN, anonymous_reads=True) as host, \
            github_api(cache / "git", TOKEN) as api:
        yield host.url(REPO), host.base_url, api.api_url


def _median(runs: list[Measured]) -> Measured:
    return sorted(runs, key=lambda m: m.first_request_s)[len(runs) // 2]


def _print_profile(measured: Measured, path: Path) -> None:
    import pstats

    print(f"profiled warm run: first request after {measured.first_request_s:.2f} s "
          f"(cProfile slows it)")
    stats = pstats.Stats(str(path))
    stats.sort_stats("cumulative").print_stats(r"services/|subprocess.py.*communicate", 40)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=3000)
    parser.add_argument("--files", type=int, default=1500)
    parser.add_argument("--lines", type=int, default=400, help="lines (64 hex chars) per file")
    parser.add_argument("--changed", type=int, default=40, help="lines rewritten per commit")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--warm-runs", type=int, default=3,
                        help="warm-mirror runs and shallow clones (medians)")
    parser.add_argument("--tags", type=int, default=0,
                        help="annotated tags spread over the history (SymPy: hundreds)")
    parser.add_argument("--branches", type=int, default=0, help="branches besides main")
    parser.add_argument("--twin-commits", type=int, default=1000,
                        help="commits of the shallow-history twin (0: none)")
    parser.add_argument("--profile", action="store_true",
                        help="also profile one warm-mirror run (cProfile) and print where it "
                             "spends its time until the model's answer")
    args = parser.parse_args(argv)
    cache = cached_repository(args)
    twin_cache = (cached_repository(argparse.Namespace(**{**vars(args),
                                                          "commits": args.twin_commits}))
                  if args.twin_commits else None)
    print(f"start: {load_average()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="studio-bench-provision-") as tmp, \
            _host(cache) as (url, base_url, api_url), \
            contextlib.ExitStack() as stack:
        twin_url = stack.enter_context(_host(twin_cache))[0] if twin_cache else None
        work = Path(tmp)
        (work / "home").mkdir()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("STUDIO_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))}
        env.update(HOME=str(work / "home"), STUDIO_DATABASE_URL=f"sqlite:///{work / 'db'}",
                   STUDIO_DATA_DIR=str(work / "data"), STUDIO_GITHUB_TOKEN=TOKEN,
                   STUDIO_GITHUB_API_URL=api_url, STUDIO_GITHUB_GIT_ORIGINS=base_url,
                   STUDIO_REPO_ALLOWED_HOSTS="127.0.0.1", STUDIO_SANDBOX="none")
        full = git_clone("git clone (full)", url, work / "full")
        shutil.rmtree(work / "full")
        cold = studio_run("studio run, cold mirror", url, env, work / "ws")
        shallows: list[Measured] = []
        warms: list[Measured] = []
        provisions: list[Measured] = []
        twins: list[Measured] = []
        twin_label = f"  same, {args.twin_commits} commits"
        if twin_url:
            provision_only(twin_url, work)  # its mirror, made cold
        for _ in range(args.warm_runs):  # interleaved: each set sees the same load
            shallows.append(git_clone("git clone --depth 1", url, work / "shallow", "--depth",
                                      "1"))
            warms.append(studio_run("studio run, warm mirror", url, env, work / "ws"))
            provisions.append(provision_only(url, work))
            if twin_url:
                twins.append(provision_only(twin_url, work, twin_label))
        shutil.rmtree(work / "shallow")
        results = [_median(shallows), full, cold, _median(warms), _median(provisions)]
        if twins:
            results.append(_median(twins))
        results.append(studio_run("studio run, no mirror (pod)", url,
                                  {**env, "STUDIO_REPO_MIRRORS": "false"}, work / "ws"))
        mirror_bytes = max(_du(m) for m in (work / "data" / "mirrors").glob("*.git"))
        provision_only(url, work, profile=work / "provision.prof")
        print_steps(work / "provision.prof")
        if args.profile:
            _print_profile(studio_run("profiled", url, env, work / "ws", work / "run.prof"),
                           work / "run.prof")
    print(f"repository: {args.commits} commits, {args.files} files, {args.tags} tags, "
          f"{args.branches} more branches, "
          f"{_du(cache / 'git') / 1e6:.0f} MB packed on the host; "
          f"mirror {mirror_bytes / 1e6:.0f} MB")
    print(f"{'':32} {'first request s':>16} {'total s':>8} {'workspace MB':>13} "
          f"{'checkout MB':>12} {'.git MB':>8}")
    for m in results:
        print(f"{m.label:32} {m.first_request_s:16.2f} {m.total_s:8.2f} "
              f"{m.workspace_bytes / 1e6:13.1f} {m.checkout_bytes / 1e6:12.1f} "
              f"{m.git_bytes / 1e6:8.1f}")
    shallow_s = results[0].first_request_s
    warm_m = results[3]
    print(f"warm mirror / shallow clone: {warm_m.first_request_s / shallow_s:.2f}x (target <= 2x);"
          f" provisioning alone: {results[4].first_request_s / shallow_s:.2f}x")
    if twins:
        print(f"warm provisioning, {args.commits} / {args.twin_commits} commits: "
              f"{results[4].first_request_s / results[5].first_request_s:.2f}x "
              f"(independent of the depth: about 1x)")
    own = warm_m.workspace_bytes / warm_m.checkout_bytes
    print(f"warm workspace - checkout: {(warm_m.workspace_bytes - warm_m.checkout_bytes) / 1e6:.1f}"
          f" MB, {own:.3f}x its checkout (target <= 1.10x; .git: index, refs, config)")
    print(f"end: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
