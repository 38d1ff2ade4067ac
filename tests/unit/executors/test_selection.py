"""``STUDIO_EXECUTOR`` and the ``STUDIO_KUBE_*`` settings: validated at start with a message that
names the bad value, turned into the Job's knobs, and into a client configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from services.execution.errors import ConfigError
from services.executors.kubernetes import KubernetesSubstrate
from services.executors.local import LocalSubstrate
from services.executors.pod_manifest import build_job, job_to_dict
from services.executors.selection import (
    build_substrate,
    forwarded_environment,
    job_settings,
    kube_api_client,
)
from services.settings import ExecutorKind, StudioSettings


def _kube(**values: object) -> StudioSettings:
    return StudioSettings(executor="kubernetes", kube_image="studio:1", **values)  # type: ignore[arg-type]


def test_local_is_the_default() -> None:
    settings = StudioSettings()
    assert settings.executor is ExecutorKind.LOCAL
    assert isinstance(build_substrate(settings, {"PATH": "/bin"}), LocalSubstrate)


def test_json_and_list_settings_parse() -> None:
    settings = _kube(kube_node_selector='{"pool": "executors"}',
                     kube_tolerations='[{"key": "k", "operator": "Exists"}]',
                     kube_image_pull_secrets="a, b")
    assert settings.kube_node_selector == {"pool": "executors"}
    assert settings.kube_tolerations == [{"key": "k", "operator": "Exists"}]
    assert settings.kube_image_pull_secrets == ["a", "b"]
    with pytest.raises(ValidationError):
        _kube(kube_node_selector='["not", "an", "object"]')


def test_the_job_follows_the_settings() -> None:
    settings = _kube(kube_service_account="exec-sa", kube_secret_name="exec-secrets",
                     kube_image_pull_secrets="regcred", kube_cpu_limit="3",
                     kube_node_selector='{"pool": "x"}', kube_active_deadline_seconds=900,
                     github_git_origins="https://git.example.com", log_level="INFO")
    job = job_to_dict(build_job("0123456789abcdef", image="studio:1", namespace="ns",
                                settings=job_settings(settings)))
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["serviceAccountName"] == "exec-sa"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["nodeSelector"] == {"pool": "x"}
    assert container["resources"]["limits"]["cpu"] == "3"
    assert job["spec"]["activeDeadlineSeconds"] == 900
    refs = {v["name"]: v["valueFrom"]["secretKeyRef"]["name"] for v in container["env"]
            if "valueFrom" in v}
    assert set(refs.values()) == {"exec-secrets"} and "STUDIO_GITHUB_TOKEN" in refs
    plain = {v["name"]: v["value"] for v in container["env"] if "value" in v}
    assert plain["STUDIO_GITHUB_GIT_ORIGINS"] == "https://git.example.com"
    assert plain["STUDIO_LOG_LEVEL"] == "INFO"


def test_the_token_stays_out_of_a_pod_whose_repository_is_not_the_integrations() -> None:
    settings = _kube(github_token=SecretStr("ghs_x"))
    names = {secret.name for secret in job_settings(settings, github_token=False).secret_env}
    assert "STUDIO_GITHUB_TOKEN" not in names and "STUDIO_DATABASE_URL" in names


def test_only_non_secret_settings_are_forwarded() -> None:
    settings = _kube(github_token=SecretStr("ghs_forwarded?"), secret_key=SecretStr("k"),
                     database_url=SecretStr("postgresql://u:p@db/x"))
    forwarded = forwarded_environment(settings)
    assert not [v for v in forwarded.values() if "ghs_" in v or "u:p@" in v]
    assert "STUDIO_GITHUB_API_URL" in forwarded


def test_price_overrides_reach_the_executor_pod_as_json_the_pod_reads_back() -> None:
    assert "STUDIO_MODEL_PRICES" not in forwarded_environment(_kube())  # none configured
    prices = '{"gpt-5.1": {"input": 1.5, "output": 8, "cached_input": 0.1}}'
    forwarded = forwarded_environment(_kube(model_prices=prices))
    again = StudioSettings(model_prices=forwarded["STUDIO_MODEL_PRICES"])
    assert again.model_prices == {"gpt-5.1": {"input": 1.5, "output": 8.0, "cached_input": 0.1}}


def _pod_env(settings: StudioSettings) -> dict[str, str]:
    job = job_to_dict(build_job("0123456789abcdef", image="studio:1", namespace="ns",
                                settings=job_settings(settings)))
    container = job["spec"]["template"]["spec"]["containers"][0]
    return {v["name"]: v["value"] for v in container["env"] if "value" in v}


def test_the_approval_timeout_reaches_the_executor_pod_which_reads_it_back() -> None:
    """An approval pending inside the pod (services.runs.approvals) times out after the
    worker's STUDIO_APPROVAL_TIMEOUT_S, not the default."""
    env = _pod_env(_kube(approval_timeout_s="3600"))
    assert env["STUDIO_APPROVAL_TIMEOUT_S"] == "3600.0"
    assert StudioSettings(approval_timeout_s=env["STUDIO_APPROVAL_TIMEOUT_S"]).approval_timeout_s \
        == 3600.0
    # unset: the pod gets the worker's own (the default), the same value either way
    default = _pod_env(_kube())["STUDIO_APPROVAL_TIMEOUT_S"]
    assert float(default) == StudioSettings().approval_timeout_s


def test_the_setup_settings_reach_the_pod_an_empty_allowlist_included() -> None:
    env = _pod_env(_kube(setup_allowlist="10.1.2.3:3141, .corp.example", setup_timeout_s="60"))
    assert env["STUDIO_SETUP_ALLOWLIST"] == "10.1.2.3:3141,.corp.example"
    assert env["STUDIO_SETUP_TIMEOUT_S"] == "60.0"
    # "no host" is not "the default hosts": the empty list reaches the pod as such
    empty = _pod_env(_kube(setup_allowlist=""))
    assert empty["STUDIO_SETUP_ALLOWLIST"] == ""
    assert StudioSettings(setup_allowlist=empty["STUDIO_SETUP_ALLOWLIST"]).setup_allowlist == []
    # an empty list whose default is empty too stays out, as before
    assert "STUDIO_GITHUB_GIT_ORIGINS" not in _pod_env(_kube())


def test_a_kubeconfig_that_is_not_there_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        kube_api_client(_kube(kubeconfig=tmp_path / "missing"))
    assert "STUDIO_KUBECONFIG" in caught.value.message


def test_the_kubeconfig_is_used(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
        "    server: http://127.0.0.1:9\nusers:\n- name: u\n  user: {token: t}\n"
        "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n")
    settings = _kube(kubeconfig=config, kube_namespace="team-a")
    substrate = build_substrate(settings, {})
    assert isinstance(substrate, KubernetesSubstrate)
    assert kube_api_client(settings).configuration.host == "http://127.0.0.1:9"
    handle_namespace = substrate.manifest("0123456789abcdef").metadata.namespace
    assert handle_namespace == "team-a"
