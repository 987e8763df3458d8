"""A baseline written from a folder run (which keeps a layout's finding once, as the layout's
own: "... in base.j2") also hides that finding when a template extending the layout is later
linted alone (found there as "... in a.j2"): the message names the template that led to it,
which made the fingerprints differ."""

from __future__ import annotations

from pathlib import Path

from promptcache.lint import LintConfig, lint_paths
from promptcache.lint.finding import Baseline

STABLE = "You are a careful assistant for the Acme billing platform. " * 120
BASE = "Intro.\nSession {{ current_date }}\n" + STABLE + "{% block body %}{% endblock %}\n"
CHILD = '{% extends "base.j2" %}\n{% block body %}Q: {{ q }}{% endblock %}\n'


def _write(root: Path) -> None:
    (root / ".git").mkdir()
    (root / "base.j2").write_text(BASE, encoding="utf-8")
    (root / "a.j2").write_text(CHILD, encoding="utf-8")


def test_folder_baseline_hides_the_layout_finding_when_a_child_is_linted_alone(
        tmp_path: Path) -> None:
    _write(tmp_path)
    first = lint_paths([str(tmp_path)])
    [own] = first.findings
    assert "in base.j2" in own.message and own.layout_fingerprint is None
    alone = lint_paths([str(tmp_path / "a.j2")])
    [via] = alone.findings
    assert "in a.j2" in via.message and via.fingerprint != own.fingerprint
    assert via.layout_fingerprint == own.fingerprint
    again = lint_paths([str(tmp_path / "a.j2")],
                       LintConfig(baseline=Baseline(f.fingerprint for f in first.findings)))
    assert again.findings == [] and again.in_baseline == 1


def test_a_baseline_of_another_problem_does_not_hide_it(tmp_path: Path) -> None:
    _write(tmp_path)
    first = lint_paths([str(tmp_path)])
    (tmp_path / "base.j2").write_text(BASE.replace("current_date", "request_id"),
                                      encoding="utf-8")
    again = lint_paths([str(tmp_path / "a.j2")],
                       LintConfig(baseline=Baseline(f.fingerprint for f in first.findings)))
    assert len(again.findings) == 1 and again.in_baseline == 0
