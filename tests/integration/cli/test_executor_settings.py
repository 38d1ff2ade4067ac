"""``studio worker`` refuses a bad executor configuration at start, with a message naming the
bad value and without echoing any other input (secrets)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import warm_cli

STUDIO = [sys.executable, "-m", "services.cli"]


@pytest.mark.parametrize(("env", "named"), [
    ({"STUDIO_EXECUTOR": "k8s"}, "'k8s'"),
    ({"STUDIO_EXECUTOR": "kubernetes"}, "STUDIO_KUBE_IMAGE"),
    ({"STUDIO_EXECUTOR": "kubernetes", "STUDIO_KUBE_IMAGE": "s:1",
      "STUDIO_KUBE_TOLERATIONS": "[{oops"}, "STUDIO_KUBE_TOLERATIONS"),
    ({"STUDIO_KUBE_IMAGE_PULL_POLICY": "Sometimes"}, "'Sometimes'"),
    ({"STUDIO_KUBE_ACTIVE_DEADLINE_SECONDS": "5"}, "STUDIO_KUBE_ACTIVE_DEADLINE_SECONDS"),
])
def test_a_bad_value_stops_studio_at_start_naming_it(env: dict[str, str], named: str,
                                                      tmp_path: Path) -> None:
    done = warm_cli.run([*STUDIO, "worker", "--help"], capture_output=True, text=True,
                        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                             "STUDIO_GITHUB_TOKEN": "ghs_NeverPrinted", **env},
                        timeout=120, check=False)
    assert done.returncode == 2
    assert "invalid configuration" in done.stderr and named in done.stderr
    assert "ghs_NeverPrinted" not in done.stderr  # the error does not echo other inputs


def test_no_kubernetes_configuration_stops_the_worker_at_start(tmp_path: Path) -> None:
    done = warm_cli.run([*STUDIO, "worker"], capture_output=True, text=True, env={
        "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
        "STUDIO_BROKER_URL": "redis://127.0.0.1:1/0", "STUDIO_EXECUTOR": "kubernetes",
        "STUDIO_KUBE_IMAGE": "studio:1", "STUDIO_KUBECONFIG": str(tmp_path / "missing")},
        timeout=120, check=False)
    assert done.returncode == 2
    assert "no Kubernetes configuration" in done.stderr and "STUDIO_KUBECONFIG" in done.stderr
