"""Posting a review through PyGithub to the GitHub double: a comment on a line outside the diff
is refused with 422 as GitHub does (and nothing of that review is stored), one on a diff line is
taken; posting again for the same execution sends nothing (the review is found by its marker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.execution.errors import ToolFailure
from services.execution.review import finding_marker
from services.repos.reviews import GitHubReviews, InlineComment
from tests.integration.repo_env import TOKEN, repo_world
from tests.integration.runs.review_world import BUG_LINE, BUGGY, push_branch


def _comment(path: str, line: int) -> InlineComment:
    marker = finding_marker(path, str(line), "t")
    return InlineComment(path, line, marker, f"body {marker}")


def test_out_of_diff_lines_are_refused_and_a_repost_sends_nothing(tmp_path: Path) -> None:
    with repo_world(tmp_path) as world:
        head = push_branch(world, "feature", {"stats.py": BUGGY})
        world.api.add_pull("acme", "widgets", "feature", "main")
        github = GitHubReviews(world.api.api_url, TOKEN, "acme", "widgets")
        try:
            pull = github.pull(1)
            assert pull.head_sha == head and pull.base_ref == "main"
            assert "+    return sum(values)" in pull.patches["stats.py"]
            with pytest.raises(ToolFailure) as refused:
                github.post(execution_id="e-1", number=1, commit_sha=head, body="s",
                            event="COMMENT", comments=[_comment("calc.py", 2)])
            assert refused.value.details["status"] == 422
            assert world.api.reviews.of(1) == []  # nothing half-posted
            posted = github.post(execution_id="e-1", number=1, commit_sha=head, body="s",
                                 event="COMMENT", comments=[_comment("stats.py", BUG_LINE)])
            again = github.post(execution_id="e-1", number=1, commit_sha=head, body="s",
                                event="COMMENT", comments=[_comment("stats.py", BUG_LINE)])
        finally:
            github.close()
        assert not posted.reused and again.reused and again.review_id == posted.review_id
        assert len(world.api.reviews.of(1)) == 1 and len(world.api.reviews.comments_of(1)) == 1
        assert again.comments[0]["url"] == world.api.reviews.comments_of(1)[0]["html_url"]
