"""The executor's share of each auth mode: a local child's environment and the Kubernetes Job
(exactly the mode's variables, secrets only by reference, the projected web identity token, the
Google credentials file from the Secret), and hostile configuration refused with the setting
named and no value echoed."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from services.execution.errors import ConfigError
from services.executors.local import executor_environment
from services.executors.pod_manifest import WEB_IDENTITY_TOKEN_PATH, build_job, job_to_dict
from services.executors.selection import job_settings
from services.settings import StudioSettings

ROLE = "arn:aws:iam::123456789012:role/studio-executor"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYHOSTSECRET"
HOST = {
    "PATH": "/usr/bin", "HOME": "/home/w", "STUDIO_DATABASE_URL": "postgresql://db/s",
    "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": SECRET,
    "AWS_ROLE_ARN": ROLE, "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/secrets/token",
    "AWS_PROFILE": "admin", "ANTHROPIC_API_KEY": "sk-ant-host", "OPENAI_API_KEY": "sk-host",
    "GEMINI_API_KEY": "gem-host", "GOOGLE_CLOUD_PROJECT": "proj-1",
    "GOOGLE_CLOUD_LOCATION": "europe-west4", "GOOGLE_APPLICATION_CREDENTIALS": "/etc/g.json",
    "AZURE_OPENAI_ENDPOINT": "https://studio.openai.azure.com", "OPENAI_API_VERSION": "2024-10-21",
    "AZURE_OPENAI_API_KEY": "az-host-key", "ANTHROPIC_VERTEX_PROJECT_ID": "proj-1",
    "CLOUD_ML_REGION": "europe-west1", "SSH_AUTH_SOCK": "/tmp/agent",
}


def local(**modes: str) -> dict[str, str]:
    source = {**HOST, **{f"STUDIO_{p.upper()}_AUTH": m for p, m in modes.items()}}
    return executor_environment(source)


def test_the_default_modes_pass_the_api_keys_and_no_cloud_variable() -> None:
    env = local()
    assert {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"} <= set(env)
    assert not {name for name in env if name.startswith(("AWS_", "GOOGLE_", "AZURE_"))}


def test_bedrock_static_passes_the_keys_and_region_only() -> None:
    env = local(claude="bedrock")
    assert env["AWS_SECRET_ACCESS_KEY"] == SECRET and env["AWS_REGION"] == "eu-west-1"
    assert "ANTHROPIC_API_KEY" not in env and "AWS_PROFILE" not in env
    assert "AWS_ROLE_ARN" not in env and "AWS_WEB_IDENTITY_TOKEN_FILE" not in env


def test_web_identity_passes_the_role_and_token_file_but_no_static_key() -> None:
    env = local(claude="bedrock_web_identity")
    assert env["AWS_ROLE_ARN"] == ROLE
    assert env["AWS_WEB_IDENTITY_TOKEN_FILE"] == "/var/run/secrets/token"
    assert "AWS_SECRET_ACCESS_KEY" not in env and "AWS_ACCESS_KEY_ID" not in env


def test_vertex_and_azure_modes_replace_the_api_keys() -> None:
    env = local(gemini="vertex", codex="azure")
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] == "/etc/g.json"
    assert env["GOOGLE_CLOUD_PROJECT"] == "proj-1" and env["AZURE_OPENAI_API_KEY"] == "az-host-key"
    assert "GEMINI_API_KEY" not in env and "OPENAI_API_KEY" not in env
    assert "SSH_AUTH_SOCK" not in env


def test_an_unknown_mode_names_its_setting() -> None:
    with pytest.raises(ConfigError, match="STUDIO_CLAUDE_AUTH: unknown auth mode"):
        local(claude="bedrock;rm -rf /")


# ---------------------------------------------------------------- the Job


def job(environment: dict[str, str], **values: Any) -> dict[str, Any]:
    settings = StudioSettings(executor="kubernetes", kube_image="studio:1",  # type: ignore[arg-type]
                              **values)
    return job_to_dict(build_job("0123456789abcdef", image="studio:1", namespace="ns",
                                 settings=job_settings(settings, environment=environment)))


def env_of(data: dict[str, Any]) -> dict[str, Any]:
    [container] = data["spec"]["template"]["spec"]["containers"]
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


def test_the_job_of_web_identity_has_the_projected_token_and_no_key() -> None:
    data = job(HOST, claude_auth="bedrock_web_identity", kube_aws_role_arn=ROLE)
    env = env_of(data)
    pod = data["spec"]["template"]["spec"]
    assert env["AWS_ROLE_ARN"] == ROLE and env["AWS_REGION"] == "eu-west-1"
    assert env["CLAUDE_CODE_USE_BEDROCK"] == "1"
    assert env["AWS_WEB_IDENTITY_TOKEN_FILE"] == WEB_IDENTITY_TOKEN_PATH
    [volume] = [v for v in pod["volumes"] if "projected" in v]
    [source] = volume["projected"]["sources"]
    assert source["serviceAccountToken"]["audience"] == "sts.amazonaws.com"
    [container] = pod["containers"]
    [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert f"{mount['mountPath']}/{source['serviceAccountToken']['path']}" == (
        WEB_IDENTITY_TOKEN_PATH) and mount["readOnly"] is True
    assert pod["automountServiceAccountToken"] is False  # the API token stays out
    assert not {"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "ANTHROPIC_API_KEY"} & set(env)
    assert SECRET not in repr(data) and "/var/run/secrets/token" not in repr(data)


def test_the_job_of_static_bedrock_reads_the_keys_from_the_secret() -> None:
    data = job(HOST, claude_auth="bedrock")
    env = env_of(data)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_BEARER_TOKEN_BEDROCK"):
        assert env[name]["secretKeyRef"] == {"name": "studio-executor-secrets", "key": name,
                                             "optional": True}
    assert SECRET not in repr(data) and "AKIAEXAMPLE" not in repr(data)
    assert not any("projected" in v for v in data["spec"]["template"]["spec"]["volumes"])


def test_the_job_of_vertex_mounts_the_credentials_file_from_the_secret() -> None:
    data = job(HOST, gemini_auth="vertex", claude_auth="vertex")
    env = env_of(data)
    pod = data["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == "studio-executor-secrets"
    [item] = volume["secret"]["items"]
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] == f"{mount['mountPath']}/{item['path']}"
    assert env["GOOGLE_CLOUD_PROJECT"] == "proj-1" and env["CLAUDE_CODE_USE_VERTEX"] == "1"
    assert "/etc/g.json" not in repr(data) and "GEMINI_API_KEY" not in env


def test_the_job_of_azure_has_the_endpoint_and_the_key_by_reference() -> None:
    env = env_of(job(HOST, codex_auth="azure"))
    assert env["AZURE_OPENAI_ENDPOINT"] == "https://studio.openai.azure.com"
    assert env["AZURE_OPENAI_API_KEY"]["secretKeyRef"]["key"] == "AZURE_OPENAI_API_KEY"
    assert "OPENAI_API_KEY" not in env


@pytest.mark.parametrize("version", ["1.31", "1.33"])
def test_every_cloud_job_validates_strictly(version: str) -> None:
    data = job(
        {**HOST, "ANTHROPIC_AWS_WORKSPACE_ID": "wrkspc_1"},
        claude_auth="anthropic_aws_web_identity", gemini_auth="vertex", codex_auth="azure",
        kube_aws_role_arn=ROLE)
    assert kubernetes_validate.validate(data, version, strict=True) == version


@pytest.mark.parametrize(("values", "environment", "named"), [
    ({"claude_auth": "bedrock"}, {"AWS_REGION": "eu-west-1\nX-Injected: 1"}, "AWS_REGION"),
    ({"claude_auth": "bedrock"}, {"AWS_REGION": ""}, "AWS_REGION"),
    ({"claude_auth": "bedrock", "kube_aws_role_arn": ROLE},
     {"ANTHROPIC_BEDROCK_BASE_URL": "http://user:pw@evil.example/"}, "ANTHROPIC_BEDROCK_BASE_URL"),
    ({"claude_auth": "bedrock_web_identity", "kube_aws_role_arn": "arn:aws:iam::1:role/x\n"},
     {}, "STUDIO_KUBE_AWS_ROLE_ARN"),
    ({"claude_auth": "bedrock_web_identity"}, {"AWS_ROLE_ARN": ""}, "STUDIO_KUBE_AWS_ROLE_ARN"),
    ({"gemini_auth": "vertex"}, {"GOOGLE_CLOUD_LOCATION": "../../etc"}, "GOOGLE_CLOUD_LOCATION"),
    ({"codex_auth": "azure"}, {"OPENAI_API_VERSION": "2024-10-21&evil=1"}, "OPENAI_API_VERSION"),
    ({"codex_auth": "azure"}, {"AZURE_OPENAI_ENDPOINT": "file:///etc/passwd"},
     "AZURE_OPENAI_ENDPOINT"),
])
def test_hostile_values_are_refused_naming_the_setting_and_echoing_nothing(
        values: dict[str, str], environment: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        job({**HOST, **environment}, **values)
    message = str(caught.value)
    assert named in message and "STUDIO_" in message
    for value in environment.values():
        assert not value or value not in message
    assert SECRET not in message


def test_the_mounted_credentials_are_outside_what_a_sandboxed_command_may_read() -> None:
    """The token and the Google credentials file live under /var/run/secrets, which neither
    sandbox exposes (bubblewrap binds, Landlock allows only the system paths listed)."""
    from pathlib import PurePosixPath

    from services.execution.sandbox.layout import readable_system_paths
    from services.executors.cloud_env import GOOGLE_CREDENTIALS_DIR

    for secret_dir in (PurePosixPath(WEB_IDENTITY_TOKEN_PATH).parent,
                       PurePosixPath(GOOGLE_CREDENTIALS_DIR)):
        for readable in readable_system_paths():
            assert not secret_dir.is_relative_to(str(readable)), (secret_dir, readable)
