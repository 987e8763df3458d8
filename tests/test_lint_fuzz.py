"""Hypothesis fuzz: ``promptcache lint`` never raises, whatever the input (>= 2,000 examples per
input kind). Runs the CLI's :func:`main` in-process on stdin, with ``--stdin-filename``
choosing the input kind; the exit code is always 0, 1 or 2 and an error is one line."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptcache.lint.cli import main

KINDS = ["req.json", "log.jsonl", "t.j2", "p.yaml", "p.toml", "p.prompty", "p.md", "m.py"]

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                      st.text(max_size=40),
                      st.sampled_from(["2025-05-04 14:03:27", "7c1e2a90-4b3d-4f6e-9a21-5d8c0b7e3f44",
                                       "", "  \n", "{{ now() }}", "text", "tool_use", "ephemeral"]))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["model", "system", "messages", "tools", "role", "content",
                                     "type", "text", "cache_control", "ttl", "name", "input",
                                     "instructions", "prompt_cache_key", "request", "usage"]),
                    inner, max_size=5)), max_leaves=25)
requestish = st.fixed_dictionaries({
    "model": st.sampled_from(["claude-sonnet-4-5", "gpt-5", "nope", "claude-haiku-4-5"]),
    "messages": st.lists(st.fixed_dictionaries({
        "role": st.sampled_from(["user", "assistant", "system", "tool", "developer"]),
        "content": st.one_of(st.text(max_size=30), st.lists(st.fixed_dictionaries({
            "type": st.sampled_from(["text", "image", "thinking", "tool_use", "tool_result"]),
            "text": st.text(max_size=20),
            "cache_control": st.sampled_from([{"type": "ephemeral"}, {"type": "ephemeral",
                                                                       "ttl": "1h"}, None])}),
            max_size=3))}), max_size=4),
}, optional={"system": st.one_of(st.text(max_size=30), st.lists(st.fixed_dictionaries({
    "type": st.just("text"), "text": st.text(max_size=30),
    "cache_control": st.just({"type": "ephemeral"})}), max_size=5)),
    "cache_control": st.just({"type": "ephemeral"}), "prompt_cache_key": st.text(max_size=8)})
template_text = st.lists(st.one_of(
    st.text(max_size=20),
    st.sampled_from(["{{ ", " }}", "{% if x %}", "{% endif %}", "{# c #}", "{{ now() }}",
                     "{current_date}", "{{$time}}", "---\n", "system: ", "prompt = \"\"\"",
                     "\"\"\"", "def f(", "import datetime\n", "datetime.now()", "\x00", "\ud800"])),
    max_size=12).map("".join)


def _stdin(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return json.dumps(value).encode()


def _check(kind: str, data: bytes) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["-", "--stdin-filename", kind, "--format", "json"], stdin=data, stdout=out,
                stderr=err)
    assert code in (0, 1, 2)
    if code == 2:
        lines = err.getvalue().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{kind}: error: "), err.getvalue()
    json.loads(out.getvalue())


FUZZ = settings(max_examples=2000, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@FUZZ
@given(data=st.one_of(json_value, requestish, template_text, st.binary(max_size=64)))
def test_cli_never_raises(kind: str, data: Any) -> None:
    if kind == "log.jsonl" and isinstance(data, (dict, list)):
        data = json.dumps(data) + "\n" + json.dumps(data)
    _check(kind, _stdin(data))
