"""Session 11: findings placed in a layout (``{% extends %}``) or in a template a layout
includes, found while linting another file. The same problem at the same place is reported
once per ``lint_paths`` run (not once per template that extends the layout), in every output
format; inline suppressions and ``per_file_ignores`` apply by the file (and line) a finding
names, never by the linted file's."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from promptcache.lint import LintConfig, lint_paths
from promptcache.lint.api import LintResult
from promptcache.lint.cli import main

STABLE = "You are a careful assistant for the Acme billing platform. " * 120
BASE = "Intro.\nSession {{ now() }}\n" + STABLE + "{% block body %}{% endblock %}\n"


def _write(root: Path, files: dict[str, str]) -> None:
    (root / ".git").mkdir(exist_ok=True)  # the project root
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _child(block: str = "Q: {{ q }}") -> str:
    return '{% extends "base.j2" %}\n{% block body %}' + block + "{% endblock %}\n"


def _where(res: LintResult, root: Path) -> list[tuple[str, str, int, int]]:
    return [(f.code, Path(f.file).relative_to(root).as_posix(), f.line, f.col)
            for f in res.findings]


def _run(argv: list[str], stdin: bytes | None = None) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdin=stdin, stdout=out, stderr=err)
    return code, out.getvalue()


# ------------------------------------------------------------------------ duplicates
def test_a_layouts_clock_is_reported_once_in_a_folder_lint(tmp_path: Path) -> None:
    _write(tmp_path, {"t/base.j2": BASE, "t/a.j2": _child(), "t/b.j2": _child("R: {{ r }}")})
    res = lint_paths([str(tmp_path / "t")])
    assert _where(res, tmp_path) == [("PC104", "t/base.j2", 2, 9)]
    # the one kept is the layout's own (its token count does not depend on a child)
    assert "in base.j2" in res.findings[0].message
    assert res.files == [str(tmp_path / "t" / n) for n in ("a.j2", "b.j2", "base.j2")]


def test_children_linted_without_their_layout_report_its_clock_once(tmp_path: Path) -> None:
    _write(tmp_path, {"base.j2": BASE, "a.j2": _child(), "b.j2": _child("R: {{ r }}")})
    res = lint_paths([str(tmp_path / "a.j2"), str(tmp_path / "b.j2")])
    assert _where(res, tmp_path) == [("PC104", "base.j2", 2, 9)]
    assert "in a.j2" in res.findings[0].message  # the first file that found it


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_every_format_and_the_summary_count_one_finding(tmp_path: Path, fmt: str) -> None:
    _write(tmp_path, {"base.j2": BASE, "a.j2": _child(), "b.j2": _child("R: {{ r }}")})
    code, out = _run([str(tmp_path), "--format", fmt])
    assert code == 1
    where = str(tmp_path / "base.j2")
    if fmt == "text":
        assert out.count(f"{where}:2:9: PC104") == 1
        assert "Found 1 finding (1 warning) in 3 files." in out
    elif fmt == "json":
        doc = json.loads(out)
        assert [(f["file"], f["line"], f["col"]) for f in doc["findings"]] == [(where, 2, 9)]
    elif fmt == "sarif":
        results = json.loads(out)["runs"][0]["results"]
        assert len(results) == 1
        loc = results[0]["locations"][0]["physicalLocation"]
        assert loc["region"]["startLine"] == 2
    else:
        assert out.count("::warning ") == 1 and f"file={where},line=2,col=9" in out


def test_a_childs_own_text_at_the_same_line_and_column_is_another_place(
        tmp_path: Path) -> None:
    base = "Intro.\n{% block head %}{% endblock %}Session {{ uuid }}\n" + STABLE
    child = '{% extends "base.j2" %}\n{% block head %}Session xxxxxxxxxxxxx {{ uuid }}' \
            "{% endblock %}\n"
    col = base.splitlines()[1].index("{{ uuid }}") + 1
    assert child.splitlines()[1].index("{{ uuid }}") + 1 == col
    _write(tmp_path, {"base.j2": base, "child.j2": child})
    res = lint_paths([str(tmp_path)])
    assert _where(res, tmp_path) == [("PC104", "base.j2", 2, col), ("PC104", "child.j2", 2, col)]


def test_different_problems_at_one_place_of_a_layout_are_both_kept(tmp_path: Path) -> None:
    # the children give the layout's {{ x }} different values: two problems at base.j2:1:4
    _write(tmp_path, {"base.j2": "Hi {{ x }}\n" + STABLE + "{% block b %}{% endblock %}",
                      "a.j2": '{% extends "base.j2" %}{% set x = now() %}',
                      "b.j2": '{% extends "base.j2" %}{% set x = uuid4() %}'})
    res = lint_paths([str(tmp_path)])
    assert _where(res, tmp_path) == [("PC104", "base.j2", 1, 4)] * 2
    assert {f.details["kind"] for f in res.findings} == {"timestamp", "id"}


def test_an_include_in_a_layout_is_reported_once_and_separate_includers_each(
        tmp_path: Path) -> None:
    _write(tmp_path, {
        "_clock.j2": "It is {{ now() }}.",
        "_layout.j2": '{% include "_clock.j2" %}\n' + STABLE + "{% block b %}{% endblock %}",
        "c.j2": '{% extends "_layout.j2" %}{% block b %}c{% endblock %}',
        "d.j2": '{% extends "_layout.j2" %}{% block b %}d{% endblock %}',
        "e.j2": 'Hi\n{% include "_clock.j2" %}\n' + STABLE,  # its own include site
        "f.j2": '{% include "_clock.j2" %}\n' + STABLE,
    })
    res = lint_paths([str(tmp_path)])
    assert _where(res, tmp_path) == [("PC104", "_layout.j2", 1, 1), ("PC104", "e.j2", 2, 1),
                                      ("PC104", "f.j2", 1, 1)]


def test_a_baseline_of_a_folder_run_hides_the_layouts_finding_for_every_child(
        tmp_path: Path) -> None:
    _write(tmp_path, {"base.j2": BASE, "a.j2": _child(), "b.j2": _child("R: {{ r }}")})
    first = lint_paths([str(tmp_path)])
    assert len(first.findings) == 1
    again = lint_paths([str(tmp_path)], LintConfig(
        baseline=frozenset(f.fingerprint for f in first.findings)))
    assert again.findings == [] and again.in_baseline == 1


def test_a_layout_finding_has_the_layouts_project_identity(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    _write(tmp_path, {"base.j2": BASE, "a.j2": _child()})
    [absolute] = lint_paths([str(tmp_path / "a.j2")]).findings
    monkeypatch.chdir(tmp_path)
    [relative] = lint_paths(["a.j2"]).findings
    assert absolute.project_path == relative.project_path == "base.j2"
    assert absolute.fingerprint == relative.fingerprint


# ------------------------------------------------------------------------ suppressions
def test_a_suppression_in_the_layout_silences_its_finding_when_a_child_is_linted(
        tmp_path: Path) -> None:
    base = BASE.replace("Session {{ now() }}",
                        "Session {{ now() }} {# promptcache: ignore[PC104] #}")
    _write(tmp_path, {"base.j2": base, "a.j2": _child()})
    assert lint_paths([str(tmp_path / "a.j2")]).findings == []
    assert lint_paths([str(tmp_path)]).findings == []


def test_a_suppression_on_the_same_line_of_the_child_does_not_silence_the_layout(
        tmp_path: Path) -> None:
    child = _child("Q: {{ q }} {# promptcache: ignore #}")  # line 2, as the layout's clock
    _write(tmp_path, {"base.j2": BASE, "a.j2": child})
    res = lint_paths([str(tmp_path / "a.j2")])
    assert _where(res, tmp_path) == [("PC104", "base.j2", 2, 9)]


def test_a_suppression_in_the_child_still_silences_the_childs_own_finding(
        tmp_path: Path) -> None:
    base = "{% block head %}{% endblock %}\n" + STABLE
    child = '{% extends "base.j2" %}\n{% block head %}Now: {{ now() }}{% endblock %}\n'
    _write(tmp_path, {"base.j2": base, "a.j2": child})
    assert _where(lint_paths([str(tmp_path / "a.j2")]), tmp_path) == [("PC104", "a.j2", 2, 22)]
    _write(tmp_path, {"a.j2": child.replace("\n{% block", "\n{# promptcache: ignore[PC104] #}"
                                                            "{% block")})
    assert lint_paths([str(tmp_path / "a.j2")]).findings == []


def test_per_file_ignores_follow_the_file_a_finding_names(tmp_path: Path) -> None:
    _write(tmp_path, {"layouts/base.j2": BASE,
                      "prompts/a.j2": _child().replace('"base.j2"', '"../layouts/base.j2"')})
    target = [str(tmp_path / "prompts" / "a.j2")]
    assert len(lint_paths(target).findings) == 1
    by_layout = LintConfig(root=tmp_path, per_file_ignores={"layouts/*": ("PC104",)})
    assert lint_paths(target, by_layout).findings == []
    by_child = LintConfig(root=tmp_path, per_file_ignores={"prompts/*": ("PC104",)})
    assert _where(lint_paths(target, by_child), tmp_path) == [("PC104", "layouts/base.j2", 2, 9)]


def test_stdin_names_a_layout_finding_at_the_layout(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, {"base.j2": BASE})
    monkeypatch.chdir(tmp_path)
    # the child's line 2 has a suppression: it must not silence the layout's line 2
    data = _child("Q {# promptcache: ignore #}").encode()
    code, out = _run(["-", "--stdin-filename", "a.j2", "--format", "json"], stdin=data)
    assert code == 1
    assert [(f["file"], f["line"]) for f in json.loads(out)["findings"]] == [("base.j2", 2)]
