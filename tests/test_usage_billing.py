"""Billing: one rate per token, TTL-split writes, OpenAI write rate, tiers, batch, unknowns."""

from __future__ import annotations

from decimal import Decimal

from promptcache.catalog import get_policy, get_prices
from promptcache.usage import UsageRecord, explicit_prices, parse_usage, price_record

SONNET = explicit_prices(input=3, output=15, cache_read=0.3, cache_write_5m=3.75,
                         cache_write_1h=6)
GPT56 = explicit_prices(input=5, output=30, cache_read=0.5, cache_write=6.25)
M = Decimal(1_000_000)


def _anth(uncached: int, read: int, w5: int, w1: int, out: int = 0, **kw: object) -> UsageRecord:
    return UsageRecord.model_validate({
        "provider": "anthropic", "uncached_input": uncached, "cache_read": read,
        "cache_write": w5 + w1, "cache_write_5m": w5, "cache_write_1h": w1, "output": out, **kw})


def test_one_hour_writes_are_not_priced_at_the_five_minute_rate() -> None:
    cost = price_record(_anth(10, 0, 1000, 1000, 100), SONNET)
    assert cost.cache_write == (1000 * Decimal("3.75") + 1000 * Decimal(6)) / M
    assert cost.total == (10 * 3 + 1000 * Decimal("3.75") + 1000 * 6 + 100 * 15) / M
    assert cost.notes == ()


def test_catalog_prices_for_a_real_model_match_hand_arithmetic() -> None:
    prices = get_prices("claude-sonnet-4-5")
    rec = _anth(120, 40_000, 2_000, 500, 700, model="claude-sonnet-4-5")
    cost = price_record(rec, prices)
    expected = (120 * prices.input + 40_000 * prices.cache_read + 2_000 * prices.cache_write_5m
                + 500 * prices.cache_write_1h + 700 * prices.output) / M
    assert cost.total == expected
    assert (prices.input, prices.cache_write_5m, prices.cache_write_1h) == (
        Decimal(3), Decimal("3.75"), Decimal(6))


def test_openai_write_rate_replaces_the_input_rate() -> None:
    rec = parse_usage({"model": "gpt-5.6-sol", "usage": {
        "prompt_tokens": 10_000, "completion_tokens": 100, "total_tokens": 10_100,
        "prompt_tokens_details": {"cached_tokens": 4_000, "cache_write_tokens": 3_000}}})
    cost = price_record(rec, GPT56)
    assert cost.uncached == 3_000 * 5 / M
    assert cost.cache_write == 3_000 * Decimal("6.25") / M
    assert cost.total == (3_000 * 5 + 4_000 * Decimal("0.5") + 3_000 * Decimal("6.25")
                          + 100 * 30) / M
    # the bug would bill 6000 tokens at the input rate plus 3000 at the write rate
    assert cost.total != (6_000 * 5 + 4_000 * Decimal("0.5") + 3_000 * Decimal("6.25")
                          + 100 * 30) / M


def test_unreported_writes_on_a_model_that_charges_them_make_the_cost_unknown() -> None:
    rec = parse_usage({"model": "gpt-5.6-sol", "usage": {
        "prompt_tokens": 10_000, "completion_tokens": 1, "total_tokens": 10_001,
        "prompt_tokens_details": {"cached_tokens": 4_000}}})
    cost = price_record(rec, GPT56)
    assert cost.cache_write is None and cost.total is None
    assert "cache writes not reported" in cost.notes
    # ...while a model without a write category bills them as uncached input
    old = price_record(rec, explicit_prices(input=2.5, output=10, cache_read=1.25))
    assert old.total == (6_000 * Decimal("2.5") + 4_000 * Decimal("1.25") + 10) / M


def test_haiku_55_tier_reprices_every_token_above_100k() -> None:
    prices = get_prices("claude-haiku-5-5")
    below = _anth(1_000, 94_000, 5_000, 0, 1_000, model="claude-haiku-5-5")  # exactly 100K
    above = _anth(1_000, 95_000, 5_000, 0, 1_000, model="claude-haiku-5-5")  # 101K
    c_below, c_above = price_record(below, prices), price_record(above, prices)
    assert c_below.tier_above is None
    assert c_below.total == (1_000 * Decimal("0.1") + 94_000 * Decimal("0.01")
                             + 5_000 * Decimal("0.125") + 1_000 * Decimal("0.5")) / M
    assert c_above.tier_above == 100_000
    assert c_above.total == (1_000 * Decimal("0.5") + 95_000 * Decimal("0.05")
                             + 5_000 * Decimal("0.625") + 1_000 * Decimal("2.5")) / M
    # the same tier from the catalog's TierRule applied to flat explicit prices
    flat = explicit_prices(input=0.1, output=0.5, cache_read=0.01, cache_write_5m=0.125,
                           cache_write_1h=0.2)
    rule_cost = price_record(above, flat, tier_rules=get_policy("claude-haiku-5-5").tier_rules)
    assert rule_cost.total == c_above.total


def test_openai_272k_long_context_rule() -> None:
    rec = parse_usage({"model": "gpt-5.5", "usage": {
        "prompt_tokens": 300_000, "completion_tokens": 1_000, "total_tokens": 301_000,
        "prompt_tokens_details": {"cached_tokens": 200_000}}})
    cost = price_record(rec, get_prices("gpt-5.5"))
    assert cost.tier_above == 272_000
    assert cost.total == (100_000 * 10 + 200_000 * 1 + 1_000 * 45) / M
    rule = price_record(rec, explicit_prices(input=5, output=30, cache_read=0.5),
                        tier_rules=get_policy("gpt-5.6-sol").tier_rules)
    assert rule.total == (100_000 * 10 + 200_000 * 1 + 1_000 * 45) / M


def test_batch_discount_from_service_tier_or_flag() -> None:
    rec = _anth(100, 1_000, 200, 0, 50, service_tier="batch", model="claude-sonnet-4-5")
    full = price_record(rec, SONNET, batch=False)
    half = price_record(rec, SONNET)  # catalog batch_multiplier 0.5
    assert get_policy("claude-sonnet-4-5").batch_multiplier == 0.5
    assert half.batch and not full.batch
    assert full.total is not None and half.total == full.total / 2
    assert price_record(rec.model_copy(update={"service_tier": None}), SONNET, batch=True) == half
    # a model the catalog does not know: the multiplier must be given, never guessed
    anon = rec.model_copy(update={"model": None})
    assert price_record(anon, SONNET).total is None
    assert price_record(anon, SONNET, batch_multiplier=0.5).total == half.total


def test_savings_and_unknown_tier() -> None:
    write_only = price_record(_anth(10, 0, 5_000, 0), SONNET)
    assert write_only.savings == -(5_000 * (Decimal("3.75") - 3)) / M  # a write nobody reads
    hit = price_record(_anth(10, 5_000, 0, 0), SONNET)
    assert hit.savings == 5_000 * (3 - Decimal("0.3")) / M
    unknown = UsageRecord(provider="anthropic", uncached_input=10, output=1)
    cost = price_record(unknown, get_prices("claude-haiku-5-5"))
    assert cost.total is None and "prompt length unknown" in cost.notes[0]


def test_unsplit_anthropic_writes_default_to_5m_or_given_ttl() -> None:
    rec = parse_usage({"input_tokens": 0, "cache_creation_input_tokens": 1_000,
                       "cache_read_input_tokens": 0, "output_tokens": 0})
    assert price_record(rec, SONNET).cache_write == 1_000 * Decimal("3.75") / M
    assert price_record(rec, SONNET, default_write_ttl="1h").cache_write == 6_000 / M
