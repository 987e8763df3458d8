"""The wrapper's prefix digests feed the usage tracker's collapse and cold-write checks.

New-user trial 13: the wrapper gave each record the digest up to its LAST breakpoint, which
moves forward every turn, so (F1) every collapse of a growing conversation was blamed on a
changed prefix, and (F4) a fan-out whose requests share a prefix but each carry a later
breakpoint (auto_cache) was never flagged as concurrent cold writes. Against the in-process
local backend.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
from collections.abc import Iterator
from typing import Any

import pytest

from promptcache.local.testing import SMALL_MODEL, LocalBackend
from promptcache.sdk import wrap
from promptcache.usage import UsageTracker
from tests.cases import filler

MODEL = "claude-sonnet-4-6"
SYSTEM = filler(1300, 7)


@pytest.fixture
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as b:
        yield b


def test_a_growing_chat_whose_entries_expire_is_not_a_prefix_change(
        backend: LocalBackend) -> None:
    tracker = UsageTracker()
    client = wrap(backend.anthropic(), tracker=tracker, auto_cache=True, session="chat")
    msgs: list[dict[str, Any]] = []
    for turn in range(3):
        if turn == 2:
            backend.clock.advance(301)  # the 5m entries expire on the backend's clock
        msgs = [*msgs, {"role": "user", "content": f"turn {turn} " + filler(30, turn)}]
        client.messages.create(model=MODEL, max_tokens=2, system=SYSTEM, messages=msgs)
        msgs = [*msgs, {"role": "assistant", "content": "ok"}]
    records = tracker.records
    assert records[2].cache_read == 0 and records[1].cache_read  # the collapse happened
    assert [r.kept_prefix for r in records] == [None, True, True]
    [collapse] = [e for e in tracker.events if e.kind == "collapse"]
    assert "prefix_changed" not in collapse.message


def test_an_auto_cache_fan_out_on_a_cold_prefix_is_flagged(backend: LocalBackend) -> None:
    tracker = UsageTracker()
    client = wrap(backend.anthropic(), tracker=tracker, auto_cache=True)
    calls = [functools.partial(client.messages.create, model=MODEL, max_tokens=1, system=SYSTEM,
                               messages=[{"role": "user", "content": f"item {i} " + filler(20, i)}])
             for i in range(4)]
    with cf.ThreadPoolExecutor(4) as pool:
        responses = list(pool.map(lambda f: f(), calls))
    assert all(r.usage.cache_read_input_tokens == 0 for r in responses)  # four cold writes
    hashes = [r.breakpoint_hashes for r in tracker.records]
    assert len({h[0] for h in hashes}) == 1 and len({h[-1] for h in hashes}) == 4
    # on a loaded machine a thread may start after another's response: count the requests
    # each sent before the first one's write was readable (the tracker's own overlap rule)
    first = min(tracker.records, key=lambda r: r.start or 0.0)
    ready = first.first_token if first.first_token is not None else first.end
    assert first.start is not None and ready is not None
    overlapping = sum(1 for r in tracker.records if r.start is not None and r.start < ready)
    cold = [e for e in tracker.events if e.kind == "concurrent_cold_writes"]
    if overlapping >= 2:
        assert cold, [e.kind for e in tracker.events]
        # one group: the four share the system prompt's entry, not their last breakpoint
        assert len(cold[-1].data["group"].records) >= overlapping
    else:  # pragma: no cover - only when the pool ran the calls one after another
        pytest.skip("the four calls did not overlap on this machine")
