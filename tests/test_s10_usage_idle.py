"""The usage tracker's session checks follow OpenAI's idle lifetime (hosted-api-rules.md
2.1-2.2), as ``promptcache diff`` and the local backend do: in-memory entries are usually
cleared after 5 min idle (a read is then possible, not certain) and always within 1 h; the
bounds come from the catalog (``CachePolicy.idle_bounds``), never from constants here."""

from __future__ import annotations

from typing import Any

from promptcache.catalog import find_policy
from promptcache.usage import parse_usage
from promptcache.usage.classify import classify_collapse
from promptcache.usage.record import UsageRecord
from promptcache.usage.tracker import UsageTracker

T0 = 1_790_000_000.0


def _rec(model: str, start: float, read: int, **update: Any) -> UsageRecord:
    rec = parse_usage({"object": "chat.completion", "model": model, "usage": {
        "prompt_tokens": 5000, "completion_tokens": 10, "total_tokens": 5010,
        "prompt_tokens_details": {"cached_tokens": read}}})
    return rec.model_copy(update={"start": start, "session": "s1", **update})


def _collapse(model: str, gap: float) -> Any:
    t = UsageTracker(warn=False)
    t.add(_rec(model, T0, 4096))
    events = [e for e in t.add(_rec(model, T0 + gap, 0)) if e.kind == "collapse"]
    assert len(events) == 1
    return events[0]


def _bounds(model: str) -> Any:
    pol = find_policy(model)
    assert pol is not None
    idle = pol.idle_bounds(None)
    assert idle is not None and idle.usual_s is not None
    return idle


def test_in_memory_gap_past_usual_clearing_is_a_likely_not_certain_expiry() -> None:
    idle = _bounds("gpt-4o")
    ev = _collapse("gpt-4o", idle.usual_s + 100)
    assert ev.data["cause"] == "ttl_expired"
    assert ev.data["level"] == "warning"
    assert ev.data["max_idle_seconds"] == idle.max_s
    assert "not certain" in ev.message and "possible" in ev.message


def test_in_memory_gap_past_the_certain_bound_is_a_certain_expiry() -> None:
    idle = _bounds("gpt-4o")
    ev = _collapse("gpt-4o", idle.max_s + 1)
    assert ev.data["cause"] == "ttl_expired"
    assert "level" not in ev.data
    assert "not certain" not in ev.message


def test_organisation_dependent_default_keeps_entries_up_to_the_24h_bound() -> None:
    # gpt-5 accepts in_memory and 24h: with no retention known, past 1 h is still uncertain
    idle = _bounds("gpt-5")
    assert idle.default_unknown
    ev = _collapse("gpt-5", 3601)
    assert ev.data["level"] == "warning" and ev.data["retention"] == "default"
    assert "organisation" in ev.message
    assert "level" not in _collapse("gpt-5", idle.max_s + 1).data


def test_24h_only_model_is_not_expired_after_five_minutes() -> None:
    pol = find_policy("gpt-5.5")
    assert pol is not None
    idle = pol.idle_bounds(None)
    assert idle is not None and idle.usual_s is None
    assert _collapse("gpt-5.5", 1800).data["cause"] == "unknown"
    assert _collapse("gpt-5.5", idle.max_s + 1).data["cause"] == "ttl_expired"


def test_prefix_change_beats_an_uncertain_expiry_but_not_a_certain_one() -> None:
    prev = _rec("gpt-4o", T0, 4096)
    late = _rec("gpt-4o", T0 + 1800, 0, kept_prefix=False)
    assert classify_collapse(prev, late, 300.0, max_ttl=3600.0) == "prefix_changed"
    assert classify_collapse(prev, late, 300.0) == "ttl_expired"  # a certain TTL: as before
    very_late = late.model_copy(update={"start": T0 + 3601})
    assert classify_collapse(prev, very_late, 300.0, max_ttl=3600.0) == "ttl_expired"


def test_regression_check_runs_within_the_usual_lifetime_of_a_24h_model() -> None:
    # a 24h-only model's entries live 24 h: a shortfall 30 min later is a regression
    t = UsageTracker(warn=False)
    t.add(_rec("gpt-5.5", T0, 2048, cache_write=1024, uncached_input=1928))
    events = t.add(_rec("gpt-5.5", T0 + 1800, 1024))
    assert [e.kind for e in events] == ["prefix_regression"]


def test_regression_check_is_skipped_past_the_usual_idle_clearing() -> None:
    idle = _bounds("gpt-4o")
    t = UsageTracker(warn=False)
    t.add(_rec("gpt-4o", T0, 2048, cache_write=1024, uncached_input=1928))
    inside = t.add(_rec("gpt-4o", T0 + idle.usual_s - 1, 1024))
    assert [e.kind for e in inside] == ["prefix_regression"]
    t2 = UsageTracker(warn=False)
    t2.add(_rec("gpt-4o", T0, 2048, cache_write=1024, uncached_input=1928))
    assert t2.add(_rec("gpt-4o", T0 + idle.usual_s + 1, 1024)) == ()


# ---------------------------------------------------------------- breakeven.ttl_policy


def _in_memory(pol: Any = None, **kwargs: Any) -> Any:
    from promptcache.usage import ttl_policy

    res = ttl_policy("gpt-4o", 20_000, 400, requests=5, policy=pol, **kwargs)
    return res.option("in_memory")


def test_ttl_policy_in_memory_lifetime_comes_from_the_catalog_idle_lifetime() -> None:
    from promptcache.catalog import get_policy
    from promptcache.catalog._policy import IdleRetention

    pol = get_policy("gpt-4o")
    longer = pol.model_copy(update={"idle_lifetime": {
        **(pol.idle_lifetime or {}), "in_memory": IdleRetention(usual="10m", max="1h")}})
    assert _in_memory(pol).reads == 0  # 400 s past the catalog's usual 5 min
    assert _in_memory(longer).reads == 4  # within this policy's usual 10 min
    assert _in_memory(pol, in_memory_seconds=600).reads == 4  # the argument still wins


def test_ttl_policy_policy_without_idle_lifetime_has_no_guessed_in_memory_lifetime() -> None:
    from promptcache.catalog import get_policy

    bare = get_policy("gpt-4o").model_copy(update={"idle_lifetime": None})
    opt = _in_memory(bare)
    assert not opt.available and "in_memory_seconds" in opt.note
    assert _in_memory(bare, in_memory_seconds=600).reads == 4
