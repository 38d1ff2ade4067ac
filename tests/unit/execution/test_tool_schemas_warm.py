"""The default tools' argument schemas: made once per process, warmed by the fork server.

Each tool's argument model defers building itself to its first use (``defer_build``); a forked
``studio execute`` that built them and their JSON Schemas itself copied about 3 MB of its fork
server's pages (:doc:`benchmarks`, issue 39). The fork server's warm-up now builds them once
(:func:`services.execution.tool_domains.registry.warm_schemas`), and every caller gets its own
copy of the cached schema.
"""

from __future__ import annotations

import json
import subprocess
import sys

from services.execution.tool_domains.registry import default_registry

# what a process holds after importing the registry (and, with ``warm``, the fork server's
# warm-up): for each default tool, whether its argument model is built, and whether its schema
# is in the cache
PROBE = """
import json, sys
from services.execution.tool_domains.registry import default_registry
from services.execution.tool_domains.spec import model_schema
if sys.argv[1] == "warm":
    from services.cli.fork_server import warm_up
    warm_up()
specs = default_registry().specs()
print(json.dumps({"built": [s.args_model.__pydantic_complete__ for s in specs],
                  "cached": model_schema.cache_info().currsize}))
"""


def probe(mode: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_fork_servers_warm_up_builds_every_default_tools_schema() -> None:
    """Fails on main (the warm-up left the models deferred and made no schema). The control: a
    process that only imported the registry has built none of them."""
    specs = default_registry().specs()
    cold = probe("cold")
    assert cold == {"built": [False] * len(specs), "cached": 0}
    warm = probe("warm")
    assert warm["built"] == [True] * len(specs)
    assert warm["cached"] == len({spec.args_model for spec in specs})


def test_each_caller_gets_its_own_copy_of_a_schema() -> None:
    """The cache is never handed out: a caller that changes its schema changes no other's."""
    spec = default_registry().specs()[0]
    first = spec.neutral_schema()
    expected = json.loads(json.dumps(first))
    first["properties"]["changed"] = {"type": "string"}
    first["required"] = ["changed"]
    second = spec.neutral_schema()
    assert second == expected
    assert second is not first
    assert second["additionalProperties"] is False
