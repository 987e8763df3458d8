"""UsageTracker: grouping, ratio-of-sums, thread/asyncio safety, alarms and diagnoses."""

from __future__ import annotations

import asyncio
import threading
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache.usage import (
    JsonlSink,
    MemorySink,
    UsageEvent,
    UsageRecord,
    UsageTracker,
    ZeroHitWarning,
    explicit_prices,
    otel_attributes,
    read_jsonl,
    set_span_usage,
)

PRICES = explicit_prices(input=3, output=15, cache_read=0.3, cache_write_5m=3.75,
                         cache_write_1h=6)


def rec(read: int = 0, write: int = 0, uncached: int = 10, out: int = 5, *,
        w1h: int = 0, **kw: Any) -> UsageRecord:
    fields: dict[str, Any] = {"provider": "anthropic", "model": "claude-sonnet-4-5",
                              "uncached_input": uncached, "cache_read": read,
                              "cache_write": write + w1h, "cache_write_5m": write,
                              "cache_write_1h": w1h, "output": out, **kw}
    return UsageRecord.model_validate(fields)


def test_groups_by_label_model_session_with_exact_sums() -> None:
    t = UsageTracker(default_prices=PRICES)
    t.add(rec(0, 1000, label="a", session="s1"))
    t.add(rec(1000, 0, label="a", session="s1"))
    t.add(rec(500, 0, label="b", model="claude-opus-5", session="s2"))
    by_label = t.by_label()
    assert by_label["a"].requests == 2 and by_label["b"].requests == 1
    assert by_label["a"].hit_rate == pytest.approx(1000 / (10 + 1000 + 10 + 1000))
    assert set(t.by_model()) == {"claude-sonnet-4-5", "claude-opus-5"}
    assert t.by_session()["s2"].cache_read == 500
    assert set(t.by_label_model()) == {("a", "claude-sonnet-4-5"), ("b", "claude-opus-5")}
    total = t.summary()
    assert total.requests == 3 and total.cache_read == 1500 and total.cache_write == 1000
    expected = sum((c.total for c in t.costs if c is not None), Decimal(0))
    assert total.cost == expected
    assert total.cost == (30 * 3 + 1500 * Decimal("0.3") + 1000 * Decimal("3.75") + 15 * 15) / (
        Decimal(10) ** 6)
    assert total.request_hit_rate == pytest.approx(2 / 3)
    assert total.as_dict()["cost_usd"] == str(total.cost)


def test_unknown_usage_makes_group_hit_rate_and_cost_unknown() -> None:
    t = UsageTracker(default_prices=PRICES)
    t.add(rec(100, 0, label="x"))
    t.add(UsageRecord(provider="vllm", model="qwen", input_total=3000, output=5, label="x"))
    s = t.by_label()["x"]
    assert s.requests_unknown == 1 and s.hit_rate is None and s.cost is None
    assert s.request_hit_rate == 1.0  # over the one known request


def test_known_hit_rate_leaves_out_only_the_unknown_records() -> None:
    t = UsageTracker(default_prices=PRICES)
    t.add(rec(300, 0, uncached=100))
    # a stream whose usage never arrived, and one whose read is known but not its prompt
    t.add(UsageRecord(provider="openai", model="gpt-4o", flags=("stream_usage_missing",)))
    t.add(UsageRecord(provider="anthropic", model="claude-sonnet-4-5", cache_read=5000))
    s = t.summary()
    assert s.requests == 3 and s.requests_unknown == 2 and s.hit_rate is None
    assert s.known_hit_rate == 300 / 400  # the unknown records' 5000 read tokens left out
    assert s.as_dict()["known_hit_rate"] == 0.75
    every = UsageTracker(default_prices=PRICES)
    every.add(rec(300, 0, uncached=100))
    every.add(rec(0, 50, uncached=50))
    assert every.summary().known_hit_rate == every.summary().hit_rate == 300 / 500
    assert UsageTracker().summary().known_hit_rate is None


def test_catalog_prices_are_used_and_unknown_models_are_unpriced() -> None:
    t = UsageTracker()
    events = t.add(rec(1000, 0, model="claude-sonnet-4-5"))
    assert not events
    assert t.summary().cost == (10 * 3 + 1000 * Decimal("0.3") + 5 * 15) / Decimal(10) ** 6
    events = t.add(rec(1000, 0, model="no-such-model-x"))
    assert [e.kind for e in events] == ["unpriced"]
    assert t.summary().cost is None


