"""Issue 9's rule in the Kubernetes executor: a pod gets the GitHub token only when its
execution's repository is on one of the integration's git origins (the local child filters per
git operation instead)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from services.db.redaction import Redactor
from services.db.session import open_database
from services.executors.pod_manifest import build_job, job_to_dict
from services.executors.selection import job_settings
from services.runs.request import ExecutionRequest, create_execution
from services.settings import StudioSettings
from services.worker.child import _on_integration_origin


@pytest.mark.parametrize(("repo_url", "gets_token"), [
    ("http://127.0.0.1:8181/acme/widgets.git", True),
    ("http://127.0.0.1:9191/elsewhere/widgets.git", False),
])
def test_the_pod_gets_the_token_only_for_an_integration_origin(
        tmp_path: Path, repo_url: str, gets_token: bool) -> None:
    settings = StudioSettings(database_url=SecretStr(f"sqlite:///{tmp_path / 'studio.db'}"),
                              github_token=SecretStr("ghs_RuleToken"),
                              github_git_origins=["http://127.0.0.1:8181"],
                              repo_allowed_hosts=["127.0.0.1"], data_dir=tmp_path / "data",
                              executor="kubernetes", kube_image="studio:1")  # type: ignore[arg-type]
    db = open_database(settings)
    try:
        execution_id = create_execution(db, ExecutionRequest(
            provider="replay", prompt="p", repo_url=repo_url, pull_request=False,
            script={"turns": []}), Redactor(), settings=settings)
    finally:
        db.dispose()
    allowed = _on_integration_origin(settings, execution_id)
    assert allowed is gets_token
    job = job_to_dict(build_job(execution_id, image="studio:1", namespace="ns",
                                settings=job_settings(settings, github_token=allowed)))
    names = {v["name"] for v in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert ("STUDIO_GITHUB_TOKEN" in names) is gets_token
    assert "STUDIO_DATABASE_URL" in names
    assert "ghs_RuleToken" not in str(job)
