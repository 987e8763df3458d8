"""Responses: the structured-output schema is a prefix to the system (developer) message, so a
``text.format`` change misses ``instructions`` too, as on Chat Completions (review 14 F6;
hosted-api-rules.md 2.1, "What can be cached" [O4][O6])."""

from __future__ import annotations

from typing import Any

from promptcache.local.template import apply_template
from promptcache.prefix import render

INSTRUCTIONS = "You are a careful assistant. " * 40


def _schema(prop: str) -> dict[str, Any]:
    return {"type": "json_schema", "name": "out", "strict": True,
            "schema": {"type": "object", "properties": {prop: {"type": "string"}},
                       "required": [prop], "additionalProperties": False}}


def _responses(prop: str) -> dict[str, Any]:
    return {"model": "gpt-5", "instructions": INSTRUCTIONS, "input": "hi",
            "text": {"format": _schema(prop)}}


def _chat(prop: str) -> dict[str, Any]:
    return {"model": "gpt-5", "response_format": {"type": "json_schema",
                                                  "json_schema": _schema(prop)},
            "messages": [{"role": "system", "content": INSTRUCTIONS},
                         {"role": "user", "content": "hi"}]}


def test_schema_renders_before_instructions() -> None:
    view = render(_responses("a"))
    paths = [s.path for s in view.segments]
    assert paths.index("text.format") < paths.index("instructions")
    assert view.find("text.format").tier == view.find("instructions").tier == "system"


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def test_schema_change_misses_the_instructions_like_chat() -> None:
    for build, system_path in ((_responses, "instructions"), (_chat, "messages[0].content")):
        a, b = apply_template(build("a")), apply_template(build("b"))
        shared = _common_prefix(a.token_ids, b.token_ids)
        # the system message's span is not a shared prefix: a cache entry there cannot be read
        assert shared < a.span_of(system_path).end, build.__name__
