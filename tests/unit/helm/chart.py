"""Rendering ``helm/studio`` the way ``helm template`` does, with Helm's own engine.

``helm-python-sdk`` embeds Helm's Go library (no helm binary): the chart is loaded, its values are
checked against ``values.schema.json`` and its templates rendered. Shared by the chart tests and
the end-to-end test that compares the Role with what the worker called.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python
import yaml

CHART = Path(__file__).resolve().parents[3] / "helm" / "studio"
PRODUCTION_VALUES = CHART / "ci" / "production-values.yaml"
RELEASE = "studio"
NAMESPACE = "studio-system"


def load_values(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def render(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every object the chart renders (install), hooks included, NOTES.txt left out."""
    chart = helm_python.Chart.load(CHART)
    try:
        rendered = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    finally:
        chart.close()
    objects: list[dict[str, Any]] = []
    for path, text in sorted(rendered.items()):
        if path.endswith(".txt"):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def notes(values: dict[str, Any] | None = None) -> str:
    chart = helm_python.Chart.load(CHART)
    try:
        rendered = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    finally:
        chart.close()
    return next(text for path, text in rendered.items() if path.endswith("NOTES.txt"))


def pod_specs(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(kind/name, pod spec)`` of every workload."""
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
            yield f"{obj['kind']}/{obj['metadata']['name']}", obj["spec"]["template"]["spec"]


def one(objects: list[dict[str, Any]], kind: str, suffix: str = "") -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, (kind, suffix, [o["metadata"]["name"] for o in found])
    return found[0]


def role_grants(objects: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """``(apiGroup, resource, verb)`` of every rule of every Role the chart renders."""
    grants: set[tuple[str, str, str]] = set()
    for role in (o for o in objects if o["kind"] in ("Role", "ClusterRole")):
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    grants.update((group, resource, verb) for verb in rule["verbs"])
    return grants


def schema_refusal(values: dict[str, Any]) -> str:
    """The schema's message refusing ``values``; asserts that rendering refuses them too."""
    chart = helm_python.Chart.load(CHART)
    try:
        try:
            chart.validate_schema(values)
        except helm_python.HelmError as refused:
            message = str(refused)
        else:
            raise AssertionError(f"the schema accepted {values!r}")
        try:
            chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
        except helm_python.HelmError:
            return message
        raise AssertionError(f"the chart rendered {values!r}")
    finally:
        chart.close()
