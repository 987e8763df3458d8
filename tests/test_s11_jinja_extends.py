"""Session 11: Jinja ``{% extends %}`` is followed (the layout's text at the layout's lines,
the template's blocks in their places, in rendered order); includes in templates embedded in
YAML / TOML / Prompty files are followed relative to the embedding file; a finding from an
includer's ``{% set %}`` value names that ``{% set %}``'s file and line."""

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


def _where(res: LintResult, tmp_path: Path) -> list[tuple[str, str, int, int]]:
    return [(f.code, Path(f.file).relative_to(tmp_path).as_posix(), f.line, f.col)
            for f in res.findings]


# ------------------------------------------------------------------------ extends
def test_a_volatile_value_in_the_layout_is_reported_in_the_layout_file(tmp_path: Path) -> None:
    files = {"base.j2": "Intro.\nSession {{ uuid }}\n" + STABLE
                        + "{% block body %}{% endblock %}",
             "child.j2": '{% extends "base.j2" %}\n{% block body %}Q: {{ q }}{% endblock %}'}
    res = _lint(tmp_path, files, "child.j2")
    assert _where(res, tmp_path) == [("PC104", "base.j2", 2, 9)]
    assert "in child.j2" in res.findings[0].message
    assert res.errors == [] and res.warnings == []


def test_a_child_block_before_the_layouts_stable_text_is_reported_in_the_child(
        tmp_path: Path) -> None:
    files = {"base.j2": "{% block head %}{% endblock %}\n" + STABLE,
             "child.j2": '{% extends "base.j2" %}\n{% block head %}Now: {{ now() }}'
                         '{% endblock %}\n'}
    res = _lint(tmp_path, files, "child.j2")
    assert _where(res, tmp_path) == [("PC104", "child.j2", 2, 22)]
    assert res.findings[0].details["stable_tokens_after"] > 1000


def test_rendered_order_decides_not_the_childs_source_order(tmp_path: Path) -> None:
    # the child's clock is in a block the layout puts after its stable text; the child's
    # text outside blocks (after the extends) is never rendered
    files = {"base.j2": "{% block head %}Hi.{% endblock %}\n" + STABLE
                        + "{% block tail %}{% endblock %}",
             "child.j2": '{% extends "base.j2" %}{{ now() }}\n' + STABLE
                         + '{% block tail %}{{ now() }}{% endblock %}'}
    assert _lint(tmp_path, files, "child.j2").findings == []


def test_super_renders_the_parents_block_and_an_override_replaces_it(tmp_path: Path) -> None:
    files = {"base.j2": "{% block head %}Time {{ now() }}{% endblock %}\n" + STABLE,
             "keeps.j2": '{% extends "base.j2" %}{% block head %}Hi {{ super() }}'
                         '{% endblock %}',
             "drops.j2": '{% extends "base.j2" %}{% block head %}Hi{% endblock %}'}
    assert _where(_lint(tmp_path, files, "keeps.j2"), tmp_path) == [("PC104", "base.j2", 1, 22)]
    assert _lint(tmp_path, files, "drops.j2").findings == []


def test_a_chain_of_layouts_in_subfolders_and_the_layouts_own_includes(tmp_path: Path) -> None:
    files = {"pyproject.toml": "",  # the project root: prompts/ may read ../layouts/
             "layouts/base.j2": '{% include "_clock.j2" %}\n{% block body %}{% endblock %}',
             "layouts/_clock.j2": "It is {{ now() }}.",
             "layouts/mid.j2": '{% extends "base.j2" %}{% block body %}' + STABLE
                               + '{% endblock %}',
             "prompts/child.j2": '{% extends "../layouts/mid.j2" %}'}
    res = _lint(tmp_path, files, "prompts/child.j2")
    assert _where(res, tmp_path) == [("PC104", "layouts/base.j2", 1, 1)]
    assert "_clock.j2" in res.findings[0].message


def test_an_included_template_that_extends_a_layout(tmp_path: Path) -> None:
    files = {"base.j2": "Stamp {{ now() }}{% block b %}{% endblock %}",
             "part.j2": '{% extends "base.j2" %}{% block b %}x{% endblock %}',
             "main.j2": '{% include "part.j2" %}\n' + STABLE}
    res = _lint(tmp_path, files, "main.j2")
    assert _where(res, tmp_path) == [("PC104", "main.j2", 1, 1)]
    assert "base.j2" in res.findings[0].message


