"""Request settings in the local template: each one is encoded at the start of the tier its
change invalidates (hosted-api-rules.md 1.7, the catalog's invalidation table), and a text
document's title / context are content (review 14 F2, F3, F4)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from promptcache.catalog import get_policy
from promptcache.local.template import TemplatedPrompt, apply_template
from promptcache.local.testing import SMALL_MODEL, LocalBackend
from promptcache.prefix import render
from tests.cases import filler

CC = {"type": "ephemeral"}


def _doc(**extra: Any) -> dict[str, Any]:
    return {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                           "data": filler(300, "d")}, **extra}


def _payload(*, system: bool = True, doc: dict[str, Any] | None = None, size: int = 300,
             **params: Any) -> dict[str, Any]:
    content: list[dict[str, Any]] = [
        {"type": "text", "text": filler(300, "m")},
        *([doc] if doc is not None else []),
        {"type": "text", "text": "Summarise.", "cache_control": CC},
    ]
    body: dict[str, Any] = {
        "model": "claude-opus-5", "max_tokens": 4,
        "tools": [{"name": "f", "description": filler(size, "t"),
                   "input_schema": {"type": "object"}, "cache_control": CC}],
        "messages": [{"role": "user", "content": content}],
        **params,
    }
    if system:
        body["system"] = [{"type": "text", "text": filler(size, "s"), "cache_control": CC}]
    return body


def _shared(a: TemplatedPrompt, b: TemplatedPrompt) -> int:
    n = 0
    for x, y in zip(a.token_ids, b.token_ids, strict=False):
        if x != y:
            break
        n += 1
    return n


def _first_miss(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The first tier whose cache entry (ending at its last segment) ``after`` cannot read."""
    a, b = apply_template(before), apply_template(after)
    shared = _shared(a, b)
    for tier in ("tools", "system", "messages"):
        segs = [s for s in b.spans if s.segment.tier == tier]
        if segs and shared < segs[-1].end:
            return tier
    return "none"


def _schema(prop: str) -> dict[str, Any]:
    return {"type": "json_schema",
            "schema": {"type": "object", "properties": {prop: {"type": "string"}}}}


def test_output_format_change_invalidates_the_whole_cache() -> None:
    assert _first_miss(_payload(output_config={"format": _schema("a")}),
                       _payload(output_config={"format": _schema("b")})) == "tools"
    assert _first_miss(_payload(), _payload(output_config={"format": _schema("a")})) == "tools"


def test_effort_stays_a_messages_tier_setting_beside_a_format() -> None:
    fmt = _schema("a")
    assert _first_miss(_payload(output_config={"format": fmt, "effort": "low"}),
                       _payload(output_config={"format": fmt, "effort": "high"})) == "messages"
    assert _first_miss(_payload(), _payload(tool_choice={"type": "any"})) == "messages"


@pytest.mark.parametrize("system", [True, False])
def test_speed_toggle_keeps_tools_misses_system(system: bool) -> None:
    expected = "system" if system else "messages"
    assert _first_miss(_payload(system=system), _payload(system=system, speed="fast")) == expected


def test_citations_toggle_keeps_tools_misses_system() -> None:
    assert _first_miss(_payload(doc=_doc()),
                       _payload(doc=_doc(citations={"enabled": True}))) == "system"
    # enabled: false is the default (the same as omitting it): nothing changes
    assert _first_miss(_payload(doc=_doc()),
                       _payload(doc=_doc(citations={"enabled": False}))) == "none"


@pytest.mark.parametrize("field", ["title", "context"])
def test_document_title_and_context_are_content(field: str) -> None:
    before, after = _payload(doc=_doc()), _payload(doc=_doc(**{field: "Q3 report, draft"}))
    assert _first_miss(before, after) == "messages"
    assert apply_template(after).total_tokens > apply_template(before).total_tokens
    # the shared renderer (lint, diff, count) counts them too
    assert render(after).total_tokens > render(before).total_tokens


def test_settings_do_not_leak_into_the_request_params() -> None:
    body = _payload(output_config={"format": _schema("a"), "effort": "low"}, speed="fast")
    view = render(body)
    apply_template(view)
    assert view.params["output_config"] == {"format": _schema("a"), "effort": "low"}


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as b:
        yield b


def test_backend_usage_follows_the_tiers(backend: LocalBackend) -> None:
    client = backend.anthropic()
    size = 2 * get_policy("claude-opus-5").min_cacheable_tokens  # every tier cacheable
    tools_end = apply_template(_payload(size=size)).span_of("tools[0]").end

    def usage(body: dict[str, Any]) -> tuple[int, int]:
        u = client.messages.create(**body).usage
        return u.cache_read_input_tokens or 0, u.cache_creation_input_tokens or 0

    usage(_payload(size=size, output_config={"format": _schema("a")}))
    read, _ = usage(_payload(size=size, output_config={"format": _schema("b")}))
    assert read == 0
    usage(_payload(size=size))
    read, written = usage(_payload(size=size, speed="fast"))
    assert read == tools_end and written > 0


def test_web_search_toggle_keeps_tools_misses_system() -> None:
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    before = _payload()
    after = _payload()
    after["tools"] = [*after["tools"], search]
    assert _first_miss(before, after) == "system"
    assert apply_template(after).span_of("tools[1]").tokens == 0  # encoded in the system tier
    changed = _payload()
    changed["tools"] = [*changed["tools"], {**search, "max_uses": 5}]
    assert _first_miss(after, changed) == "system"
    # an ordinary tool added is a tool definition change: everything misses
    other = _payload()
    other["tools"] = [*other["tools"], {"name": "g", "input_schema": {"type": "object"}}]
    assert _first_miss(before, other) == "tools"
