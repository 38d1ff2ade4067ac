"""The sandbox supervisor is a light process: one runs per running execution (issue 39).

It imports C modules and a few small ones only (no ``json``, ``re``, ``subprocess``, ``shutil``,
``socket``, ``signal``, ``enum``, ``typing``, ``contextlib``, ``threading``): those took its
memory from about 3.6 MB to 6.2 MB of PSS. What it parsed with them it parses on its own, so
its two parsers are checked against the modules they replace: ``_loads`` against ``json.loads``
(for what the harness sends: ``json.dumps``), ``_unescape`` against the regular expression it
replaced (``/proc/self/mountinfo``'s octal escapes). Its behaviour inside a sandbox is
``tests/integration/execution/test_sandbox_session.py``'s.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.execution.sandbox import supervisor
from services.execution.sandbox.layout import sandbox_python

HEAVY = ("json", "re", "subprocess", "shutil", "socket", "signal", "enum", "typing",
         "contextlib", "threading", "selectors", "collections", "functools")


def test_the_supervisor_imports_only_light_modules() -> None:
    """Its modules as it runs (``python -I -S``, the script's text executed as a module)."""
    probe = ("import sys\n"
             f"source = open({str(Path(supervisor.__file__))!r}).read()\n"
             "exec(compile(source, 'supervisor', 'exec'), {'__name__': 'supervisor'})\n"
             "print(' '.join(sorted(sys.modules)))\n")
    loaded = set(subprocess.run([sandbox_python(), "-I", "-S", "-c", probe], check=True,
                                capture_output=True, text=True).stdout.split())
    assert {"_json", "_socket", "_signal", "select", "os"} <= loaded  # positive control
    assert sorted(loaded.intersection(HEAVY)) == []


REQUESTS = st.fixed_dictionaries({
    "argv": st.lists(st.text(), min_size=1, max_size=5),
    "env": st.dictionaries(st.text(), st.text(), max_size=5),
    "cwd": st.text(),
})


@given(REQUESTS)
def test_requests_read_as_json_loads_reads_them(request: dict[str, object]) -> None:
    sent = json.dumps(request).encode()
    assert supervisor._loads(sent) == json.loads(sent) == request


@given(st.dictionaries(st.text(), st.one_of(st.none(), st.booleans(), st.integers(),
                                            st.floats(allow_nan=False), st.text())))
def test_any_object_reads_as_json_loads_reads_it(value: dict[str, object]) -> None:
    sent = json.dumps(value, ensure_ascii=False).encode()
    assert supervisor._loads(sent) == json.loads(sent)


def test_constants_and_whitespace_as_json_loads() -> None:
    read = supervisor._loads(b' {"a": NaN, "b": Infinity, "c": -Infinity}\n')
    assert math.isnan(read["a"]) and read["b"] == math.inf and read["c"] == -math.inf  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [b"", b"[]", b'"op"', b'{"op": "run"} x', b'{"op": ', b"{'a': 1}"])
def test_what_is_not_one_json_object_is_refused(text: bytes) -> None:
    with pytest.raises(ValueError):
        supervisor._loads(text)


def _regex_unescape(field: bytes) -> bytes:
    """What the supervisor did before (``re.sub``)."""
    return re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field)


@pytest.mark.parametrize("field", [
    b"/tmp/work", rb"/tmp/with\040space", rb"/tmp/tab\011and\012newline", rb"/a\134b",
    rb"\\101", rb"/trailing\\", rb"/short\04", rb"\0400", rb"/x\08", b"",
])
def test_mountinfo_escapes_as_the_regular_expression(field: bytes) -> None:
    assert supervisor._unescape(field) == _regex_unescape(field)


@given(st.lists(st.sampled_from([b"\\", b"0", b"1", b"3", b"7", b"8", b"a", b"/", b" "]),
                max_size=24).map(b"".join))
def test_mountinfo_escapes_fuzzed(field: bytes) -> None:
    try:
        expected = _regex_unescape(field)
    except ValueError:  # an escape past \377: both refuse it
        with pytest.raises(ValueError):
            supervisor._unescape(field)
        return
    assert supervisor._unescape(field) == expected
