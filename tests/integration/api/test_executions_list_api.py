"""The run list's query (issue 36): ``offset``, filters (status, provider, repository, kind)
and ``search`` (an id prefix or part of a branch name, as plain text: ``%`` and ``_`` are not
wildcards); malformed values are refused (422)."""

from __future__ import annotations

from typing import Any

from tests.integration.api.helpers import create, wait_final
from tests.integration.api.server import ApiServer


def _ids(api: ApiServer, **params: Any) -> list[str]:
    with api.client(api.admin) as client:
        answer = client.get("/api/executions", params={"limit": 500, **params})
    assert answer.status_code == 200, answer.text
    return [row["id"] for row in answer.json()["executions"]]


def test_filters_search_and_offset(api: ApiServer) -> None:
    first = create(api, {"turns": [{"final": "one"}]})
    second = create(api, {"turns": [{"final": {"status": "failed", "summary": "no"}}]})
    rows = {i: wait_final(api, i) for i in (first, second)}
    everything = _ids(api)
    assert {first, second} <= set(everything)
    assert _ids(api, search=second[:8]) == [second]
    assert _ids(api, search="%") == [] and _ids(api, search="_") == []
    assert _ids(api, search="'; drop table node_executions; --") == []
    branch = rows[first]["branch"]
    if branch:
        assert first in _ids(api, search=branch[-6:])
    assert second in _ids(api, status="failed") and first not in _ids(api, status="failed")
    assert set(_ids(api, provider="replay")) >= {first, second}
    assert _ids(api, provider="codex") == []
    assert set(_ids(api, repo_url=api.repo_url)) >= {first, second}
    assert _ids(api, repo_url=api.repo_url + "x") == []
    assert set(_ids(api, kind="standalone")) >= {first, second}
    assert not {first, second} & set(_ids(api, kind="node"))
    assert _ids(api, offset=1) == everything[1:]
    assert _ids(api, limit=1, offset=1) == everything[1:2]


def test_malformed_queries_are_refused(api: ApiServer) -> None:
    with api.client(api.admin) as client:
        for params in ({"kind": "other"}, {"offset": -1}, {"search": "x" * 201},
                       {"status": "<script>"}, {"search": "a\x00b"},
                       {"repo_url": "https://x/\n"}):
            answer = client.get("/api/executions", params=params)
            assert answer.status_code == 422, (params, answer.text)
            assert answer.json()["error"]["code"] == "invalid_arguments"
