"""Regression tests for new-user trial 15, finding 7 (template lint): Jinja ``{% include %}``,
``{% import %}`` and ``{% from ... import %}`` are followed (parsed, never rendered) relative to
the template's folder; ``{{ request.id }}`` and ``{{ "now"|strftime(...) }}`` are volatile.
Finding 10: Handlebars / Mustache files are linted as placeholder templates."""

from __future__ import annotations

from pathlib import Path

from promptcache.lint.api import LintResult, lint_paths

STABLE = "You are a careful assistant for the Acme billing platform. " * 120


def _lint(tmp_path: Path, files: dict[str, str], target: str) -> LintResult:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return lint_paths([str(tmp_path / target)])


def test_volatile_include_counts_at_the_include_site(tmp_path: Path) -> None:
    res = _lint(tmp_path, {"_header.j2": "Session started {{ started_at }}.",
                           "system.j2": '{% include "_header.j2" %}\n' + STABLE},
                "system.j2")
    assert [(f.code, f.line, f.col) for f in res.findings] == [("PC104", 1, 1)]
    assert "started_at" in res.findings[0].message
    assert res.errors == [] and res.warnings == []


def test_stable_include_and_include_after_the_text_are_not_reported(tmp_path: Path) -> None:
    res = _lint(tmp_path, {"_rules.j2": "Rules: be kind.",
                           "_stamp.j2": "Now {{ now() }}",
                           "system.j2": '{% include "_rules.j2" %}\n' + STABLE
                           + '{% include "_stamp.j2" %}'},
                "system.j2")
    assert res.findings == [] and res.errors == []


def test_include_in_a_subfolder_and_nested_includes(tmp_path: Path) -> None:
    res = _lint(tmp_path, {"parts/_a.j2": '{% include "_b.j2" %}',
                           "parts/_b.j2": "id {{ request_id }}",
                           "system.j2": '{% include "parts/_a.j2" %}' + STABLE},
                "system.j2")
    assert [f.code for f in res.findings] == ["PC104"]


def test_imported_macro_rendering_now_is_volatile_where_called(tmp_path: Path) -> None:
    macros = ('{% macro stamp() %}Generated at {{ now() }}{% endmacro %}\n'
              '{% macro policy(name) %}Policy {{ name }} applies.{% endmacro %}\n')
    files = {"_macros.j2": macros,
             "a.j2": '{% import "_macros.j2" as m %}\n{{ m.stamp() }}\n' + STABLE,
             "b.j2": '{% from "_macros.j2" import stamp as s %}{{ s() }}' + STABLE,
             "c.j2": '{% import "_macros.j2" as m %}{{ m.policy("x") }}' + STABLE,
             "d.j2": '{% macro t() %}{{ now() }}{% endmacro %}{{ t() }}' + STABLE}
    assert [(f.code, f.line) for f in _lint(tmp_path, files, "a.j2").findings] == [("PC104", 2)]
    assert [f.code for f in _lint(tmp_path, files, "b.j2").findings] == ["PC104"]
    assert _lint(tmp_path, files, "c.j2").findings == []
    assert [f.code for f in _lint(tmp_path, files, "d.j2").findings] == ["PC104"]


def test_missing_cyclic_and_broken_includes_are_warnings(tmp_path: Path) -> None:
    files = {"a.j2": '{% include "b.j2" %}' + STABLE,
             "b.j2": '{% include "a.j2" %}{{ now() }}',
             "c.j2": '{% include "missing.j2" %}{% include "missing2.j2" ignore missing %}'
                     '{% import "bad.j2" as x %}{{ x.y() }}' + STABLE,
             "bad.j2": "{% if %}"}
    res = _lint(tmp_path, files, "a.j2")
    assert res.errors == [] and [f.code for f in res.findings] == ["PC104"]
    assert any("include cycle" in w.reason for w in res.warnings)
    res = _lint(tmp_path, files, "c.j2")
    assert res.errors == [] and res.findings == [] and res.exit_code == 0
    reasons = " | ".join(w.reason for w in res.warnings)
    assert "missing.j2 not found" in reasons and "missing2" not in reasons
    assert "Jinja syntax error in bad.j2" in reasons


def test_request_id_attribute_and_now_string_filter(tmp_path: Path) -> None:
    res = _lint(tmp_path, {"t.j2": "Hello {{ user.name }} ({{ user.id }}), request "
                                   "{{ request.id }}\n" + STABLE}, "t.j2")
    # user.id is a per-user value (trial 24); user.name is not an id
    assert [(f.code, f.col) for f in res.findings] == [("PC104", 24), ("PC104", 48)]
    assert [f.details["id_scope"] for f in res.findings] == ["user", "request"]
    res = _lint(tmp_path, {"f.j2": 'Now: {{ "now"|strftime("%H:%M") }}\n' + STABLE}, "f.j2")
    assert [f.code for f in res.findings] == ["PC104"]
    assert res.findings[0].details["granularity"] == "minute"


HBS = "{{#if urgent}}URGENT {{/if}}It is {{currentDateTime}}.\n" + STABLE


def test_handlebars_file_named_explicitly_is_linted_not_a_jinja_error(tmp_path: Path) -> None:
    for name in ("p.hbs", "p.handlebars", "p.mustache", "p.tmpl"):
        res = _lint(tmp_path, {name: HBS}, name)
        assert res.errors == [], name
        assert [(f.code, f.col) for f in res.findings] == [("PC104", 35)], name


def test_folder_walk_includes_handlebars_and_mustache(tmp_path: Path) -> None:
    for name in ("a.hbs", "b.handlebars", "c.mustache"):
        (tmp_path / name).write_text(HBS, encoding="utf-8")
    res = lint_paths([str(tmp_path)])
    assert sorted(Path(f).name for f in res.files) == ["a.hbs", "b.handlebars", "c.mustache"]
    assert len(res.findings) == 3 and res.errors == []


def test_macro_finding_says_what_the_macro_renders(tmp_path: Path) -> None:
    res = _lint(tmp_path, {"_m.j2": "{% macro stamp() %}At {{ now() }}{% endmacro %}",
                           "a.j2": '{% import "_m.j2" as m %}{{ m.stamp() }}' + STABLE}, "a.j2")
    assert len(res.findings) == 1
    assert "macro stamp in _m.j2" in res.findings[0].message
    assert "now()" in res.findings[0].message
