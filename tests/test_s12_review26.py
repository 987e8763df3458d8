"""Review 26 of the twelfth session's tracker and wrapper fixes.

* A request whose usage is unknown (a stream dropped unread, recorded since ee15557 as
  unknown; one left early; an OpenAI chat stream without include_usage) was the session's
  baseline: the next request, reading 0 after the request before it wrote, was compared with
  counts of None and its collapse went unreported.
* A model new to the session (f3bbb0e compares it with the session's last request, a switch)
  was checked for a prefix_regression against the other model's read and write: a summariser
  on Haiku reading a shared prompt was "expected" to read the Sonnet chat's 9,100 tokens.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from promptcache.local.testing import LocalBackend
from promptcache.sdk import wrap
from promptcache.usage import UsageTracker, parse_usage
from promptcache.usage.record import UsageRecord

T0 = 1_780_304_400.0
MODEL = "claude-sonnet-4-6"


def _anthropic(model: str, start: float, read: int | None, write: int | None,
               session: str = "conv-A") -> UsageRecord:
    rec = parse_usage({"type": "message", "model": model, "usage": {
        "input_tokens": 16, "output_tokens": 4, "cache_read_input_tokens": read or 0,
        "cache_creation_input_tokens": write or 0,
        "cache_creation": {"ephemeral_5m_input_tokens": write or 0,
                           "ephemeral_1h_input_tokens": 0}}})
    update: dict[str, Any] = {"start": start, "session": session}
    if read is None:
        update.update(cache_read=None, cache_creation_5m=None, cache_creation_1h=None,
                      cache_creation=None, input_tokens=None)
    return rec.model_copy(update=update)


def _kinds(events: Any) -> list[str]:
    return [e.kind for e in events]


def test_unknown_usage_is_no_session_baseline() -> None:
    t = UsageTracker(warn=False)
    t.add(_anthropic(MODEL, T0, 0, 3000))
    unknown = _anthropic(MODEL, T0 + 10, None, None)
    assert unknown.cache_read is None
    assert "collapse" not in _kinds(t.add(unknown))
    events = t.add(_anthropic(MODEL, T0 + 20, 0, 3000))  # within 5m: the entry was dropped
    assert "collapse" in _kinds(events)


def test_model_switch_is_no_prefix_regression_against_the_other_model() -> None:
    t = UsageTracker(warn=False)
    t.add(_anthropic(MODEL, T0, 0, 9000))
    t.add(_anthropic(MODEL, T0 + 10, 9000, 100))
    summary = t.add(_anthropic("claude-haiku-4-5", T0 + 15, 4500, 500))
    assert "prefix_regression" not in _kinds(summary)
    # the chat's own next turn is still checked against the chat's last turn
    events = t.add(_anthropic(MODEL, T0 + 30, 4000, 100))
    assert "prefix_regression" in _kinds(events)


def test_model_switch_collapse_names_the_previous_model() -> None:
    t = UsageTracker(warn=False)
    t.add(_anthropic(MODEL, T0, 0, 2016))
    events = [e for e in t.add(_anthropic("claude-sonnet-4-5", T0 + 20, 0, 2095))
              if e.kind == "collapse"]
    assert len(events) == 1 and events[0].data["previous_model"] == MODEL


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", hidden_size=32, layers=1, heads=2, kv_heads=1,
                      pool_mb=8) as b:
        yield b


def test_a_dropped_stream_does_not_hide_the_next_collapse(backend: LocalBackend) -> None:
    system = [{"type": "text", "text": " ".join(f"rule{i} holds." for i in range(900)),
               "cache_control": {"type": "ephemeral"}}]
    tracker = UsageTracker(warn=False)
    client = wrap(backend.anthropic(), tracker=tracker, lint="off", session="s1")

    def ask(**extra: Any) -> Any:
        return client.messages.create(model=MODEL, max_tokens=4, system=system,
                                      messages=[{"role": "user", "content": "hi"}], **extra)

    ask()
    ask()
    stream = ask(stream=True)
    del stream  # dropped unread: recorded as unknown at the next call
    gc.collect()
    backend.clock.advance(400)  # the 5m entry expires
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ask()
    reads = [r.cache_read for r in tracker.records]
    assert reads[2] is None and reads[3] == 0
    assert "collapse" in _kinds(tracker.events)


def test_a_dropped_last_stream_counts_in_the_trackers_summary(backend: LocalBackend) -> None:
    """README's pattern: the tracker given to wrap() is read directly, with no later call and
    no tracker_of(): the dropped stream (sent and billed) was missing from summary()."""
    tracker = UsageTracker(warn=False)
    client = wrap(backend.anthropic(), tracker=tracker, lint="off")
    client.messages.create(model=MODEL, max_tokens=4,
                           messages=[{"role": "user", "content": "first"}])
    stream = client.messages.create(model=MODEL, max_tokens=4, stream=True,
                                    messages=[{"role": "user", "content": "dropped"}])
    del stream
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert tracker.summary().requests == 2
    assert len(tracker.records) == 2
    assert "stream_usage_missing" in tracker.records[1].flags
