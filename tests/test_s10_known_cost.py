"""One record of unknown cost made every cost of ``tracker.summary()`` None for good, with no
known-records figure as ``known_hit_rate`` gives for the hit rate (new-user trial 16)."""

from __future__ import annotations

from promptcache.usage import UsageRecord, UsageTracker, parse_usage


def test_known_cost_sums_the_priced_records_beside_an_unknown_one() -> None:
    tracker = UsageTracker(warn=False)
    priced = parse_usage({"model": "claude-sonnet-4-6", "usage": {
        "input_tokens": 1000, "output_tokens": 10, "cache_read_input_tokens": 4000,
        "cache_creation_input_tokens": 0}}, provider="anthropic")
    tracker.add(priced)
    alone = tracker.summary().cost
    assert alone is not None and alone > 0
    assert tracker.summary().known_cost == alone
    tracker.add(UsageRecord(provider="anthropic", model="claude-sonnet-4-6",
                            flags=("stream_usage_missing",)))
    summary = tracker.summary()
    assert summary.cost is None
    assert summary.known_cost == alone
    assert summary.as_dict()["known_cost_usd"] == str(alone)
