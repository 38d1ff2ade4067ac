"""Schemathesis against the published OpenAPI document of a running ``studio api``: no 5xx.

Programmatic (schemathesis' pytest plugin does not run under this pytest): the document is loaded
from the live server, and every operation is fuzzed through Hypothesis with an admin token (all
scopes), :data:`MAX_EXAMPLES` examples each in the positive and in the negative mode, so the run
stays well under a minute. The server has its own database (a module fixture), since fuzzing
flips settings and the kill switch.

The examples are derandomized (the same ones every run, until the test, Hypothesis, schemathesis
or the document changes): a random draw once ended deep enough in the stack for CPython 3.11.7
to fail Hypothesis' own ``ast.parse`` of a schemathesis lambda ("AST constructor recursion depth
mismatch", CPython issue 106905, not a server error), which made the run fail at random.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error

from tests.integration.api.server import ApiServer, running_api

MAX_EXAMPLES = 15


@pytest.fixture(scope="module")
def fuzzed_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with running_api(tmp_path_factory.mktemp("fuzz")) as server:
        yield server


def _refused_by_the_kill_switch(response: Any) -> bool:
    """503 ``killswitch_engaged``: what a route that starts work answers while the kill switch
    is engaged (a fuzzed ``PUT /api/killswitch`` may have engaged it)."""
    if response.status_code != 503:
        return False
    try:
        error = response.json().get("error") or {}
    except ValueError:
        return False
    return bool(error.get("code") == "killswitch_engaged")


def _fuzz(operation: schemathesis.APIOperation, mode: schemathesis.GenerationMode, api: ApiServer,
          seen: list[str]) -> None:
    headers = {"Authorization": f"Bearer {api.admin}"}

    @given(case=operation.as_strategy(mode))
    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    def check(case: schemathesis.Case) -> None:
        response = case.call(base_url=api.url, headers=headers, timeout=20)
        seen.append(f"{case.method} {case.path} -> {response.status_code}")
        if _refused_by_the_kill_switch(response):  # documented: the fuzzer engaged it
            return
        case.validate_response(response, checks=[not_a_server_error], headers=headers)

    try:
        check()
    except Unsatisfiable:
        # No input can break the schema of an operation without parameters (``GET /healthz``).
        assert mode is schemathesis.GenerationMode.NEGATIVE


def test_the_published_openapi_document_yields_no_server_errors(fuzzed_api: ApiServer) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzzed_api.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = {operation.label for operation in operations}
    assert {"POST /api/executions", "GET /api/executions/{execution_id}/events",
            "PUT /api/killswitch", "GET /readyz"} <= labels
    seen: list[str] = []
    for operation in operations:
        for mode in schemathesis.GenerationMode:  # valid data, then data that breaks the schema
            _fuzz(operation, mode, fuzzed_api, seen)
    assert len(seen) >= 2 * len(operations)
    assert not [line for line in fuzzed_api.log if "Traceback" in line], "".join(fuzzed_api.log)
