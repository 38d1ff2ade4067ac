"""The structured review (services.execution.review): validation, the approve setting, the
diff's commentable lines, findings moved out of the diff, and the finding markers."""

from __future__ import annotations

import json

import pytest

from services.execution.review import (
    Review,
    ReviewInvalid,
    comment_body,
    commentable_lines,
    finding_marker,
    marker_of,
    parse_review,
    place_findings,
)

PATCH = """@@ -1,3 +1,4 @@
 import os
-x = 1
+x = 2
+y = 3
 z = 4
@@ -10,2 +11,2 @@ def f():
-    return 1
+    return 2
 # end
\\ No newline at end of file
"""
GOOD = {"summary": "ok", "verdict": "comment", "findings": [
    {"path": "a.py", "line": 2, "severity": "major", "title": "x changed", "body": "why"}]}


def test_commentable_lines_are_the_new_side_of_each_hunk() -> None:
    assert commentable_lines(PATCH) == {1, 2, 3, 4, 11, 12}
    assert commentable_lines("") == set()


@pytest.mark.parametrize("text", [
    json.dumps(GOOD), f"Here it is:\n```json\n{json.dumps(GOOD)}\n```", f"x {json.dumps(GOOD)} y"])
def test_a_review_validates_from_its_final_answer(text: str) -> None:
    review = parse_review(text, allow_approve=False)
    assert review.verdict.value == "comment" and review.findings[0].line == 2


@pytest.mark.parametrize(("data", "problem"), [
    ("no json here", "no JSON object"),
    ({"summary": "", "verdict": "comment"}, "summary"),
    ({"summary": "s", "verdict": "lgtm"}, "verdict"),
    ({"summary": "s", "verdict": "comment", "findings": [{"path": "a", "line": 0,
      "severity": "major", "title": "t", "body": "b"}]}, "findings.0.line"),
    ({"summary": "s", "verdict": "comment", "findings": [{"path": "a", "line": 1,
      "severity": "fatal", "title": "t", "body": "b"}]}, "severity"),
    ({"summary": "s", "verdict": "comment", "status": "success"}, "status"),
    ({"summary": "s", "verdict": "approve"}, "not allowed"),
])
def test_a_malformed_review_is_review_invalid(data: object, problem: str) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    with pytest.raises(ReviewInvalid) as raised:
        parse_review(text, allow_approve=False)
    assert raised.value.code.value == "review_invalid" and problem in raised.value.message


def test_approve_needs_the_deployment_setting() -> None:
    text = json.dumps({"summary": "s", "verdict": "approve"})
    assert parse_review(text, allow_approve=True).verdict.value == "approve"


def test_findings_outside_the_diff_move_into_the_summary() -> None:
    review = Review.model_validate({**GOOD, "findings": [
        GOOD["findings"][0],  # type: ignore[index]
        {"path": "a.py", "line": 7, "severity": "minor", "title": "far", "body": "b"},
        {"path": "other.py", "line": 1, "severity": "info", "title": "elsewhere", "body": "c"}]})
    placed = place_findings(review, {"a.py": commentable_lines(PATCH)})
    assert [f.title for f in placed.inline] == ["x changed"]
    assert [f.title for f in placed.moved] == ["far", "elsewhere"]
    assert "`a.py:7` (minor) far" in placed.summary and "`other.py:1`" in placed.summary
    assert "x changed" not in placed.summary


def test_the_marker_follows_path_anchor_and_title_not_the_line_number() -> None:
    marker = finding_marker("a.py", "x = 2", "x changed")
    assert marker == finding_marker("a.py", "  x = 2 ", "X Changed")
    assert marker != finding_marker("b.py", "x = 2", "x changed")
    assert marker != finding_marker("a.py", "x = 3", "x changed")
    assert marker != finding_marker("a.py", "x = 2", "another title")
    review = Review.model_validate(GOOD)
    body = comment_body(review.findings[0], marker)
    assert marker_of(body) == marker and marker_of("<!-- studio-finding: zz -->") is None
