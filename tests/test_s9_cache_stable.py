"""``assert_cache_stable`` and the wrapper's live diff see what breaks a cached prefix without
changing its content (new-user trial 14, F5): a model switch, a tool_choice / thinking change
(hosted-api-rules.md 1.7) and breakpoints that no longer reach the earlier entry (the
20-position lookback, 1.4). Before, only a content divergence was checked, and the diff was run
with B's model for both requests, which hid a model switch."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from promptcache.sdk import assert_cache_stable
from tests.cases import filler

MODEL = "claude-sonnet-4-6"


def _request(turns: int = 1, marker_at: int | None = None, **extra: Any) -> dict[str, Any]:
    """A system prompt with a breakpoint (above the 2,048-token minimum) and ``turns`` user
    turns; ``marker_at``: the message that carries a second breakpoint."""
    messages: list[dict[str, Any]] = []
    for t in range(turns):
        messages.append({"role": "user", "content": [
            {"type": "text", "text": f"question {t}: " + filler(200, f"q{t}")}]})
        if t < turns - 1:
            messages.append({"role": "assistant", "content": f"answer {t}"})
    if marker_at is not None:
        messages[marker_at]["content"][0]["cache_control"] = {"type": "ephemeral"}
    return {"model": MODEL, "max_tokens": 64,
            "system": [{"type": "text", "text": filler(3000),
                        "cache_control": {"type": "ephemeral"}}],
            "messages": messages, **extra}


@pytest.mark.parametrize(("change", "cause"), [
    ({"model": "claude-opus-4-6"}, "model_changed"),
    ({"tool_choice": {"type": "any"}}, "tool_choice_changed"),
    ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "thinking_changed"),
])
def test_a_request_setting_change_fails(change: dict[str, Any], cause: str) -> None:
    a = _request(2, marker_at=2)
    b = {**copy.deepcopy(a), **change}
    with pytest.raises(AssertionError, match=cause):
        assert_cache_stable([a, b])


def test_the_same_request_and_a_next_turn_pass() -> None:
    a = _request(2, marker_at=2)
    assert_cache_stable([a, copy.deepcopy(a)])
    assert_cache_stable([a, _request(3, marker_at=4)])


def test_breakpoints_out_of_lookback_fail() -> None:
    # A's last entry is on message 0; B keeps every block but marks only a message 24
    # positions later: no breakpoint of B looks back far enough to read A's entry
    a = _request(13, marker_at=0)
    a["system"][0].pop("cache_control")
    b = _request(13, marker_at=24)
    b["system"][0].pop("cache_control")
    with pytest.raises(AssertionError, match="no longer reach"):
        assert_cache_stable([a, b])


def test_live_diff_warns_on_a_setting_change(caplog: pytest.LogCaptureFixture) -> None:
    from promptcache.sdk import tracker_of, wrap
    from tests._mockapi import anthropic_client
    from tests.test_sdk_wrap import Api

    client = wrap(anthropic_client(Api()), lint="off", session="s")
    a = _request(2, marker_at=2)
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        client.messages.create(**a)
        client.messages.create(**copy.deepcopy(a))
        assert "cached prefix is lost" not in caplog.text
        client.messages.create(**{**copy.deepcopy(a), "tool_choice": {"type": "any"}})
    assert "its tool_choice changed" in caplog.text and "tool_choice_changed" in caplog.text
    assert [r.kept_prefix for r in tracker_of(client).records][1:] == [True, False]
