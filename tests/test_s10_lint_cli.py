"""Regression tests for new-user trial 15, finding 13 (lint CLI): a file named on the command
line that is skipped does not read as "All checks passed"; a ``--baseline`` none of whose
entries match gets a note saying what its paths are relative to."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from promptcache.lint.cli import main

APP = ("import datetime\nimport anthropic\nclient = anthropic.Anthropic()\n"
       "def ask(q):\n    now = datetime.datetime.now().isoformat()\n"
       "    return client.messages.create(model='claude-sonnet-4-6', max_tokens=5, "
       "system=f'Now {now}. Rules...', messages=[{'role': 'user', 'content': q}])\n")


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_skipped_file_named_alone_is_not_reported_as_passed(tmp_path: Path) -> None:
    listing = tmp_path / "list.json"
    listing.write_text("[1, 2, 3]", encoding="utf-8")
    code, out, _ = run([str(listing)])
    assert code == 0  # nothing wrong was found (pre-commit names every .json it sees)
    assert "All checks passed" not in out
    assert "Nothing linted: 1 file skipped" in out and f"{listing}: skipped: " in out


def test_skipped_beside_a_linted_file_keeps_the_summary(tmp_path: Path) -> None:
    (tmp_path / "list.json").write_text("[1, 2, 3]", encoding="utf-8")
    (tmp_path / "p.txt").write_text("Be kind.", encoding="utf-8")
    code, out, _ = run([str(tmp_path / "list.json"), str(tmp_path / "p.txt")])
    assert code == 0 and "All checks passed (1 file, 1 skipped)" in out


def test_baseline_matching_nothing_gets_a_hint(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "src" / "app.py").write_text(APP, encoding="utf-8")
    monkeypatch.chdir(proj)  # no pyproject.toml / .git: the current folder is the root
    code, out, _ = run(["src", "--format", "json"])
    assert code == 1 and len(json.loads(out)["findings"]) == 1
    (proj / "base.json").write_text(out, encoding="utf-8")
    code, _, err = run(["src", "--baseline", "base.json"])
    assert code == 0 and "--baseline" not in err  # matched: no note

    monkeypatch.chdir(tmp_path)  # the same files from the parent folder: another root
    code, _, err = run(["proj/src", "--baseline", "proj/base.json"])
    assert code == 1
    assert "0 of the 1 --baseline entry matched" in err
    assert str(tmp_path) in err and "pyproject.toml" in err