def test_price_override_per_model() -> None:
    cheap = explicit_prices(input=1, output=1, cache_read=0.1, cache_write_5m=1.25)
    t = UsageTracker(prices={"claude-sonnet-4-5": cheap})
    t.add(rec(1000, 0, model="claude-sonnet-4-5-20250929"))  # dated snapshot resolves
    assert t.summary().cost == (10 + 100 + 5) / Decimal(10) ** 6


def test_thread_safe_aggregation_is_exact() -> None:
    t = UsageTracker(default_prices=PRICES, keep_records=False)
    mem = MemorySink()
    t2 = UsageTracker(default_prices=PRICES, sinks=[mem], keep_records=False)
    n_threads, per = 16, 500

    def work(i: int) -> None:
        for j in range(per):
            r = rec(j % 7, 3, 1, 2, label=f"l{i % 4}")
            t.add(r)
            t2.add(r)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    s = t.summary()
    assert s.requests == n_threads * per
    assert s.cache_read == n_threads * sum(j % 7 for j in range(per))
    assert s.cache_write == 3 * n_threads * per
    assert sum(v.requests for v in t.by_label().values()) == n_threads * per
    assert len(mem) == n_threads * per and t2.summary() == s


async def test_asyncio_add_with_jsonl_sink(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    with JsonlSink(path) as sink:
        t = UsageTracker(default_prices=PRICES, sinks=[sink])
        await asyncio.gather(*(t.aadd(rec(i, 0, request_id=f"r{i}")) for i in range(200)))
    s = t.summary()
    assert s.requests == 200 and s.cache_read == sum(range(200))
    back = read_jsonl(path)
    assert sorted(r.request_id or "" for r in back) == sorted(f"r{i}" for i in range(200))


def test_zero_hit_alarm_fires_once_after_warmup_with_callback_and_warning() -> None:
    seen: list[UsageEvent] = []
    t = UsageTracker(default_prices=PRICES, warmup=3, on_alarm=seen.append)
    with pytest.warns(ZeroHitWarning, match="zero cache hits after 3 cacheable requests"):
        for _ in range(6):
            t.add(rec(0, 8040, 500, label="agent"))  # BR-08 before the fix
    assert len(seen) == 1 and seen[0].data["requests"] == 3
    assert [e.kind for e in t.events].count("zero_hit_alarm") == 1


def test_no_alarm_for_uncacheable_or_hitting_traffic() -> None:
    t = UsageTracker(warmup=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(5):  # OpenAI prompt below the 1024-token minimum: not cacheable
            t.add(UsageRecord(provider="openai", model="gpt-4o", uncached_input=900,
                              cache_read=0, input_total=900, output=1))
        for read in (0, 2048, 0, 0):  # cacheable and hitting
            t.add(UsageRecord(provider="openai", model="gpt-4o", uncached_input=3000 - read,
                              cache_read=read, input_total=3000, output=1, label="big"))
    assert not [e for e in t.events if e.kind == "zero_hit_alarm"]
    t.add(UsageRecord(provider="openai", model="gpt-4o", uncached_input=3000, cache_read=0,
                      input_total=3000, output=1, label="cold", cacheable=True))
    with pytest.warns(ZeroHitWarning):
        t.add(UsageRecord(provider="openai", model="gpt-4o", uncached_input=3000, cache_read=0,
                          input_total=3000, output=1, label="cold"))


@pytest.mark.parametrize(("gap", "h1", "h2", "cause"), [
    (400.0, "p", "p", "ttl_expired"),
    (60.0, "p", "q", "prefix_changed"),
    (60.0, "p", "p", "unknown"),
    (60.0, None, None, "unknown"),
])
def test_collapse_classification(gap: float, h1: str | None, h2: str | None,
                                 cause: str) -> None:
    t = UsageTracker()
    t.add(rec(0, 4000, start=0.0, session="s", prefix_hash=h1))
    t.add(rec(4000, 0, start=30.0, session="s", prefix_hash=h1))
    events = t.add(rec(0, 4000, start=30.0 + gap, session="s", prefix_hash=h2))
    collapse = [e for e in events if e.kind == "collapse"]
    assert len(collapse) == 1 and collapse[0].data["cause"] == cause
    assert collapse[0].data["gap_seconds"] == gap


def test_one_hour_entries_do_not_expire_after_five_minutes() -> None:
    t = UsageTracker()
    t.add(rec(0, 0, w1h=4000, start=0.0, session="s"))
    events = t.add(rec(0, 0, w1h=4000, start=1200.0, session="s"))
    assert [e.data["cause"] for e in events if e.kind == "collapse"] == ["unknown"]
    t2 = UsageTracker()
    t2.add(rec(0, 4000, start=0.0, session="s"))
    events = t2.add(rec(0, 4000, start=1200.0, session="s"))
    assert [e.data["cause"] for e in events if e.kind == "collapse"] == ["ttl_expired"]


def test_regression_check_skips_gaps_beyond_ttl_and_other_sessions() -> None:
    t = UsageTracker()
    t.add(rec(30_000, 2_000, start=0.0, session="a"))
    t.add(rec(10_000, 0, start=1_000.0, session="a"))  # TTL passed: not a regression
    t.add(rec(10_000, 0, start=1_001.0, session="b"))  # first of its session
    assert not [e for e in t.events if e.kind == "prefix_regression"]


def test_cold_writes_need_overlap_and_same_prefix() -> None:
    t = UsageTracker(warmup=100)
    for i in range(3):  # sequential: each starts after the previous first token
        t.add(rec(0, 5000, start=float(10 * i), first_token=10 * i + 1.0, prefix_hash="h"))
    assert t.cold_write_groups() == []
    t.add(rec(0, 5000, start=100.0, end=103.0, prefix_hash="h"))
    t.add(rec(0, 5000, start=100.5, end=104.0, prefix_hash="other"))  # other prefix
    t.add(rec(0, 5000, start=101.0, end=104.0, prefix_hash="h"))
    groups = t.cold_write_groups()
    assert len(groups) == 1 and groups[0].writes == 2 and groups[0].redundant_write_tokens == 5000


class _Span:
    def __init__(self) -> None:
        self.attributes: dict[str, Any] = {}

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = value


def test_otel_attributes_use_semconv_names_and_inclusive_input() -> None:
    r = rec(2400, 120, 50, 310)
    attrs = otel_attributes(r)
    assert attrs == {
        "gen_ai.provider.name": "anthropic",
        "gen_ai.response.model": "claude-sonnet-4-5",
        "gen_ai.usage.input_tokens": 2570,
        "gen_ai.usage.output_tokens": 310,
        "gen_ai.usage.cache_read.input_tokens": 2400,
        "gen_ai.usage.cache_creation.input_tokens": 120,
    }
    span = _Span()
    assert set_span_usage(span, r) == attrs and span.attributes == attrs
    unknown = otel_attributes(UsageRecord(provider="vllm", input_total=10, output=1))
    assert "gen_ai.usage.cache_read.input_tokens" not in unknown
    assert "gen_ai.usage.input_tokens" not in unknown


def test_otel_helper_works_with_the_opentelemetry_api() -> None:
    trace = pytest.importorskip("opentelemetry.trace")
    span = trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
    assert set_span_usage(span, rec(1, 1))["gen_ai.usage.input_tokens"] == 12


_counts = st.integers(min_value=0, max_value=2_000_000)


@st.composite
def _records(draw: st.DrawFn) -> UsageRecord:
    if draw(st.booleans()):  # Anthropic-shaped: exclusive buckets, TTL split
        w5, w1 = draw(_counts), draw(_counts)
        return UsageRecord(provider="anthropic", model="claude-sonnet-4-5",
                           uncached_input=draw(_counts), cache_read=draw(_counts),
                           cache_write=w5 + w1, cache_write_5m=w5, cache_write_1h=w1,
                           output=draw(_counts), label=draw(st.sampled_from(["a", "b"])))
    total = draw(_counts)  # OpenAI-shaped: inclusive total
    read = draw(st.integers(min_value=0, max_value=total))
    return UsageRecord(provider="openai", model="gpt-4o", uncached_input=total - read,
                       cache_read=read, input_total=total, output=draw(_counts),
                       label=draw(st.sampled_from(["a", "b"])))


@settings(max_examples=60)
@given(st.lists(_records(), min_size=1, max_size=25))
def test_hit_rate_is_ratio_of_sums_in_unit_interval_and_cost_adds_up(
        records: list[UsageRecord]) -> None:
    t = UsageTracker(warn=False)
    for r in records:
        t.add(r)
    s = t.summary()
    reads = sum(r.cache_read or 0 for r in records)
    totals = sum(r.total_input or 0 for r in records)
    if totals:
        assert s.hit_rate == reads / totals
        assert s.hit_rate is not None and 0.0 <= s.hit_rate <= 1.0
    else:
        assert s.hit_rate is None
    costs = [c for c in t.costs]
    assert all(c is not None and c.total is not None for c in costs)
    assert s.cost == sum((c.total for c in costs if c is not None and c.total is not None),
                         Decimal(0))
    by_label = t.by_label()
    assert sum(v.requests for v in by_label.values()) == len(records)
    assert sum((v.cost or Decimal(0)) for v in by_label.values()) == s.cost
    assert s.savings is not None and s.input_cost is not None


def test_memory_stays_bounded_without_kept_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """keep_records=False: a long-running process does not grow with its request count."""
    import promptcache.usage.tracker as tracker_mod

    monkeypatch.setattr(tracker_mod, "EVENTS_KEPT", 5)
    monkeypatch.setattr(tracker_mod, "COLD_PREFIXES_KEPT", 3)
    t = tracker_mod.UsageTracker(keep_records=False, warn=False)
    for i in range(40):  # an unpriced model: one event per record; a new cold prefix each time
        t.add(UsageRecord(provider="anthropic", model="no-such-model", uncached_input=10,
                          cache_read=0, cache_write=2000, output=1, prefix_hash=f"p{i}",
                          start=float(i), end=float(i) + 1))
    assert len(t.events) == 5 and t.events[-1].record.prefix_hash == "p39"
    assert len(t._cold) <= 4
    assert t.summary().requests == 40


def test_concurrent_cold_writes_on_a_long_lived_prefix_are_still_detected() -> None:
    """The cold-prefix bound (d911465) evicts the prefix first *inserted*, not the one least
    recently written, and it applies with keep_records=True too (documented and committed as
    keep_records=False only). A hot prefix seen first becomes the eviction victim while a write
    on it is in flight, and the overlapping second write goes unreported (reported at
    e9cc1e6)."""
    import promptcache.usage.tracker as tracker_mod

    def write(h: str, start: float, end: float) -> UsageRecord:
        return UsageRecord(provider="anthropic", model="claude-sonnet-4-6", uncached_input=10,
                           cache_read=0, cache_write=2000, output=1, prefix_hash=h,
                           start=start, end=end)

    t = UsageTracker(warn=False)  # keep_records=True, the default
    t.add(write("hot", 0.0, 1.0))
    kept = getattr(tracker_mod, "COLD_PREFIXES_KEPT", 4096)
    for i in range(kept - 1):  # other prefixes, one cold write each
        t.add(write(f"p{i}", 10.0 + i, 10.5 + i))
    t.add(write("hot", 100_000.0, 100_010.0))  # A: a new cold write of the hot prefix
    t.add(write("other", 100_001.0, 100_002.0))  # a new prefix arrives meanwhile
    t.add(write("hot", 100_005.0, 100_012.0))  # B: sent before A's write was readable
    assert "concurrent_cold_writes" in [e.kind for e in t.events]


def test_sdk_response_meta_fields_outside_the_instance_dict_are_read() -> None:
    """parse.py's _to_dict reads model / id / service_tier from the object's ``__dict__`` since
    d911465. Fields the SDK model does not declare (both SDKs use extra="allow", extras live in
    ``__pydantic_extra__``) and objects that forward attributes are no longer seen: a batch
    service_tier is lost, so the tracker stops applying the batch discount (both read at
    e9cc1e6 through getattr)."""
    import anthropic.types
    import openai.types.chat

    from promptcache.usage import parse_usage

    msg = anthropic.types.Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [], "stop_reason": "end_turn", "stop_sequence": None,
        "service_tier": "batch",  # not a declared field of anthropic's Message: an extra
        "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 0,
                  "cache_creation_input_tokens": 0}})
    assert (msg.model_extra or {}).get("service_tier") == "batch"
    assert parse_usage(msg).service_tier == "batch"

    class Forwarding:  # a response wrapper that forwards attribute access
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    completion = openai.types.chat.ChatCompletion.model_validate({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o", "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}})
    r = parse_usage(Forwarding(completion))
    assert (r.model, r.request_id) == ("gpt-4o", "c1")


def test_clamped_record_keeps_hit_rate_cost_and_savings_consistent() -> None:
    # nu7 bug 2: cached_tokens 5000 > prompt_tokens 100 gave hit rate 50.0 and negative savings
    from promptcache.usage import parse_usage

    prices = explicit_prices(input=1.25, output=10, cache_read=0.125)
    tracker = UsageTracker(default_prices=prices, warn=False)
    events = tracker.add(parse_usage({"prompt_tokens": 100, "completion_tokens": 1,
                                      "prompt_tokens_details": {"cached_tokens": 5000}},
                                     model="gpt-5"))
    s = tracker.summary()
    assert s.hit_rate == 1.0 and s.cache_read == s.total_input == 100
    assert s.input_cost == Decimal("0.0000125")  # 100 read tokens at $0.125/M, not 5,000
    assert s.savings == Decimal("0.0001125") and s.savings > 0
    assert [e.kind for e in events] == ["usage_anomaly"]
    assert "input_parts_exceed_total" in events[0].message
