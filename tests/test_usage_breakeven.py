"""Break-even request counts and the cheapest TTL policy, checked against hand arithmetic."""

from __future__ import annotations

from decimal import Decimal

import pytest

from promptcache._errors import UnknownModelError
from promptcache.catalog import get_policy
from promptcache.usage import breakeven, explicit_prices, ttl_policy

M = Decimal(1_000_000)


def test_anthropic_5m_pays_after_one_read_and_1h_after_two() -> None:
    five = breakeven("claude-sonnet-4-5", 5_000, "5m")
    hour = breakeven("claude-sonnet-4-5", 5_000, "1h")
    assert (five.requests, hour.requests) == (2, 3)
    assert (five.write_multiplier, five.read_multiplier) == (1.25, 0.1)
    assert five.uncached_prefix_usd == 5_000 * 3 / M
    assert five.write_usd == 5_000 * Decimal("3.75") / M
    assert hour.write_usd == 5_000 * 6 / M and hour.read_usd == 5_000 * Decimal("0.3") / M
    # the defining inequality, both sides of the boundary
    for be in (five, hour):
        assert be.requests is not None
        assert be.cost_cached(be.requests) < be.cost_uncached(be.requests)
        assert be.cost_cached(be.requests - 1) >= be.cost_uncached(be.requests - 1)


def test_default_ttl_openai_and_below_minimum() -> None:
    assert breakeven("claude-opus-5", 5_000).ttl == "5m"
    auto = breakeven("gpt-4o", 5_000)
    assert auto.ttl is None and auto.write_multiplier == 1.0 and auto.requests == 2
    assert breakeven("gpt-5.6-sol", 5_000).ttl == "30m"
    low = breakeven("claude-haiku-4-5", 3_000, "5m")
    assert low.requests is None and "minimum 4096" in (low.reason or "")
    assert get_policy("claude-haiku-4-5").min_cacheable_tokens == 4096


def test_explicit_prices_define_the_multipliers() -> None:
    # a write at 3x and reads at half price: 3 + (n-1)/2 < n  <=>  n > 5
    odd = explicit_prices(input=2, output=1, cache_read=1, cache_write_5m=6)
    assert breakeven("claude-sonnet-4-5", 5_000, "5m", prices=odd).requests == 6
    free_reads_none = explicit_prices(input=2, output=1, cache_read=2, cache_write_5m=2.5)
    assert breakeven("claude-sonnet-4-5", 5_000, "5m", prices=free_reads_none).requests is None


def test_bad_inputs() -> None:
    with pytest.raises(UnknownModelError):
        breakeven("no-such-model-zz", 5_000)
    with pytest.raises(ValueError, match="TTL '30m' not offered"):
        breakeven("claude-sonnet-4-5", 5_000, "30m")
    with pytest.raises(ValueError):
        breakeven("claude-sonnet-4-5", -1)
    with pytest.raises(ValueError):
        ttl_policy("claude-sonnet-4-5", 5_000, 0)


def _sonnet_units(prefix: int) -> dict[str, Decimal]:
    return {"in": prefix * Decimal(3) / M, "w5": prefix * Decimal("3.75") / M,
            "w1": prefix * Decimal(6) / M, "r": prefix * Decimal("0.3") / M}


def test_short_gaps_choose_5m_and_price_exactly() -> None:
    res = ttl_policy("claude-sonnet-4-5", 20_000, 60, requests=10)
    u = _sonnet_units(20_000)
    assert res.best.name == "5m"
    assert res.option("none").cost == 10 * u["in"]
    assert res.option("5m").cost == u["w5"] + 9 * u["r"]
    assert res.option("1h").cost == u["w1"] + 9 * u["r"]
    assert res.option("5m+keepalive").pings == 0
    assert res.savings_vs_none == 10 * u["in"] - (u["w5"] + 9 * u["r"])


def test_long_gaps_choose_1h_and_keepalive_wins_for_few_requests() -> None:
    u = _sonnet_units(20_000)
    ping = (u["r"] + Decimal(3) / M + Decimal(15) / M)  # read + 1 input + 1 output token
    many = ttl_policy("claude-sonnet-4-5", 20_000, 400, requests=30)
    assert many.option("5m").cost == 30 * u["w5"]  # 400 s > 300 s: every request writes
    assert many.best.name == "1h"
    keep = many.option("5m+keepalive")
    assert keep.pings == 29  # one ping inside each 400 s gap (every 270 s)
    assert keep.cost == u["w5"] + 29 * u["r"] + 29 * ping
    few = ttl_policy("claude-sonnet-4-5", 20_000, 400, requests=5)
    assert few.best.name == "5m+keepalive"
    assert few.best.cost < few.option("1h").cost


def test_keepalive_spend_cap_falls_back_to_writes() -> None:
    u = _sonnet_units(20_000)
    ping = u["r"] + Decimal(18) / M
    capped = ttl_policy("claude-sonnet-4-5", 20_000, 400, requests=5,
                        keepalive_cap_usd=ping * 2)
    opt = capped.option("5m+keepalive")
    assert opt.capped and opt.pings == 2 and opt.ping_cost == 2 * ping
    assert opt.cost == 3 * u["w5"] + 2 * u["r"] + 2 * ping  # 2 gaps covered, 2 re-written
    max_pings = ttl_policy("claude-sonnet-4-5", 20_000, 400, requests=5, keepalive_max_pings=1)
    assert max_pings.option("5m+keepalive").pings == 1


def test_openai_retention_options() -> None:
    res = ttl_policy("gpt-5", 20_000, 600, requests=10)
    names = [o.name for o in res.options]
    assert names == ["none", "in_memory", "24h"]
    assert res.best.name == "24h"
    assert res.option("in_memory").cost == res.option("none").cost  # 600 s > 300 s retention
    nano = ttl_policy("gpt-5-nano", 20_000, 600, requests=10)
    assert [o.name for o in nano.options] == ["none", "in_memory"]
    sol = ttl_policy("gpt-5.6-sol", 20_000, 600, requests=10)
    assert sol.best.name == "30m"


def test_below_minimum_options_unavailable_and_tiers_apply() -> None:
    res = ttl_policy("claude-haiku-4-5", 3_000, 60, requests=5)
    assert res.best.name == "none"
    assert not res.option("5m").available
    big = ttl_policy("claude-haiku-5-5", 150_000, 60, requests=2)  # above the 100K tier
    assert big.option("none").cost == 2 * 150_000 * Decimal("0.5") / M
