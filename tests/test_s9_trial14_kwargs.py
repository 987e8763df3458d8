"""Regression tests for new-user trial 14, finding F4: Python-source lint follows a volatile
value through ``create(**params)``, where ``params`` is a dict literal or ``dict(...)`` call
assigned in the same function (its keys read as keywords)."""

from __future__ import annotations

import textwrap

import pytest

from promptcache.lint.api import lint_text

HEAD = """\
import datetime
from anthropic import Anthropic
from openai import OpenAI
client = Anthropic()
oai = OpenAI()

"""


def _lint(body: str) -> list[tuple[str, str]]:
    found = lint_text(HEAD + textwrap.dedent(body), "app.py")
    return [(f.code, f.message) for f in found]


@pytest.mark.parametrize("body,sink", [
    ("""\
     def f(q):
         params = {"model": "claude-sonnet-4-6", "max_tokens": 5,
                   "system": f"Now {datetime.datetime.now().isoformat()}",
                   "messages": [{"role": "user", "content": q}]}
         return client.messages.create(**params)
     """, "system= of client.messages.create()"),
    ("""\
     def f(q):
         params = dict(model="claude-sonnet-4-6", max_tokens=5,
                       system=f"Now {datetime.datetime.now().isoformat()}",
                       messages=[{"role": "user", "content": q}])
         return client.messages.create(**params)
     """, "system= of client.messages.create()"),
    ("""\
     def f(q):
         now = datetime.datetime.now().isoformat()
         params = {"model": "gpt-5", "instructions": f"Now {now}", "input": q}
         return oai.responses.create(**params)
     """, "instructions= of oai.responses.create()"),
    ("""\
     def f(q):
         now = datetime.datetime.now().isoformat()
         kw = {"messages": [{"role": "user", "content": f"Now {now}"},
                            {"role": "assistant", "content": "ok"},
                            {"role": "user", "content": q}]}
         return oai.chat.completions.create(model="gpt-5", **kw)
     """, "messages[0] of oai.chat.completions.create()"),
    ("""\
     def f(q):
         params = {"model": "claude-sonnet-4-6", "max_tokens": 5,
                   "messages": [{"role": "user", "content": q}]}
         params["system"] = f"Now {datetime.datetime.now().isoformat()}"
         return client.messages.create(**params)
     """, "system= of client.messages.create()"),
    ("""\
     def f(q):
         base = {"model": "claude-sonnet-4-6", "max_tokens": 5}
         params = {**base, "system": f"Now {datetime.datetime.now().isoformat()}",
                   "messages": [{"role": "user", "content": q}]}
         return client.messages.create(**params)
     """, "system= of client.messages.create()"),
    ("""\
     def f(q):
         params = dict(model="claude-sonnet-4-6", max_tokens=5,
                       messages=[{"role": "user", "content": q}])
         params.update(system=f"Now {datetime.datetime.now().isoformat()}")
         return client.messages.create(**params)
     """, "system= of client.messages.create()"),
])
def test_volatile_value_through_double_star_params_is_found(body: str, sink: str) -> None:
    found = _lint(body)
    assert len(found) == 1, found
    code, message = found[0]
    assert code == "PC101"
    assert sink in message


@pytest.mark.parametrize("body", [
    # the clock only in the newest user turn: not in the prefix
    """\
    def f(q):
        params = {"model": "claude-sonnet-4-6", "max_tokens": 5, "system": "Rules.",
                  "messages": [{"role": "user",
                                "content": f"{datetime.datetime.now()} {q}"}]}
        return client.messages.create(**params)
    """,
    # a dict the analysis cannot read (a parameter): nothing, no crash
    """\
    def f(q, params):
        return client.messages.create(**params, system="Rules.")
    """,
    # rebound to something else before the call
    """\
    def f(q, other):
        params = {"system": f"Now {datetime.datetime.now().isoformat()}"}
        params = other
        return client.messages.create(**params)
    """,
    # a later keyword replaces the volatile value, as in Python
    """\
    def f(q):
        params = dict(system=f"Now {datetime.datetime.now().isoformat()}")
        return client.messages.create(**{**params, "system": "Rules."})
    """,
])
def test_no_finding_where_the_value_does_not_reach_the_prefix(body: str) -> None:
    assert _lint(body) == []
