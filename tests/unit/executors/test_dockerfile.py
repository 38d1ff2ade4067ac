"""The executor image's Dockerfile (no Docker engine here: its instructions are checked as text)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|DATABASE_URL", re.IGNORECASE)


def instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs, continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "a continuation line ends the file"
    pairs = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        pairs.append((keyword.upper(), rest.strip()))
    return pairs


def env_names(arguments: str) -> list[str]:
    return re.findall(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=", arguments)


@pytest.fixture(scope="module")
def steps() -> list[tuple[str, str]]:
    return instructions(DOCKERFILE.read_text())


def test_base_image_is_python_311_slim(steps: list[tuple[str, str]]) -> None:
    froms = [args for keyword, args in steps if keyword == "FROM"]
    assert froms == ["python:3.11-slim"]


def test_git_and_bubblewrap_are_installed(steps: list[tuple[str, str]]) -> None:
    runs = " ".join(args for keyword, args in steps if keyword == "RUN")
    install = re.search(r"apt-get install[^&]*", runs)
    assert install is not None
    packages = install.group(0).split()
    assert {"git", "bubblewrap"} <= set(packages)


def test_runs_as_user_10001_with_its_home(steps: list[tuple[str, str]]) -> None:
    users = [args for keyword, args in steps if keyword == "USER"]
    assert users and users[-1].split(":")[0] == "10001"
    last_user = max(i for i, (keyword, _) in enumerate(steps) if keyword == "USER")
    assert not [args for keyword, args in steps[last_user:] if keyword == "RUN"]
    runs = " ".join(args for keyword, args in steps if keyword == "RUN")
    assert re.search(r"useradd .*--uid 10001 .*--home-dir /home/studio", runs)
    env = " ".join(args for keyword, args in steps if keyword == "ENV")
    assert "HOME=/home/studio" in env.split()


def test_installs_the_project_and_enters_studio(steps: list[tuple[str, str]]) -> None:
    runs = [args for keyword, args in steps if keyword == "RUN"]
    assert any(re.search(r"\bpip install \.(\s|$)", args) for args in runs)
    (entrypoint,) = [args for keyword, args in steps if keyword == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["studio"]
    copied = " ".join(args for keyword, args in steps if keyword == "COPY")
    for needed in ("pyproject.toml", "README.md", "app", "migrations"):
        assert needed in copied.split(), needed
        assert (ROOT / needed).exists(), needed


def test_no_secret_is_baked_in(steps: list[tuple[str, str]]) -> None:
    for keyword, args in steps:
        if keyword in ("ENV", "ARG"):
            names = env_names(args) if keyword == "ENV" else [args.split("=")[0]]
            assert not [name for name in names if SECRET_NAME.search(name)], (keyword, args)
        if keyword in ("COPY", "ADD"):
            assert ".env" not in args and "secret" not in args.lower(), args
    assert ".env" in (ROOT / ".dockerignore").read_text().split()


def test_the_parser_sees_what_it_checks() -> None:
    """The checks above can fail: a Dockerfile with a baked-in key and a root user is caught."""
    bad = instructions("FROM python:3.11-slim\nENV A=1 \\\n    OPENAI_API_KEY=sk-x\nUSER root\n")
    env = [args for keyword, args in bad if keyword == "ENV"]
    assert env_names(env[0]) == ["A", "OPENAI_API_KEY"]
    assert [args for keyword, args in bad if keyword == "USER"] == ["root"]


def test_the_agent_clis_are_installed_from_the_lockfile(steps: list[tuple[str, str]]) -> None:
    """The legacy runtime's codex and gemini CLIs: npm ci from agent-clis/package-lock.json,
    found through STUDIO_LEGACY_CLI_DIR."""
    copies = [args for keyword, args in steps if keyword == "COPY"]
    assert "agent-clis/package.json agent-clis/package-lock.json ./agent-clis/" in copies
    runs = " ".join(args for keyword, args in steps if keyword == "RUN")
    assert "npm ci" in runs and "nodejs" in runs
    envs = " ".join(args for keyword, args in steps if keyword == "ENV")
    assert "STUDIO_LEGACY_CLI_DIR=/opt/studio/agent-clis/node_modules/.bin" in envs
    assert (ROOT / "agent-clis" / "package-lock.json").is_file()
