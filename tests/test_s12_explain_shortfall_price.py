"""explain on a usage-only log of tracker records (new-user trial 29): a shortfall was priced
at the list 5m-write rate minus the read rate, ignoring the batch discount, the region
multiplier, the prompt-length tier and whether the lost tokens were written or sent
uncached. It is priced as the tracker prices the record: billed cost minus the cost had the
lost tokens been read."""

from __future__ import annotations

from decimal import Decimal

import pytest

from promptcache.diff import explain
from promptcache.usage.record import UsageRecord
from promptcache.usage.tracker import UsageTracker


def _line(start: float, read: int, write: int, **extra: object) -> dict:
    return {"provider": "anthropic", "model": "claude-haiku-4-5", "uncached_input": 10,
            "cache_read": read, "cache_write": write, "cache_write_5m": write,
            "cache_write_1h": 0, "output": 10, "session": "s1", "start": start, **extra}


@pytest.mark.parametrize("extra", [{"service_tier": "batch"}, {}])
def test_shortfall_priced_as_the_tracker_prices_the_record(extra: dict) -> None:
    log = [_line(1_790_000_000.0, 0, 10_000, **extra),
           _line(1_790_000_010.0, 0, 10_000, **extra)]  # rewrote what it should have read
    row = explain(log).requests[1]
    assert row.status == "prefix_regression" and row.lost_tokens == 10_000
    t = UsageTracker(warn=False)
    billed = t.cost_of(UsageRecord.model_validate(log[1]))
    read = t.cost_of(UsageRecord.model_validate(
        {**log[1], "cache_read": 10_000, "cache_write": 0, "cache_write_5m": 0}))
    assert billed is not None and read is not None
    assert billed.input is not None and read.input is not None
    expected = float(billed.input - read.input)
    assert row.miss_cost_usd == pytest.approx(expected)
    if extra:  # batch halves it: 10,000 x (1.25 - 0.1) x $1/MTok x 0.5
        assert Decimal(str(row.miss_cost_usd)) == Decimal("0.00575")
