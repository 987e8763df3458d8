"""The wrapper's live diff sees what a plain user turn strips on an older Claude model: the
previous (tool-loop) request's entries past its thinking block are lost, logged with the
diff's cause, and the usage record says the prefix was not kept (trial 19, finding 3: the
tracker flagged a prefix regression with no cause and the live diff said nothing)."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx2
import pytest

from promptcache.sdk import wrap
from promptcache.usage import UsageTracker
from tests._mockapi import anthropic_client

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK on 4.5

SYSTEM = "You are the support agent of a plant nursery. Answer from the care sheets. " * 60
THINKING = {"type": "thinking", "thinking": "Let me look at the care sheet. " * 30,
            "signature": "sig"}


def _message(model: str) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 1200,
                      "cache_creation_input_tokens": 300, "output_tokens": 5}}


def _calls(model: str, caplog: pytest.LogCaptureFixture) -> tuple[list[Any], str]:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=_message(json.loads(request.content)["model"]))

    tracker = UsageTracker()
    client = wrap(anthropic_client(handler), tracker=tracker, lint="off", session="s")
    m1 = [{"role": "user", "content": "Which fern needs the least light? " * 5}]
    m2 = [*m1, {"role": "assistant", "content": [
        THINKING, {"type": "tool_use", "id": "t1", "name": "sheet", "input": {"q": "fern"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "Bird's nest fern: low light. " * 10,
                                      "cache_control": {"type": "ephemeral"}}]}]
    m3 = [*m2[:-1], {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                  "content": "Bird's nest fern: low light. "
                                                  * 10}]},
          {"role": "assistant", "content": [THINKING, {"type": "text", "text": "That one."}]},
          {"role": "user", "content": [{"type": "text", "text": "And for a cactus?",
                                        "cache_control": {"type": "ephemeral"}}]}]
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        client.messages.create(model=model, max_tokens=10, system=system,  # type: ignore[arg-type]
                               messages=m2)
        client.messages.create(model=model, max_tokens=10, system=system,  # type: ignore[arg-type]
                               messages=m3)
    return tracker.records, caplog.text


def test_a_stripping_model_logs_the_lost_entries(caplog: pytest.LogCaptureFixture) -> None:
    records, log = _calls("claude-sonnet-4-5", caplog)
    assert "thinking_stripped" in log
    assert records[1].kept_prefix is False


def test_a_model_that_keeps_thinking_is_silent(caplog: pytest.LogCaptureFixture) -> None:
    records, log = _calls("claude-sonnet-4-6", caplog)
    assert "thinking_stripped" not in log and "diverges" not in log
    assert records[1].kept_prefix is True


def test_breakpoint_tokens_are_the_cached_prefix_sizes() -> None:
    # review 19: the hashes were of the stripped chain, the token counts of the request as sent
    from promptcache.catalog import find_policy
    from promptcache.planner import cached_prefix_tokens
    from promptcache.prefix import render

    model = "claude-sonnet-4-5"

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=_message(model))

    tracker = UsageTracker()
    client = wrap(anthropic_client(handler), tracker=tracker, lint="off", session="s")
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    msgs = [{"role": "user", "content": "Which fern needs the least light?"},
            {"role": "assistant", "content": [
                {**THINKING, "thinking": "Let me look at the care sheet. " * 300},
                {"type": "text", "text": "Bird's nest."}]},
            {"role": "user", "content": [{"type": "text", "text": "And a cactus?",
                                          "cache_control": {"type": "ephemeral"}}]}]
    client.messages.create(model=model, max_tokens=10, system=system,  # type: ignore[arg-type]
                           messages=msgs)
    view = render({"model": model, "max_tokens": 10, "system": system, "messages": msgs})
    ends, stripped = cached_prefix_tokens(view, find_policy(model))
    assert stripped
    expected = tuple(ends[s.index] for s in view.breakpoints())
    assert tracker.records[0].breakpoint_tokens == expected
    assert expected[-1] < view.segments[-1].end_token - 1000  # the thinking is left out
