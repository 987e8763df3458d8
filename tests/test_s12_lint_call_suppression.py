"""Regression tests for new-user trial 21: an inline suppression on an API call's line
silences that call's finding when the system message it sends was built before the call
(bound to a name, appended to a list, returned by a helper), as the README says; before, the
finding stayed tied to the message dict's own line and the call's comment was ignored. Also:
a parameter annotated as a set is iterated in an order that changes between processes."""

from __future__ import annotations

from promptcache.lint.api import lint_text
from promptcache.lint.finding import Finding

HEAD = ("from datetime import datetime\nfrom openai import OpenAI\n"
        "BASE = 'You are a research agent. ' * 500\nclient = OpenAI()\n")
SUPPRESS = "  # promptcache: ignore[PC101]"


def _lint(body: str) -> list[Finding]:
    return lint_text(HEAD + body, "app.py")


NAMED = ("def ask(q):\n"
         "    system_msg = {'role': 'system', 'content': f'Now: {datetime.now()} ' + BASE}\n"
         "    return client.chat.completions.create(model='gpt-4.1', "
         "messages=[system_msg, {'role': 'user', 'content': q}]){s}\n")
APPENDED = ("def ask(q):\n"
            "    msgs = [{'role': 'system', 'content': 'You are terse.'}]\n"
            "    msgs.append({'role': 'system', 'content': f'Now: {datetime.now()} ' + BASE})\n"
            "    msgs.append({'role': 'user', 'content': q})\n"
            "    return client.chat.completions.create(model='gpt-4.1', messages=msgs){s}\n")
HELPER = ("def build(q):\n"
          "    now = datetime.now()\n"
          "    return [{'role': 'system', 'content': f'Now: {now} ' + BASE}, "
          "{'role': 'user', 'content': q}]\n"
          "def ask(q):\n"
          "    return client.chat.completions.create(model='gpt-4.1', messages=build(q)){s}\n")


def test_call_line_suppression_silences_a_message_built_before_the_call() -> None:
    for name, body in (("named", NAMED), ("appended", APPENDED), ("helper", HELPER)):
        found = _lint(body.replace("{s}", ""))
        assert [f.code for f in found] == ["PC101"], name
        assert "client.chat.completions.create()" in found[0].message, name
        assert _lint(body.replace("{s}", SUPPRESS)) == [], name


def test_call_line_suppression_silences_that_call_only() -> None:
    body = ("def ask(q):\n"
            "    system_msg = {'role': 'system', 'content': f'Now: {datetime.now()} ' + BASE}\n"
            "    client.chat.completions.create(model='gpt-4.1', "
            "messages=[system_msg, {'role': 'user', 'content': q}])" + SUPPRESS + "\n"
            "    client.chat.completions.create(model='gpt-4o', "
            "messages=[system_msg, {'role': 'user', 'content': q}])\n")
    found = _lint(body)
    assert [f.code for f in found] == ["PC101"]
    assert found[0].details["suppress_lines"] == [8]  # the second call's line


def test_a_system_message_no_call_sends_is_still_reported() -> None:
    body = ("def build():\n"
            "    return {'role': 'system', 'content': f'Now: {datetime.now()} ' + BASE}\n")
    found = _lint(body)
    assert [f.code for f in found] == ["PC101"]
    assert "a role=system message" in found[0].message


def test_a_set_typed_parameter_joined_into_the_prompt_is_reported() -> None:
    # trial 21: "set iteration" missed a parameter annotated as a set
    for ann in ("set[str]", "frozenset[str]", "typing.AbstractSet[str]", "Set[str]"):
        body = ("import typing\nfrom typing import Set\n"
                f"def ask(q, tags: {ann}):\n"
                "    return client.chat.completions.create(model='gpt-4.1', messages=["
                "{'role': 'system', 'content': BASE + ', '.join(tags)}, "
                "{'role': 'user', 'content': q}])\n")
        found = _lint(body)
        assert [f.code for f in found] == ["PC203"], ann
        assert "the set parameter 'tags'" in found[0].message, ann
    stable = ("def ask(q, tags: set[str]):\n"
              "    note = 'beta on. ' if 'beta' in tags else ''\n"
              "    return client.chat.completions.create(model='gpt-4.1', messages=["
              "{'role': 'system', 'content': BASE + note + ', '.join(sorted(tags))"
              " + f' ({len(tags)} tags)'}, {'role': 'user', 'content': q}])\n")
    assert _lint(stable) == []
