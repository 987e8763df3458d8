"""breakeven() follows the catalog's dated prices (trial 27): Sonnet 5.5 read 0.20 $/MTok
(0.1x of $2 input) before 2026-10-07 and 0.10 (0.05x) from then (hosted-api-rules.md 1.6,
source P1); the undated policy multiplier priced the earlier read at 0.05x, so breakeven's
read_usd disagreed with ttl_policy (price_record on the dated table) for the same date."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from promptcache.usage import breakeven, ttl_policy

BEFORE = datetime(2026, 9, 1, tzinfo=UTC)
AFTER = datetime(2026, 10, 8, tzinfo=UTC)


def test_read_price_before_and_after_the_change() -> None:
    early = breakeven("claude-sonnet-5-5", 5000, at=BEFORE)
    late = breakeven("claude-sonnet-5-5", 5000, at=AFTER)
    # 5000 tokens x $2 / MTok = $0.01 uncached; write x1.25 on both dates
    assert early.uncached_prefix_usd == late.uncached_prefix_usd == Decimal("0.01")
    assert (early.read_multiplier, early.read_usd) == (0.1, Decimal("0.001"))
    assert (late.read_multiplier, late.read_usd) == (0.05, Decimal("0.0005"))
    assert early.write_usd == late.write_usd == Decimal("0.0125")
    # (1.25 - 0.1) / 0.9 = 1.28 and (1.25 - 0.05) / 0.95 = 1.26: 2 requests either way
    assert early.requests == late.requests == 2


def test_breakeven_agrees_with_ttl_policy_on_the_same_date() -> None:
    for at in (BEFORE, AFTER):
        be = breakeven("claude-sonnet-5-5", 5000, "5m", at=at)
        pol = ttl_policy("claude-sonnet-5-5", 5000, 60, requests=3, at=at)
        assert pol.option("5m").cost == be.cost_cached(3)
        assert pol.option("none").cost == be.cost_uncached(3)
