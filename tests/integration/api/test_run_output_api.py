"""``GET /api/executions/{id}/output`` (issue 36, defect 3): the whole recorded stdout or
stderr of a ``command.run`` call, as text, a download; what is not a command's output, an
unknown call and a malformed call id are refused; hostile output comes back as bytes of text,
never as HTML."""

from __future__ import annotations

from tests.integration.api.browser import HOSTILE
from tests.integration.api.helpers import create, wait_final
from tests.integration.api.server import ApiServer


def test_the_recorded_output_of_a_command_call(api: ApiServer) -> None:
    script = {"turns": [
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": "a.txt", "content": "a\n"}}]},
        {"tool_calls": [{"tool": "command.run", "args": {
            "argv": ["sh", "-c", 'echo "$0"; echo err >&2', HOSTILE], "timeout_s": 60}}]},
        {"final": "done"}]}
    execution_id = create(api, script)
    wait_final(api, execution_id)
    with api.client(api.admin) as client:
        calls = client.get(f"/api/executions/{execution_id}/tool-calls").json()["tool_calls"]
        write, command = calls[0]["call_id"], calls[1]["call_id"]
        path = f"/api/executions/{execution_id}/output"
        out = client.get(path, params={"call_id": command})
        assert out.status_code == 200
        assert out.text == HOSTILE + "\n"
        assert out.headers["content-type"] == "text/plain; charset=utf-8"
        assert out.headers["content-disposition"].startswith("attachment;")
        assert out.headers["x-content-type-options"] == "nosniff"
        err = client.get(path, params={"call_id": command, "stream": "stderr"})
        assert err.text == "err\n"
        for params in ({"call_id": write}, {"call_id": "nope"}, {}):
            missing = client.get(path, params=params)
            assert missing.status_code == 404, params
            assert missing.json()["error"]["code"] == "not_found"
        for params in ({"call_id": "../../etc/passwd"}, {"call_id": command, "stream": "env"},
                       {"call_id": "x" * 201}):
            assert client.get(path, params=params).status_code == 422, params
