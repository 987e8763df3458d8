"""keepalive's first-ping worst case priced the whole prompt as a 1h write even when the
request's entries are all 5m ones, so a cap that covers many real pings allowed none
(new-user trial 16)."""

from __future__ import annotations

from decimal import Decimal

from promptcache.sdk._keepalive import _first_estimate
from promptcache.usage import UsageTracker

SYSTEM = "You answer questions about ferns and their care. " * 150


def _body(ttl: str | None) -> dict:
    marker = {"type": "ephemeral"} if ttl is None else {"type": "ephemeral", "ttl": ttl}
    return {"model": "claude-sonnet-4-6", "max_tokens": 0,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": marker}],
            "messages": [{"role": "user", "content": "hi"}]}


def test_a_request_with_only_5m_entries_is_priced_at_the_5m_write_rate() -> None:
    tracker = UsageTracker(keep_records=False)
    five = _first_estimate(tracker, "anthropic", _body(None), "anthropic", ["5m"])
    hour = _first_estimate(tracker, "anthropic", _body("1h"), "anthropic", ["1h"])
    unknown = _first_estimate(tracker, "anthropic", _body(None), "anthropic", None)
    assert five is not None and hour is not None
    # Sonnet 4.6 writes: 5m 1.25x, 1h 2x the input price (hosted-api-rules.md 1.6)
    assert hour / five == Decimal(2) / Decimal("1.25")
    assert unknown == hour  # entries not known: the longer TTL's rate, as before
    mixed = _first_estimate(tracker, "anthropic", _body("1h"), "anthropic", ["1h", "5m"])
    assert mixed == hour
