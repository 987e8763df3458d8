"""Review 25 of this session's lint changes.

* 641f784 made clock words whole words, but a camelCase key's later part (``serverTime``,
  ``lastUpdatedDate``) no longer counted: ``{"requestTime": "14:03:27"}`` in a system prompt
  was no PC101 finding (it was before 641f784).
* 8f8c9fb's "sent by the call at line M" was added to every keyword argument of a call
  written over several lines ("system= of create() (line 13, sent by the call at line 12)"):
  the argument is the call's own; the note is for a message written before the call.
* cf957b8 left a set literal of negative numbers (``{-1, 0, 1}``: ``-1`` is a unary minus, not
  a constant) tainted as set order, though int hashes are not salted.
* 265e97e read ``{{ user.email }}`` as a per-user value in Jinja but not ``{user.email}`` /
  ``{customer.id}`` in a format-string template (each part was read alone).
* 939f0dd counted an identical body sent again (a retry) towards the log's time span: a
  clock value in a request and its retry three seconds later was "proved" stable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from promptcache.lint.api import lint_paths, lint_text
from promptcache.lint.volatile import scan_text

RULES = " ".join(f"Rule {i}: customers may return items within thirty days when receipts "
                 "are present." for i in range(120))


def _matches(text: str) -> list[str]:
    return [m.match for m in scan_text(text)]


def test_camel_case_clock_part_counts() -> None:
    assert _matches('{"requestTime": "14:03:27"}') == ["14:03:27"]
    assert _matches("serverTime: 14:03") == ["14:03"]
    assert _matches("lastUpdatedDate 2025-05-04") == ["2025-05-04"]
    assert _matches("reportDate: 2025-05-04") == ["2025-05-04"]
    # still not inside a word, in capitals, or a lower-case continuation
    assert _matches("myTimeout 14:03") == []
    assert _matches("TIMEOUT 14:03") == []
    assert _matches("Runtime 14:03") == []
    assert _matches("the standup starts at 10:30") == []


MULTILINE = '''from datetime import datetime
import anthropic

client = anthropic.Anthropic()


def ask(q):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=10,
        system=f"Now: {datetime.now()}",
        messages=[{"role": "user", "content": q}],
    )
'''


def test_argument_written_inside_a_multiline_call_names_its_own_line() -> None:
    found = [f for f in lint_text(MULTILINE, "app.py") if f.code == "PC101"]
    assert len(found) == 1
    assert "(line 11)" in found[0].message and "sent by" not in found[0].message, found[0]


def _set_body(literal: str) -> str:
    return ("from openai import OpenAI\nclient = OpenAI()\nBASE = 'You are terse. ' * 500\n"
            "def ask(q):\n"
            f"    levels = {literal}\n"
            "    return client.chat.completions.create(model='gpt-4.1', messages=["
            "{'role': 'system', 'content': BASE + str(list(levels))}, "
            "{'role': 'user', 'content': q}])\n")


def test_set_of_negative_numbers_is_hash_stable() -> None:
    assert lint_text(_set_body("{-1, 0, 1}"), "app.py") == []
    assert lint_text(_set_body("{(-1, 2.5), (3, +4)}"), "app.py") == []
    assert [f.code for f in lint_text(_set_body("{-1, 'a'}"), "app.py")] == ["PC203"]


def test_dotted_user_value_in_a_format_template(tmp_path: Path) -> None:
    for hole in ("{user.email}", "{customer.id}", "{ctx.session.id}"):
        path = tmp_path / "prompt.txt"
        path.write_text(f"You are helping {hole}.\n{RULES[:2000]}\n", encoding="utf-8")
        found = [f for f in lint_paths(path).findings if f.code == "PC104"]
        assert len(found) == 1, (hole, found)
        scope = "conversation" if "session" in hole else "user"
        assert found[0].details["id_scope"] == scope, (hole, found[0])


def _line(ts: float, system: str, question: str) -> str:
    req: dict[str, Any] = {
        "model": "claude-sonnet-4-5", "max_tokens": 100,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": question}]}
    return json.dumps({"timestamp": ts, "request": req})


def test_a_retry_does_not_prove_a_clock_stable(tmp_path: Path) -> None:
    t0 = 1709280000
    clock = "Current time: 14:03:27. " + RULES
    logs = {
        "retry.jsonl": [_line(t0, clock, "q"), _line(t0 + 3, clock, "q")],
        # another question in the same second, then the first one's retry
        "mixed.jsonl": [_line(t0, clock, "q"), _line(t0 + 0.5, clock, "other"),
                        _line(t0 + 3, clock, "q")],
    }
    for name, lines in logs.items():
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        found = [f for f in lint_paths(path).findings if f.code == "PC101"]
        assert [f.details["match"] for f in found] == ["14:03:27"], name
    # distinct requests over more than a second still prove it stable
    path = tmp_path / "stable.jsonl"
    path.write_text("\n".join([_line(t0, clock, "q"), _line(t0 + 5, clock, "other")]) + "\n",
                    encoding="utf-8")
    assert [f for f in lint_paths(path).findings if f.code == "PC101"] == []
