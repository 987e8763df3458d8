"""A GPT-5.6+ breakpoint's own ``ttl`` (openai-python 3.57.0 ``PromptCacheBreakpoint.ttl``:
"When `ttl` is omitted, the breakpoint inherits the request's `prompt_cache_options.ttl`"):
read by the renderer, written with that lifetime by the local backend, and used by the diff."""

from __future__ import annotations

from typing import Any

import pytest

from promptcache._errors import InvalidRequestError
from promptcache.diff import diff
from promptcache.prefix import render
from tests.cases import filler

LONG = filler(1500)


def _body(marker: dict[str, Any], options: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-5.6", "max_output_tokens": 2, "input": [
        {"role": "developer", "content": [{"type": "input_text", "text": LONG,
                                           "prompt_cache_breakpoint": marker}]},
        {"role": "user", "content": "hi"}]}
    if options is not None:
        body["prompt_cache_options"] = options
    return body


def _marked_ttl(body: dict[str, Any]) -> str | None:
    view = render(body, "openai-responses")
    return next(s.breakpoint.ttl for s in view.segments if s.breakpoint is not None)


def test_renderer_reads_the_breakpoints_own_ttl_else_the_requests() -> None:
    assert _marked_ttl(_body({"mode": "explicit", "ttl": "12h"})) == "12h"
    assert _marked_ttl(_body({"mode": "explicit"}, {"mode": "implicit", "ttl": "12h"})) == "12h"
    assert _marked_ttl(_body({"mode": "explicit"})) == "30m"
    with pytest.raises(InvalidRequestError, match=r"prompt_cache_breakpoint\.ttl"):
        render(_body({"mode": "explicit", "ttl": 12}), "openai-responses")


def test_backend_keeps_a_12h_breakpoint_past_the_requests_30m() -> None:
    from promptcache.local.testing import SMALL_MODEL, LocalBackend

    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as backend:
        client = backend.openai()
        body = _body({"mode": "explicit", "ttl": "12h"})
        first = client.responses.create(**body)
        d = first.usage.input_tokens_details
        # the marked prefix writes for 12h, the implicit breakpoint on "hi" for the request's 30m
        assert d.cache_write_tokens_details.ttl_12h_tokens > 0
        assert d.cache_write_tokens_details.ttl_30m_tokens > 0
        marked = d.cache_write_tokens_details.ttl_12h_tokens
        backend.clock.advance(2 * 3600)  # the 30m entry is gone, the 12h one is not
        again = client.responses.create(**body)
        assert again.usage.input_tokens_details.cached_tokens == marked
        plain = _body({"mode": "explicit"})
        plain["input"][0]["content"][0]["text"] = LONG + " other"
        client.responses.create(**plain)
        backend.clock.advance(2 * 3600)
        assert client.responses.create(**plain).usage.input_tokens_details.cached_tokens == 0


def test_diff_gives_a_12h_breakpoint_its_own_lifetime() -> None:
    a = _body({"mode": "explicit", "ttl": "12h"})
    b = _body({"mode": "explicit", "ttl": "12h"})
    b["input"][1]["content"] = "hello again"
    later = diff(a, b, timestamps=(0, 2 * 3600))
    assert not any(c.code == "ttl_expired" for c in later.causes)
    assert next(c for c in later.checks if c.name == "gap < TTL").passed is True
    short = _body({"mode": "explicit"})
    short_b = _body({"mode": "explicit"})
    short_b["input"][1]["content"] = "hello again"
    assert any(c.code == "ttl_expired" for c in diff(short, short_b, timestamps=(0, 7200)).causes)
