"""``studio review --repo URL --pr N``: the review is run in the process and posted once; bad
values (a pull request number that is not one, a head that is not a sha, no GitHub token) exit
2 with a clear message and record nothing."""

from __future__ import annotations

import json
from pathlib import Path

from services.db.executions import ExecutionRepository
from tests.integration.repo_env import last_json, repo_world, studio
from tests.integration.runs.review_world import (
    BUG_LINE,
    BUGGY,
    final,
    finding,
    push_branch,
    review_json,
    script,
    write_file,
)


def test_studio_review_posts_one_review_and_refuses_bad_values(tmp_path: Path) -> None:
    with repo_world(tmp_path) as world:
        push_branch(world, "feature", {"stats.py": BUGGY})
        world.api.add_pull("acme", "widgets", "feature", "main")
        turns = write_file(tmp_path / "review.json",
                           json.dumps(script(final(review_json(finding())))))
        env = world.env(tmp_path / "ws")
        done = studio(env, "review", "--repo", world.url, "--pr", "1", "--provider", "replay",
                      "--script", str(turns), "--json")
        assert done.returncode == 0, done.stderr
        assert last_json(done.stdout)["execution_status"] == "succeeded"
        assert "finalize review: request_changes posted http" in done.stderr
        assert [(c["path"], c["line"]) for c in world.api.reviews.comments_of(1)] == [
            ("stats.py", BUG_LINE)]

        no_token = {k: v for k, v in env.items() if k != "STUDIO_GITHUB_TOKEN"}
        for args, env_used, message in [
            (["--pr", "0"], env, "--pr"),
            (["--pr", "1; echo pwned"], env, "--pr"),
            (["--pr", "1", "--head-sha", "$(id)"], env, "40 lowercase hex"),
            (["--pr", "1"], no_token, "needs a GitHub token"),
        ]:
            refused = studio(env_used, "review", "--repo", world.url, "--provider", "replay",
                             "--script", str(turns), *args)
            assert refused.returncode == 2, (args, refused.stdout, refused.stderr)
            assert message in refused.stderr, refused.stderr
            assert "pwned" not in refused.stdout
        db = world.database()
        assert len(ExecutionRepository(db).list(limit=50)) == 1
        db.dispose()
        assert len(world.api.reviews.of(1)) == 1
