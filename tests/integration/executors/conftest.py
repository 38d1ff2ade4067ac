"""Substrate test fixtures: the Kubernetes API double and a real client configured for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from services.executors.kubernetes import KubernetesSubstrate
from services.executors.pod_manifest import JobSettings
from tests.support.kube_api import KubeApiServer

NAMESPACE = "studio-exec"
IMAGE = "registry.example.com/studio/executor:1.0.0"


@pytest.fixture
def kube_api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server


def batch_api_for(host: str) -> client.BatchV1Api:
    configuration = client.Configuration(host=host)
    configuration.proxy = None  # straight to 127.0.0.1, whatever the environment says
    return client.BatchV1Api(client.ApiClient(configuration))


@pytest.fixture
def batch_api(kube_api: KubeApiServer) -> Iterator[client.BatchV1Api]:
    api = batch_api_for(kube_api.url)
    yield api
    api.api_client.close()


@pytest.fixture
def substrate(batch_api: client.BatchV1Api) -> KubernetesSubstrate:
    return KubernetesSubstrate(batch_api, NAMESPACE, IMAGE, JobSettings())