def test_missing_cyclic_and_outside_layouts_are_warnings(tmp_path: Path) -> None:
    files = {"proj/pyproject.toml": "",
             "proj/a.j2": '{% extends "b.j2" %}{% block x %}{{ now() }}{% endblock %}',
             "proj/b.j2": '{% extends "a.j2" %}{% block x %}{% endblock %}' + STABLE,
             "proj/m.j2": '{% extends "missing.j2" %}',
             "proj/o.j2": '{% extends "../outside.j2" %}',
             "proj/d.j2": '{% extends name %}',
             "outside.j2": "{{ now() }}" + STABLE}
    res = _lint(tmp_path, files, "proj/a.j2")
    assert res.errors == []
    assert any("include cycle" in w.reason for w in res.warnings)
    for name, reason in (("m.j2", "missing.j2 not found"),
                         ("o.j2", "outside the project folder"),
                         ("d.j2", "not a string literal")):
        res = _lint(tmp_path, {}, f"proj/{name}")
        assert res.errors == [] and res.findings == [], name
        assert any(reason in w.reason and "extends" in w.reason for w in res.warnings), name


def test_a_layout_linted_on_its_own_keeps_its_own_finding(tmp_path: Path) -> None:
    # not a regression test: the template without {% extends %} is linted as before
    files = {"base.j2": "{{ now() }}\n" + STABLE + "{% block b %}{% endblock %}"}
    assert _where(_lint(tmp_path, files, "base.j2"), tmp_path) == [("PC104", "base.j2", 1, 1)]


# ------------------------------------------------------------------------ embedded templates
def test_includes_in_yaml_toml_and_prompty_templates_are_followed(tmp_path: Path) -> None:
    stable = STABLE.strip()
    files = {"prompts/_hdr.j2": "Session started {{ now() }}.",
             "prompts/agent.yaml": f'name: a\nsystem_template: |\n  {{% include "_hdr.j2" %}}\n'
                                   f"  {stable}\n",
             "prompts/agent.toml": f'name = "a"\nsystem_prompt = """\n{{% include "_hdr.j2" %}}\n'
                                   f'{stable}\n"""\n',
             "prompts/chat.prompty": f"---\nname: c\n---\nsystem:\n{{% include '_hdr.j2' %}}\n"
                                     f"{stable}\n"}
    for target, line, col in (("agent.yaml", 3, 3), ("agent.toml", 3, 1),
                              ("chat.prompty", 5, 1)):
        res = _lint(tmp_path, files, f"prompts/{target}")
        assert _where(res, tmp_path) == [("PC104", f"prompts/{target}", line, col)], target
        assert "_hdr.j2" in res.findings[0].message
        assert res.errors == [] and res.warnings == []


def test_a_broken_include_in_yaml_is_a_warning_at_the_yaml_line(tmp_path: Path) -> None:
    files = {"p.yaml": f'a: 1\nb: 2\nprompt: |\n  Hello\n  {{% include "nope.j2" %}}\n'
                       f"  {STABLE.strip()} {{{{ now() }}}}\n"}
    res = _lint(tmp_path, files, "p.yaml")
    assert res.errors == [] and res.findings == []
    assert [w.reason for w in res.warnings] == [
        'line 5: {% include "nope.j2" %} not followed: nope.j2 not found in ' + str(tmp_path)]


# ------------------------------------------------------------------------ includer's set
def test_a_finding_from_the_includers_set_names_the_set_line(tmp_path: Path) -> None:
    files = {"hdr.j2": "Session started {{ stamp }}.\n",
             "main.j2": '{# header #}\n{% set stamp = now() %}\n{% include "hdr.j2" %}\n'
                        + STABLE}
    res = _lint(tmp_path, files, "main.j2")
    assert _where(res, tmp_path) == [("PC104", "main.j2", 3, 1)]
    msg = res.findings[0].message
    assert "hdr.j2: {{ stamp }}" in msg and "{% set stamp %} at main.j2 line 2" in msg


def test_the_includers_set_line_in_a_yaml_file_is_the_yaml_line(tmp_path: Path) -> None:
    files = {"hdr.j2": "Session started {{ stamp }}.\n",
             "p.yaml": f'x: 1\nsystem: |\n  {{% set stamp = now() %}}\n  {{% include "hdr.j2" %}}\n'
                       f"  {STABLE.strip()}\n"}
    res = _lint(tmp_path, files, "p.yaml")
    assert _where(res, tmp_path) == [("PC104", "p.yaml", 4, 3)]
    assert "{% set stamp %} at p.yaml line 3" in res.findings[0].message


def test_super_repeated_down_a_long_chain_is_capped_and_reported_once(tmp_path: Path) -> None:
    files = {"l0.j2": "{% block a %}x {{ now() }}{% endblock %}\n" + STABLE}
    for i in range(1, 13):  # 3**12 copies of l0's block without the cap
        files[f"l{i}.j2"] = (f'{{% extends "l{i - 1}.j2" %}}{{% block a %}}'
                             "{{ super() }}{{ super() }}{{ super() }}{% endblock %}")
    res = _lint(tmp_path, files, "l12.j2")
    assert _where(res, tmp_path) == [("PC104", "l0.j2", 1, 16)]
    assert any("more than 10000 pieces" in w.reason for w in res.warnings)
