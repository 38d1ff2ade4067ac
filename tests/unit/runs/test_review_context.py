"""The review context (services.runs.review): the repository's ``.studio/review.md`` is read
through confinement (a symlink out of the workspace gives nothing), capped; the organization's
baseline is every ``*.md`` of the configured directory, in name order; a review target
round-trips through the request JSON."""

from __future__ import annotations

from pathlib import Path

from services.runs.review import (
    INSTRUCTIONS_CAP,
    ReviewTarget,
    baseline_instructions,
    repository_review_instructions,
)


def test_repository_instructions_are_read_through_confinement(tmp_path: Path) -> None:
    secret = tmp_path / "outside.md"
    secret.write_text("SECRET-OUTSIDE")
    workspace = tmp_path / "ws"
    (workspace / ".studio").mkdir(parents=True)
    (workspace / ".studio" / "review.md").symlink_to(secret)
    assert repository_review_instructions(workspace) == ""  # the witness: nothing from outside
    (workspace / ".studio" / "review.md").unlink()
    (workspace / ".studio" / "review.md").write_text("Check the SQL. " * 5000)
    text = repository_review_instructions(workspace)  # the control: a real file is read
    assert text.startswith("Check the SQL.") and len(text) <= INSTRUCTIONS_CAP
    (workspace / ".studio" / "review.md").unlink()
    (workspace / ".studio").rmdir()
    (workspace / ".studio").symlink_to(tmp_path)  # a directory symlink out
    (tmp_path / "review.md").write_text("SECRET-DIR")
    assert repository_review_instructions(workspace) == ""


def test_baseline_instructions_are_the_directorys_markdown_in_order(tmp_path: Path) -> None:
    assert baseline_instructions(None) == "" and baseline_instructions(tmp_path / "none") == ""
    (tmp_path / "b.md").write_text("second")
    (tmp_path / "a.md").write_text("first")
    (tmp_path / "notes.txt").write_text("ignored")
    assert baseline_instructions(tmp_path) == "first\n\nsecond"


def test_a_review_target_round_trips() -> None:
    target = ReviewTarget(7, "a" * 40, "b" * 40, [{"path": "x", "line": 1, "title": "t"}])
    assert ReviewTarget.from_stored(target.stored()) == target
