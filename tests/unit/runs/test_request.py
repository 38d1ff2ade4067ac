"""One request type for every execution: exactly one of a repository and a directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.execution.errors import ConfigError, ErrorCode
from services.runs.request import ExecutionRequest


@pytest.mark.parametrize("where", [{}, {"repo_url": "https://example.com/o/r.git",
                                        "workspace": Path("/tmp")}])
def test_a_request_names_exactly_one_place(where: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as refused:
        ExecutionRequest(provider="replay", prompt="p", **where)  # type: ignore[arg-type]
    assert refused.value.code is ErrorCode.CONFIG_ERROR
    assert "exactly one" in refused.value.message


def test_the_budget_is_kept_per_repository_or_per_directory(tmp_path: Path) -> None:
    repo = ExecutionRequest(provider="replay", prompt="p", repo_url="https://example.com/o/r")
    here = ExecutionRequest(provider="replay", prompt="p", workspace=tmp_path / "." / "w")
    assert repo.budget_key == "https://example.com/o/r"
    assert here.budget_key == str((tmp_path / "w").resolve())


def test_the_stored_request_holds_what_the_columns_do_not() -> None:
    stored = ExecutionRequest(provider="replay", prompt="Fix the build",
                              repo_url="https://example.com/o/r", pull_request=False).stored()
    assert stored["pull_request"] is False
    assert stored["slug"]
    assert not {"provider", "prompt", "repo_url", "workspace", "model"} & stored.keys()
