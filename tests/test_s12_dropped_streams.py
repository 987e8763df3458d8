"""A stream dropped unread and never closed (``create(stream=True)`` then garbage-collected)
is recorded (new-user trial 23): the request was sent and billed, but the tracker never saw
it. Recorded at the next observed call, or when the tracker is asked for, from the events read
before the drop (the input side of ``message_start``), else as unknown with a warning."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Iterator

import pytest

from promptcache.local.testing import LocalBackend
from promptcache.sdk import PromptCacheWarning, tracker_of, wrap
from promptcache.usage import UsageTracker

MODEL = "claude-sonnet-4-6"


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", hidden_size=32, layers=1, heads=2, kv_heads=1,
                      pool_mb=8) as b:
        yield b


def _ask(client, text: str, **extra):  # type: ignore[no-untyped-def]
    return client.messages.create(model=MODEL, max_tokens=8,
                                  messages=[{"role": "user", "content": text}], **extra)


def test_a_dropped_unread_stream_is_recorded_at_the_next_call(
        backend: LocalBackend, caplog: pytest.LogCaptureFixture) -> None:
    tracker = UsageTracker()
    client = wrap(backend.anthropic(), tracker=tracker, lint="off")
    caplog.set_level(logging.WARNING, logger="promptcache")
    stream = _ask(client, "never read", stream=True)
    del stream
    gc.collect()
    with pytest.warns(PromptCacheWarning, match="dropped unread and never closed"):
        _ask(client, "the next call")
    assert len(tracker.records) == 2
    dropped = tracker.records[0]
    assert dropped.total_input is None and "stream_usage_missing" in dropped.flags
    assert tracker.records[1].total_input is not None
    assert any("dropped unread and never closed" in r.getMessage() for r in caplog.records)


def test_a_partly_read_dropped_stream_keeps_what_it_showed(backend: LocalBackend) -> None:
    tracker = UsageTracker()
    client = wrap(backend.anthropic(), tracker=tracker, lint="off")
    stream = _ask(client, "read one event", stream=True)
    first = next(stream)  # message_start: the input side of the usage (no generator to close)
    assert first.type == "message_start"
    del stream
    gc.collect()
    records = tracker_of(client).records  # asking for the tracker records it too
    assert len(records) == 1
    assert records[0].total_input is not None and records[0].total_input > 0


def test_a_stream_read_to_its_end_is_recorded_once(backend: LocalBackend) -> None:
    tracker = UsageTracker()
    client = wrap(backend.anthropic(), tracker=tracker, lint="off")
    stream = _ask(client, "read through", stream=True)
    for _ in stream:
        pass
    del stream
    gc.collect()
    _ask(client, "next")
    assert len(tracker.records) == 2
    assert all(r.total_input is not None for r in tracker.records)


def test_an_async_dropped_stream_is_recorded(backend: LocalBackend) -> None:
    tracker = UsageTracker()
    client = wrap(backend.async_anthropic(), tracker=tracker, lint="off")

    async def main() -> None:
        stream = await _ask(client, "async, never read", stream=True)
        del stream
        gc.collect()
        with pytest.warns(PromptCacheWarning, match="dropped unread"):
            await _ask(client, "next")

    asyncio.run(main())
    assert len(tracker.records) == 2
    assert "stream_usage_missing" in tracker.records[0].flags
