"""Review 17 findings 5 and 7 (lint): following ``{% extends %}`` is bounded in work, not only
in output pieces (``{{ super() }}`` repeated at each level of a chain of text-less blocks was
K**depth steps), and a layout's finding reached from files named with different spellings of
one path is reported once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from promptcache.lint.api import LintResult, lint_paths
from promptcache.lint.sources import templating

STABLE = "You are a careful assistant for the Acme billing platform. " * 120


def _write(tmp_path: Path, files: dict[str, str]) -> None:
    (tmp_path / ".git").mkdir(exist_ok=True)
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _super_chain(k: int, depth: int, root_body: str = "") -> dict[str, str]:
    """t0 extends t1 ... extends t{depth}; each block body is ``{{ super() }}`` k times."""
    files = {f"t{i}.j2": f'{{% extends "t{i + 1}.j2" %}}{{% block b %}}'
                         + "{{ super() }}" * k + "{% endblock %}\n" for i in range(depth)}
    files[f"t{depth}.j2"] = "Hello {% block b %}" + root_body + "{% endblock %}\n"
    return files


# ------------------------------------------------------------- finding 5: the step budget
def test_super_repeated_down_a_chain_of_empty_blocks_stops_at_the_step_budget(
        tmp_path: Path) -> None:
    # 4**12 (16.7 million) block expansions, none with any text: the piece cap never trips,
    # so the old walk took ~20 s (and 8**12 would never end); now one note, no finding
    _write(tmp_path, _super_chain(4, 12))
    res = lint_paths([str(tmp_path / "t0.j2")])
    assert res.findings == [] and res.errors == []
    assert [w.reason for w in res.warnings] == [
        "{% extends %} not followed: more than 100000 steps substituting its blocks "
        "({{ super() }} repeated down the chain)"]


def test_the_step_budget_counts_every_item_a_substitution_visits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a smaller budget, so the count of visits is observable: 3**6 = 729 expansions of a
    # 3-item body (3 super marks) plus the root's items are more than 500 steps, fewer than 5000
    monkeypatch.setattr(templating, "_MAX_LAYOUT_STEPS", 500)
    _write(tmp_path, _super_chain(3, 6, "{{ now() }}"))
    assert any("more than 500 steps" in w.reason
               for w in lint_paths([str(tmp_path / "t0.j2")]).warnings)
    monkeypatch.setattr(templating, "_MAX_LAYOUT_STEPS", 5000)
    assert not any("steps" in w.reason for w in lint_paths([str(tmp_path / "t0.j2")]).warnings)


def test_a_normal_chain_with_super_is_unchanged_by_the_budget(tmp_path: Path) -> None:
    # 2**8 copies of the root's block: under both caps, every piece is rendered as before
    files = _super_chain(2, 8, "{{ now() }}")
    files["t8.j2"] = "Hello {% block b %}{{ now() }}{% endblock %}\n" + STABLE
    _write(tmp_path, files)
    res = lint_paths([str(tmp_path / "t0.j2")])
    assert [(f.code, Path(f.file).name, f.line, f.col) for f in res.findings] == [
        ("PC104", "t8.j2", 1, 20)]
    assert res.warnings == []


def test_the_piece_cap_keeps_its_own_note(tmp_path: Path) -> None:
    # 3**12 copies of a block with text: the piece cap trips first, with its own reason
    _write(tmp_path, _super_chain(3, 12, "x {{ now() }}"))
    reasons = [w.reason for w in lint_paths([str(tmp_path / "t0.j2")]).warnings]
    assert any("more than 10000 pieces" in r for r in reasons), reasons
    assert not any("steps" in r for r in reasons), reasons


# ------------------------------------------------ finding 7: one file, several spellings
LAYOUT = {"t/base.j2": "Intro.\nSession {{ now() }}\n" + STABLE
                       + "{% block body %}{% endblock %}\n",
          "t/a.j2": '{% extends "base.j2" %}\n{% block body %}Q: {{ q }}{% endblock %}\n',
          "t/b.j2": '{% extends "base.j2" %}\n{% block body %}R: {{ r }}{% endblock %}\n'}


def _places(res: LintResult) -> list[tuple[str, str, int, int]]:
    return [(f.code, f.file, f.line, f.col) for f in res.findings]


@pytest.mark.parametrize("second", ["./t/b.j2", "t/../t/b.j2", "ABS"])
def test_a_layouts_finding_is_reported_once_whatever_the_spelling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, second: str) -> None:
    _write(tmp_path, LAYOUT)
    monkeypatch.chdir(tmp_path)
    other = str(tmp_path / "t" / "b.j2") if second == "ABS" else second
    res = lint_paths(["t/a.j2", other])
    # the first linted file's spelling is the one reported
    assert _places(res) == [("PC104", "t/base.j2", 2, 9)]
    assert "in a.j2" in res.findings[0].message


def test_the_layouts_own_finding_wins_whatever_the_spelling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, LAYOUT)
    monkeypatch.chdir(tmp_path)
    res = lint_paths(["t/a.j2", os.path.join(".", "t", "base.j2")])
    assert _places(res) == [("PC104", os.path.join(".", "t", "base.j2"), 2, 9)]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_a_layout_reached_through_a_symlinked_folder_is_one_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, LAYOUT)
    monkeypatch.chdir(tmp_path)
    try:
        os.symlink("t", tmp_path / "u")
    except OSError:
        pytest.skip("cannot create a symlink here")
    res = lint_paths(["t/a.j2", "u/b.j2"])
    assert _places(res) == [("PC104", "t/base.j2", 2, 9)]
