"""Regression tests for new-user trial 14, finding F12: Python-source lint reports a list
reordered in place at random (``random.shuffle(x)``, ``x.sort(key=<random>)``) before it reaches
the cached prefix, as it reports ``random.sample(...)``."""

from __future__ import annotations

import textwrap

import pytest

from promptcache.lint.api import lint_text

HEAD = """\
import random
from random import shuffle
import anthropic
client = anthropic.Anthropic()
EXAMPLES = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]

"""


def _lint(body: str) -> list[tuple[str, str]]:
    found = lint_text(HEAD + textwrap.dedent(body), "app.py")
    return [(f.code, f.message) for f in found]


@pytest.mark.parametrize("body,origin,sink", [
    ("""\
     def f(q):
         rules = ["r1", "r2", "r3"]
         random.shuffle(rules)
         return client.messages.create(model="claude-sonnet-4-6", max_tokens=5,
                                       system="\\n".join(rules),
                                       messages=[{"role": "user", "content": q}])
     """, "random.shuffle(rules)", "system="),
    ("""\
     def f(q, tools):
         shuffle(tools)
         return client.messages.create(model="claude-sonnet-4-6", max_tokens=5, tools=tools,
                                       messages=[{"role": "user", "content": q}])
     """, "shuffle(tools)", "tools="),
    ("""\
     def f(q):
         rules = ["r1", "r2", "r3"]
         rules.sort(key=lambda _: random.random())
         return client.messages.create(model="claude-sonnet-4-6", max_tokens=5,
                                       system=" ".join(rules),
                                       messages=[{"role": "user", "content": q}])
     """, "rules.sort(", "system="),
    ("""\
     def f(q):
         shots = list(EXAMPLES)
         random.shuffle(shots)
         return client.messages.create(model="claude-sonnet-4-6", max_tokens=5, system="Rules.",
                                       messages=shots + [{"role": "user", "content": q}])
     """, "random.shuffle(shots)", "messages[0]"),
])
def test_in_place_random_reordering_is_reported(body: str, origin: str, sink: str) -> None:
    found = _lint(body)
    assert len(found) == 1, found
    code, message = found[0]
    assert code == "PC103"
    assert origin in message and f"flows into {sink}" in message


@pytest.mark.parametrize("body", [
    # seeded per conversation: the same order for the conversation's requests
    """\
    def f(q, conv_id):
        rules = ["r1", "r2", "r3"]
        random.Random(conv_id).shuffle(rules)
        rng = random.Random(conv_id)
        rng.shuffle(rules)
        return client.messages.create(model="claude-sonnet-4-6", max_tokens=5,
                                      system="\\n".join(rules),
                                      messages=[{"role": "user", "content": q}])
    """,
    # rebound after the shuffle
    """\
    def f(q):
        shots = list(EXAMPLES)
        random.shuffle(shots)
        shots = list(EXAMPLES)
        return client.messages.create(model="claude-sonnet-4-6", max_tokens=5, system="Rules.",
                                      messages=shots + [{"role": "user", "content": q}])
    """,
    # a plain sort is deterministic
    """\
    def f(q):
        rules = ["r2", "r1"]
        rules.sort(key=len)
        return client.messages.create(model="claude-sonnet-4-6", max_tokens=5,
                                      system=" ".join(rules),
                                      messages=[{"role": "user", "content": q}])
    """,
])
def test_deterministic_orders_are_not_reported(body: str) -> None:
    assert _lint(body) == []
