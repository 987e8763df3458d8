"""Concurrent cold requests on the local backend: an entry is readable only by requests that
arrived after its writer's response began (hosted-api-rules.md 1.9; case BR-21; trial 10 s9)."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import promptcache
from promptcache.local.accounting import (
    AnthropicUsageCounts,
    CacheLedger,
    Instant,
    ManualClock,
    Timeline,
    anthropic_breakpoints,
    commit_plan,
    plan_reads_and_writes,
)
from promptcache.local.template import TemplatedPrompt, apply_template
from promptcache.local.testing import SMALL_MODEL, LocalBackend
from tests.cases import filler

MODEL = "claude-sonnet-4-6"
N = 4


# ------------------------------------------------------------------------------------ ledger
class _Policy:
    provider = "anthropic"
    min_cacheable_tokens = 1024
    max_breakpoints = 4
    lookback_positions: int | None = 20
    cache_step_tokens: int | None = None
    explicit_breakpoints = False


def _prompt(question: str, salt: str = "unit") -> TemplatedPrompt:
    return apply_template(
        {
            "model": MODEL,
            "max_tokens": 8,
            "system": [
                {"type": "text", "text": filler(1200, salt), "cache_control": {"type": "ephemeral"}}
            ],
            "messages": [{"role": "user", "content": question}],
        },
        "anthropic",
    )


def _plan_usage(
    prompt: TemplatedPrompt, ledger: CacheLedger, clock: ManualClock, arrived: Instant | None
) -> tuple[AnthropicUsageCounts, Any]:
    plan = plan_reads_and_writes(
        prompt,
        anthropic_breakpoints(prompt, _Policy()),
        ledger,
        tenant_salt=b"t",
        now=clock.now(),
        min_tokens=1024,
        lookback_positions=20,
        available_tokens=10**9,
        arrived=arrived,
    )
    return AnthropicUsageCounts.from_plan(plan), plan


def test_timeline_orders_stamps_the_clock_cannot() -> None:
    clock = ManualClock(5.0)
    tl = Timeline(clock)
    a, b = tl.stamp(), tl.stamp()
    assert a.time == b.time == 5.0 and a < b and tl.stamps_issued == 2
    clock.advance(1)
    assert tl.stamp() > b


def test_entry_is_absent_for_requests_that_arrived_before_its_writer_responded() -> None:
    ledger, clock = CacheLedger(), ManualClock()
    tl = Timeline(clock)
    writer_arrived = tl.stamp()
    early = tl.stamp()  # arrives while the writer is still prefilling
    clock.advance(2.0)
    usage, plan = _plan_usage(_prompt("a"), ledger, clock, writer_arrived)
    response_start = tl.stamp()
    commit_plan(plan, ledger, available_at=response_start)
    prefix = usage.cache_creation_input_tokens
    assert prefix > 1024 and usage.cache_read_input_tokens == 0

    # the early request runs after the writer (requests are serialised) but may not read
    clock.advance(1.0)
    usage_early, plan_early = _plan_usage(_prompt("b"), ledger, clock, early)
    assert (usage_early.cache_read_input_tokens, usage_early.cache_creation_input_tokens) == (
        0,
        prefix,
    )
    # an entry not yet available is left in place, not dropped
    assert len(ledger) == 1
    commit_plan(plan_early, ledger, available_at=tl.stamp())
    entry = ledger.get(plan.keys[plan.writes[0].span_index], clock.now())
    assert entry is not None
    # its second write keeps the first availability and restarts the TTL at the later start
    assert entry.available_at == response_start
    assert entry.expires_at == clock.now() + 300

    # a request that arrives after the writer's response began reads
    late = tl.stamp()
    usage_late, _ = _plan_usage(_prompt("c"), ledger, clock, late)
    assert (usage_late.cache_read_input_tokens, usage_late.cache_creation_input_tokens) == (
        prefix,
        0,
    )
    # and so does one that arrived between the writer's response start and its end
    assert entry.available_to(Instant(response_start.time, response_start.seq + 1))
    assert not entry.available_to(response_start)
    assert entry.available_to(None)


def test_entries_without_availability_are_visible_to_all() -> None:
    """Callers that pass no stamps (the OpenAI routes, older callers) keep the old behaviour."""
    ledger, clock = CacheLedger(), ManualClock()
    usage, plan = _plan_usage(_prompt("a"), ledger, clock, None)
    commit_plan(plan, ledger)
    again, _ = _plan_usage(_prompt("b"), ledger, clock, Timeline(clock).stamp())
    assert again.cache_read_input_tokens == usage.cache_creation_input_tokens


def test_rewrite_with_shorter_lifetime_keeps_the_longer_entry() -> None:
    ledger, clock = CacheLedger(), ManualClock()
    tl = Timeline(clock)
    first = tl.stamp()
    ledger.put(b"k", 2000, "1h", clock.now(), available_at=first)
    ledger.put(b"k", 2000, "5m", clock.now(), available_at=tl.stamp())
    entry = ledger.get(b"k", clock.now())
    assert entry is not None and entry.ttl == "1h" and entry.available_at == first
    # an expired entry is replaced outright, availability included
    clock.advance(3601)
    later = tl.stamp()
    ledger.put(b"k", 2000, "5m", clock.now(), available_at=later)
    entry = ledger.get(b"k", clock.now())
    assert entry is not None and entry.available_at == later


# ------------------------------------------------------------------------------------ backend
@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", **SMALL_MODEL) as b:
        yield b


def _system(salt: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": filler(1200, salt), "cache_control": {"type": "ephemeral"}}]


def _hold_first_generation(backend: LocalBackend, arrivals: int) -> Callable[[], None]:
    """Make the engine's next generation wait until ``arrivals`` requests have arrived (or 5 s
    passed), so 'sent at the same instant' does not depend on thread scheduling. Returns the
    undo."""
    engine = backend.service.engine
    original = engine.generate
    held = threading.Event()

    def generate(*args: Any, **kwargs: Any) -> Any:
        if not held.is_set():
            held.set()
            timeline = getattr(backend.service, "timeline", None)
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline and (
                timeline is None or timeline.stamps_issued < arrivals
            ):
                time.sleep(0.01)
        return original(*args, **kwargs)

    engine.generate = generate  # type: ignore[method-assign]
    return lambda: delattr(engine, "generate")


def _usage(resp: Any) -> tuple[int, int]:
    return resp.usage.cache_read_input_tokens, resp.usage.cache_creation_input_tokens


def test_parallel_cold_requests_each_report_the_write(backend: LocalBackend) -> None:
    """Trial 10 s9 / BR-21: N requests sent at once on a cold prefix: N writes, 0 reads."""
    client = backend.anthropic()
    system = _system("parallel-cold")
    undo = _hold_first_generation(backend, backend.service.timeline.stamps_issued + N)
    try:
        with ThreadPoolExecutor(N) as pool:
            responses = list(
                pool.map(
                    lambda i: client.messages.create(
                        model=MODEL,
                        max_tokens=2,
                        system=system,
                        messages=[{"role": "user", "content": f"q{i}"}],
                    ),
                    range(N),
                )
            )
    finally:
        undo()
    usages = [_usage(r) for r in responses]
    prefix = max(w for _, w in usages)
    assert prefix > 1024
    assert usages == [(0, prefix)] * N
    # the block cache still reused the KV physically: no accounting violation either way
    assert backend.metrics().get("promptcache_accounting_violations_total", 0) == 0

    # a request sent after those responses began reads, as before
    later = client.messages.create(
        model=MODEL, max_tokens=2, system=system, messages=[{"role": "user", "content": "later"}]
    )
    assert _usage(later) == (prefix, 0)


def test_sequential_requests_still_read(backend: LocalBackend) -> None:
    client = backend.anthropic()
    system = _system("sequential")
    usages = [
        _usage(
            client.messages.create(
                model=MODEL, max_tokens=2, system=system, messages=[{"role": "user", "content": q}]
            )
        )
        for q in ("a", "b", "c")
    ]
    prefix = usages[0][1]
    assert prefix > 1024 and usages == [(0, prefix), (prefix, 0), (prefix, 0)]


@pytest.mark.parametrize("stream", [False, True])
def test_warm_then_fanout_writes_once_then_reads(backend: LocalBackend, stream: bool) -> None:
    """The builder strategy for BR-21 works offline: the first request writes, the rest read."""
    client = promptcache.wrap(backend.anthropic(), tracker=promptcache.UsageTracker(warn=False))
    system = _system(f"warm-then-fanout-{stream}")
    calls = [
        functools.partial(
            client.messages.create,
            model=MODEL,
            max_tokens=2,
            system=system,
            messages=[{"role": "user", "content": f"q{i}"}],
            stream=stream,
        )
        for i in range(N)
    ]
    results = promptcache.warm_then_fanout(calls)
    if stream:
        usages = []
        for s in results:
            start = next(e for e in s if e.type == "message_start")
            usages.append(_usage(start.message))
            for _ in s:
                pass
    else:
        usages = [_usage(r) for r in results]
    prefix = usages[0][1]
    assert prefix > 1024
    assert usages == [(0, prefix)] + [(prefix, 0)] * (N - 1)
