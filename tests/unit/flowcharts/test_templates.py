"""Every template rendering error is one ``TemplateRenderError``; values are quoted for a shell."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from services.flowcharts.templates import TemplateRenderError, render_template


@pytest.mark.parametrize("source", [
    "{{ 1/0 }}", "{{ 1 + 'a' }}", "{{ range(100001) }}", "{{ 'a' * 10**7 }}",
    "{{ [0] * 10**7 }}", "{{ 10 ** (10 ** 10) }}", "{{ '%s %s' % (1,) }}",
    "{% for i in range(1000) %}{{ 'x' * 2000 }}{% endfor %}", "{{ ''.__class__ }}",
    "{{ missing }}", "{{ inputs.x.y.z }}",
])
def test_every_rendering_error_is_a_template_error_naming_the_node(source: str) -> None:
    with pytest.raises(TemplateRenderError, match=r"^node 'n': template error: "):
        render_template("n", source, {"inputs": {"x": 1}})


def test_what_stays_small_renders() -> None:
    assert render_template("n", "{{ 'ab' * 3 }} {{ 2 ** 10 }} {{ [1] * 2 }}", {}) == \
        "ababab 1024 [1, 1]"


@pytest.mark.parametrize("value", ["plain", "x'; touch pwned; echo '", "$(id)", "a\nb", "", "`x`"])
def test_shell_quote_keeps_a_value_one_word(value: str) -> None:
    rendered = render_template("n", "printf %s {{ v | shell_quote }}", {"v": value})
    assert shlex.split(rendered) == ["printf", "%s", value]
    assert subprocess.run(["/bin/sh", "-c", rendered], capture_output=True, text=True,
                          check=True).stdout == value
