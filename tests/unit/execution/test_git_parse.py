"""The -z parsers on renames, where one record takes the next ones with it."""

from __future__ import annotations

from services.execution.tool_domains.git.parse import merge_files, parse_name_status, parse_numstat


def test_a_rename_in_numstat_and_name_status() -> None:
    numstat = b"1\t0\tnew.txt\x003\t1\t\x00old name.txt\x00moved name.txt\x00-\t-\tlogo.png\x00"
    names = b"A\x00new.txt\x00R090\x00old name.txt\x00moved name.txt\x00M\x00logo.png\x00"
    assert parse_numstat(numstat) == {
        "new.txt": {"additions": 1, "deletions": 0, "binary": False},
        "moved name.txt": {"additions": 3, "deletions": 1, "binary": False},
        "logo.png": {"additions": 0, "deletions": 0, "binary": True},
    }
    assert [e["path"] for e in parse_name_status(names)] == ["new.txt", "moved name.txt",
                                                           "logo.png"]
    moved = merge_files(numstat, names)[1]
    assert moved["old_path"] == "old name.txt" and moved["additions"] == 3


def test_a_truncated_record_list_does_not_fail() -> None:
    assert parse_name_status(b"R100\x00only-one") == [{"path": "only-one", "status": "renamed"}]
    assert parse_name_status(b"M") == [{"path": "", "status": "modified"}]
