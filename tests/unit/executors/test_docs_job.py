"""The Job printed in docs/sphinx/executors.rst is the one the builder makes."""

from __future__ import annotations

from pathlib import Path

import yaml

from services.executors.pod_manifest import JobSettings, build_job, job_to_dict

PAGE = Path(__file__).resolve().parents[3] / "docs" / "sphinx" / "executors.rst"


def yaml_block(text: str) -> str:
    lines = text.splitlines()
    start = lines.index(".. code-block:: yaml") + 1
    block: list[str] = []
    for line in lines[start:]:
        if line and not line.startswith("   "):
            break
        block.append(line[3:])
    return "\n".join(block)


def test_documented_job_matches_the_builder() -> None:
    documented = yaml.safe_load(yaml_block(PAGE.read_text()))
    built = build_job(
        "0f3c2a1e-1111-4222-8333-444455556666",
        image="registry.example.com/studio/executor:1.0.0",
        namespace="studio",
        settings=JobSettings(),
    )
    assert documented == job_to_dict(built)
