"""Regression tests for new-user trial 24's review of this session's lint changes:

* clock words in capitals are whole words too: "CURRENTLY", "TIMEOUT", "LOCALE", "TIMELINE"
  counted as "current" / "time" / "local" (a capital after a capital was read as the start
  of an identifier's next part, as in "createdAt");
* a set-annotated parameter: ``set[str] | None``, ``Optional[set[str]]`` and a quoted
  ``"set[str]"`` were missed; a set of ints (``set[int]``, ``{3, 1, 2}``) iterates in the same
  order in every process (int hashes are not salted) and was reported;
* a suppression on an API call's line did not silence a system message a helper returns into
  the call's list (``messages=[system_message(), ...]``): it stayed reported at the dict.
"""

from __future__ import annotations

import pytest

from promptcache.lint.api import lint_text
from promptcache.lint.finding import Finding
from promptcache.lint.volatile import scan_text

HEAD = ("from datetime import datetime\nfrom typing import Optional, Union\n"
        "from openai import OpenAI\nBASE = 'You are a research agent. ' * 500\n"
        "client = OpenAI()\n")
SUPPRESS = "  # promptcache: ignore[PC101]"


def _lint(body: str) -> list[Finding]:
    return lint_text(HEAD + body, "app.py")


@pytest.mark.parametrize("text", [
    "CURRENTLY SUPPORTED SINCE 2024-03-01.", "TIMEOUT 10:30", "LOCALE 2024-03-01",
    "SENTENCES written 2024-03-01", "TIMELINE: beta 2024-03-01", "NOWHERE before 2024-03-01",
    "ATTENTION 12:00:01", "ONLY 12:00:01 ok"])
def test_capitalised_words_holding_a_clock_word_are_not_clock_words(text: str) -> None:
    assert scan_text(text) == []


@pytest.mark.parametrize("text,value", [
    ("DATES: 2024-03-01", "2024-03-01"), ("TIMESTAMPS: 10:30", "10:30"),
    ("TODAY: 2024-03-01", "2024-03-01"), ("createdAt: 2024-03-01", "2024-03-01"),
    ("dateUTC: 2024-03-01", "2024-03-01"), ("Message sent AT 14:03:22", "14:03:22"),
    ("currentDateTime: 2024-03-01", "2024-03-01")])
def test_clock_words_in_capitals_and_identifiers_still_count(text: str, value: str) -> None:
    assert [m.match for m in scan_text(text)] == [value]


def _set_body(ann: str) -> str:
    return (f"def ask(q, tags: {ann} = None):\n"
            "    return client.chat.completions.create(model='gpt-4.1', messages=["
            "{'role': 'system', 'content': BASE + ', '.join(str(t) for t in tags or ())}, "
            "{'role': 'user', 'content': q}])\n")


@pytest.mark.parametrize("ann", ["set[str] | None", "Optional[set[str]]",
                                 "Union[frozenset[str], None]", "'set[str]'", "set"])
def test_optional_and_quoted_set_parameters_are_reported(ann: str) -> None:
    assert [f.code for f in _lint(_set_body(ann))] == ["PC203"], ann


@pytest.mark.parametrize("ann", ["set[int]", "frozenset[int] | None",
                                 "set[tuple[int, int]]", "list[str]"])
def test_sets_of_numbers_keep_their_order(ann: str) -> None:
    assert _lint(_set_body(ann)) == [], ann


def test_a_literal_set_of_numbers_keeps_its_order() -> None:
    body = ("def ask(q):\n"
            "    return client.chat.completions.create(model='gpt-4.1', messages=["
            "{'role': 'system', 'content': BASE + ', '.join(str(i) for i in {S})}, "
            "{'role': 'user', 'content': q}])\n")
    assert _lint(body.replace("{S}", "{3, 1, 2}")) == []
    assert [f.code for f in _lint(body.replace("{S}", "{'b', 'a'}"))] == ["PC203"]


HELPER = ("def system_message():\n"
          "    return {'role': 'system', 'content': f'Now: {datetime.now()} ' + BASE}\n"
          "def ask(q):\n"
          "    return client.chat.completions.create(model='gpt-4.1', messages=["
          "system_message(), {'role': 'user', 'content': q}]){s}\n"
          "def ask2(q):\n"
          "    msgs = [system_message()]\n"
          "    msgs.append({'role': 'user', 'content': q})\n"
          "    return client.chat.completions.create(model='gpt-4.1', messages=msgs){s}\n")


def test_call_line_suppression_silences_a_helper_returned_system_message() -> None:
    found = _lint(HELPER.replace("{s}", ""))
    assert [f.code for f in found] == ["PC101"]
    assert "client.chat.completions.create()" in found[0].message
    assert _lint(HELPER.replace("{s}", SUPPRESS)) == []
    # a helper's message no call sends is still reported at the message
    assert [f.code for f in _lint(HELPER.split("def ask(q)")[0])] == ["PC101"]
