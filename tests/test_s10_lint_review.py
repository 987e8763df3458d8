"""Regression tests for review 16 of the lint changes: a message content the linter cannot
see may hold a breakpoint (finding 8); Jinja includes: symlink loops (5), files outside the
project (7), include fan-out (6), the includer's ``{% set %}`` values (10); millisecond
epochs (9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptcache.lint.api import LintResult, lint_paths, lint_text
from promptcache.lint.finding import Finding
from promptcache.lint.sources import templating

ANTHROPIC = ("from datetime import datetime\nimport anthropic\nc = anthropic.Anthropic()\n"
             "STABLE = 'You are a helpful assistant. ' * 400\nCC = {'type': 'ephemeral'}\n"
             "def user_blocks(q):\n"
             "    return [{'type': 'text', 'text': q, 'cache_control': CC}]\n")
SYSTEM_AFTER = ("[{'type': 'text', 'text': STABLE, 'cache_control': CC}, "
                "{'type': 'text', 'text': f'Current time: {datetime.now()}'}]")


def _anthropic(messages: str) -> list[Finding]:
    src = (ANTHROPIC + "def ask(q, history_blocks):\n"
           "    return c.messages.create(model='claude-sonnet-4-6', max_tokens=5,\n"
           f"        system={SYSTEM_AFTER},\n        messages={messages})\n")
    return lint_text(src, "app.py")


def test_message_content_given_as_a_name_or_helper_call_keeps_the_system_clock() -> None:
    # the content may carry the request's last breakpoint: the clock is then in the prefix
    for messages in ("[{'role': 'user', 'content': history_blocks}]",
                     "[{'role': 'user', 'content': user_blocks(q)}]",
                     "[{'role': 'user', 'content': [*history_blocks]}]",
                     "[{'role': 'user', 'content': [{'type': 'text', 'text': 'a'}, "
                     "history_blocks[-1]]}]"):
        assert [f.code for f in _anthropic(messages)] == ["PC101"], messages


def test_literal_unmarked_content_after_the_breakpoint_is_still_outside_the_prefix() -> None:
    for messages in ("[{'role': 'user', 'content': 'Hi'}]",
                     "[{'role': 'user', 'content': f'Hi {datetime.now()}'}]",
                     "[{'role': 'user', 'content': [{'type': 'text', 'text': q}]}]",
                     "[{'role': 'user', 'content': [dict(type='text', text=q)]}]"):
        assert _anthropic(messages) == [], messages


STABLE = "You are a careful assistant for the Acme billing platform. " * 120


def _write(base: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _lint_j2(path: Path) -> LintResult:
    return lint_paths([str(path)])


def test_a_symlink_loop_in_an_include_is_a_warning_not_an_error(tmp_path: Path) -> None:
    _write(tmp_path, {"main.j2": '{% include "loop.j2" %}\n' + STABLE + "{{ q }}\n"})
    (tmp_path / "loop.j2").symlink_to("loop.j2")
    res = _lint_j2(tmp_path / "main.j2")
    assert res.errors == []
    assert any("loop.j2" in w.reason and "symlink loop" in w.reason for w in res.warnings)


def test_includes_outside_the_project_are_refused_without_reading_them(tmp_path: Path) -> None:
    (tmp_path / "proj" / ".git").mkdir(parents=True)
    _write(tmp_path, {"outside/creds.env": "DB_PASSWORD={{ hunter2secret token }}\n",
                      "outside/clock.j2": "{{ now() }}",
                      "proj/prompts/_ok.j2": "{{ now() }}",
                      "proj/prompts/main.j2": ('{% include "../../outside/creds.env" %}\n'
                                               '{% include "../../outside/clock.j2" %}\n'
                                               f'{{% include "{tmp_path}/outside/clock.j2" %}}\n'
                                               + STABLE + "{{ q }}\n")})
    res = _lint_j2(tmp_path / "proj" / "prompts" / "main.j2")
    reasons = " | ".join(w.reason for w in res.warnings)
    assert "hunter2secret" not in reasons and "syntax error" not in reasons, reasons
    assert '{% include "../../outside/creds.env" %} not followed' in reasons
    assert "outside the project" in reasons and "absolute template name" in reasons
    assert res.findings == []  # the outside clock is not read
    # inside the project (a sibling folder of the template's) includes are still followed
    _write(tmp_path, {"proj/other/main.j2": '{% include "../prompts/_ok.j2" %}\n' + STABLE})
    res = _lint_j2(tmp_path / "proj" / "other" / "main.j2")
    assert [f.code for f in res.findings] == ["PC104"] and res.warnings == []


def test_each_included_file_is_analysed_once_however_often_it_is_included(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # f0 includes f1 three times, f1 includes f2 three times...: 3**5 walks without a memo
    files = {f"f{i}.j2": "".join(f'level {i}\n{{% include "f{i + 1}.j2" %}}\n' for _ in range(3))
             for i in range(5)}
    files["f5.j2"] = "leaf {{ now() }}\n"
    files["f0.j2"] += STABLE
    _write(tmp_path, files)
    calls: list[int] = []
    real = templating._pieces

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(templating, "_pieces", counting)
    res = _lint_j2(tmp_path / "f0.j2")
    assert [f.code for f in res.findings] == ["PC104"] * 3  # each include of f1 in f0
    assert len(calls) <= len(files)


def test_include_visits_per_template_are_capped(tmp_path: Path) -> None:
    _write(tmp_path, {"_part.j2": "Stable part.\n",
                      "main.j2": '{% include "_part.j2" %}\n' * 600 + STABLE})
    res = _lint_j2(tmp_path / "main.j2")
    assert res.errors == []
    assert any("more than 500 includes" in w.reason for w in res.warnings)


def test_an_include_sees_the_includers_set_variables(tmp_path: Path) -> None:
    _write(tmp_path, {"hdr.j2": "Session started {{ stamp }}.\n",
                      "main.j2": ('{% set stamp = now() %}{% include "hdr.j2" %}\n' + STABLE
                                  + "{{ q }}\n"),
                      "quiet.j2": ('{% set stamp = now() %}'
                                   '{% include "hdr.j2" without context %}\n' + STABLE)})
    res = _lint_j2(tmp_path / "main.j2")
    assert [f.code for f in res.findings] == ["PC104"]
    assert "hdr.j2" in res.findings[0].message
    assert _lint_j2(tmp_path / "quiet.j2").findings == []


CLOCK_HEAD = ("import time\nfrom openai import OpenAI\nclient = OpenAI()\n"
              "BASE = 'You are a research agent. ' * 500\n")


def _granularity(body: str) -> str:
    src = (CLOCK_HEAD + "def ask(q):\n" + body
           + "    return client.chat.completions.create(model='gpt-5', messages=["
           "{'role': 'system', 'content': f'v={v} ' + BASE}, {'role': 'user', 'content': q}])\n")
    found = lint_text(src, "app.py")
    assert len(found) == 1, [f.message for f in found]
    return found[0].message.split("-granularity", 1)[0]


def test_a_millisecond_epoch_is_reported_as_milliseconds() -> None:
    assert _granularity("    v = int(time.time() * 1000)\n") == "millisecond"
    assert _granularity("    v = round(1000 * time.time())\n") == "millisecond"


def test_a_millisecond_count_divided_into_minutes_is_minutes() -> None:
    assert _granularity("    ms = int(time.time() * 1000)\n    v = int(ms // 60000)\n") \
        == "minute"
    assert _granularity("    v = int(time.time() * 1000) // 60000\n") == "minute"
    # seconds keep their units
    assert _granularity("    v = int(time.time())\n") == "second"
    assert _granularity("    v = int(time.time() // 3600)\n") == "hour"


def test_linting_from_the_filesystem_root_does_not_open_the_whole_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # no pyproject.toml / .git above: the project root falls back to the current directory
    _write(tmp_path, {"outside/clock.j2": "{{ now() }}",
                      "prompts/main.j2": '{% include "../outside/clock.j2" %}\n' + STABLE})
    if any((p / m).exists() for p in tmp_path.parents for m in (".git", "pyproject.toml")):
        pytest.skip("a project marker above the temporary folder")
    monkeypatch.chdir("/")
    res = _lint_j2(tmp_path / "prompts" / "main.j2")
    assert res.findings == []
    assert any("outside the project" in w.reason for w in res.warnings)
