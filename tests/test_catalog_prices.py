"""Tests for promptcache.catalog prices: genai-prices lookup, fallback rows, overrides, and the
model-by-model comparison of the catalog's multipliers with the prices genai-prices carries.
"""

from __future__ import annotations

import os
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import genai_prices
import pytest
from genai_prices import data_snapshot

from promptcache._errors import CatalogError, UnknownModelError
from promptcache.catalog import (
    PRICES_ENV_VAR,
    UnknownPriceError,
    catalog_price_rows,
    catalog_prices_for,
    clear_overrides,
    genai_prices_for,
    get_policy,
    get_prices,
    known_models,
    load_overrides,
)

# A date after every price change the reference and genai-prices 0.2.3 record (Claude Sonnet
# 5.5's read cut on 2026-10-07), so the comparison does not depend on today's date.
AT = date(2026, 10, 15)

# Catalog models genai-prices 0.2.3 has no entry for. The comparison skips them (listed in the
# skip reason); get_prices falls back to the catalog's rows (Mythos 5 / 5.1) or raises.
GENAI_LACKS = {"claude-mythos-5", "claude-mythos-5-1", "claude-mythos-preview"}

# Explicit allow-list of disagreements between the catalog and genai-prices, each decided with
# hosted-api-rules.md. Everything not listed here must agree within rounding.
#   - gpt-5.5-pro: genai-prices publishes no cached-input rate (None); the reference's family
#     table omits -pro models. The catalog's read_multiplier is 1.0 (no discount, confirmed=false).
# Resolved in data (no longer disagreements, kept here as a record):
#   - claude-3-haiku: the general 1.25x / 0.1x rule vs billed $0.30 / $0.03 on $0.25 input. The
#     official table (A6) and genai-prices agree on the billed prices, so policies.toml carries
#     the billed ratios 1.2x / 0.12x.
NO_CACHED_READ_RATE = {"gpt-5.5-pro"}

TOLERANCE = Decimal("0.001")  # ratios of prices quoted to the cent / tenth of a cent


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PRICES_ENV_VAR, raising=False)
    clear_overrides()


def _close(a: Decimal, b: float) -> bool:
    return abs(a - Decimal(str(b))) <= TOLERANCE


@pytest.mark.parametrize("model_id", known_models())
def test_multipliers_agree_with_genai_prices(model_id: str) -> None:
    """THE comparison: cache_read/input, cache_write/input, cache_write_1h/input per model."""
    if model_id in GENAI_LACKS:
        pytest.skip(f"genai-prices {genai_prices.__version__} lacks {model_id}")
    policy = get_policy(model_id)
    g = genai_prices_for(model_id, at=AT)
    assert g is not None, f"genai-prices now carries {model_id}: remove it from GENAI_LACKS"

    if model_id in NO_CACHED_READ_RATE:
        assert g.cache_read is None
        assert policy.read_multiplier == 1.0
        assert policy.sources["read_multiplier"].confirmed is False
    else:
        assert g.cache_read is not None, model_id
        ratio = g.cache_read / g.input
        assert _close(ratio, policy.read_multiplier), (model_id, ratio, policy.read_multiplier)

    if policy.provider == "anthropic":
        assert g.cache_write is None
        pairs = [(g.cache_write_5m, "5m"), (g.cache_write_1h, "1h")]
    else:
        assert g.cache_write_5m is None and g.cache_write_1h is None
        pairs = [(g.cache_write, "30m")]
    for price, ttl in pairs:
        ours = policy.write_multipliers.get(ttl)
        if ours is None:  # no write fee in the catalog: genai-prices must not charge one
            assert price is None, (model_id, ttl, price)
        else:
            assert price is not None, (model_id, ttl)
            assert _close(price / g.input, ours), (model_id, ttl, price / g.input, ours)


@pytest.mark.parametrize("model_id", known_models())
def test_tier_rules_agree_with_genai_prices(model_id: str) -> None:
    if model_id in GENAI_LACKS:
        pytest.skip(f"genai-prices {genai_prices.__version__} lacks {model_id}")
    policy = get_policy(model_id)
    g = genai_prices_for(model_id, at=AT)
    assert g is not None
    assert [t.above_tokens for t in g.tiers] == [r.above_tokens for r in policy.tier_rules]
    for tier, rule in zip(g.tiers, policy.tier_rules, strict=True):
        assert tier.input is not None and tier.output is not None
        assert _close(tier.input / g.input, rule.input_multiplier)
        assert _close(tier.output / g.output, rule.output_multiplier)
        if g.cache_read is not None and tier.cache_read is not None:
            assert _close(tier.cache_read / g.cache_read, rule.cache_multiplier)


def test_models_genai_prices_lacks_are_exactly_the_listed_ones() -> None:
    lacking = {m for m in known_models() if genai_prices_for(m, at=AT) is None}
    assert lacking == GENAI_LACKS


def test_catalog_rows_agree_with_genai_prices() -> None:
    """The fallback rows copied from the reference match genai-prices wherever both exist."""
    # (model, field) pairs allowed to differ, each decided in prices.toml:
    allowed: set[tuple[str, str]] = set()
    checked = 0
    for model_id, rows in catalog_price_rows().items():
        if model_id in GENAI_LACKS:
            continue
        for row in rows:
            when = row["effective_from"] or AT
            ours = catalog_prices_for(model_id, at=when)
            theirs = genai_prices_for(model_id, at=when)
            assert ours is not None and theirs is not None
            if row.get("wins_over_genai_prices"):
                continue  # decided against genai-prices for this period (see the row's note)
            for field in ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h"):
                if (model_id, field) in allowed:
                    continue
                assert getattr(ours, field) == getattr(theirs, field), (model_id, when, field)
            if ours.cache_write is not None:
                assert ours.cache_write == theirs.cache_write, (model_id, when)
            checked += 1
    assert checked >= 25


# ------------------------------------------------------------------------------ get_prices


def test_prices_from_genai_for_a_dated_snapshot() -> None:
    p = get_prices("claude-sonnet-4-5-20250929", at=AT)
    assert p.model_id == "claude-sonnet-4-5"
    assert p.provider == "anthropic"
    assert (p.input, p.output, p.cache_read) == (Decimal(3), Decimal(15), Decimal("0.3"))
    assert (p.cache_write_5m, p.cache_write_1h, p.cache_write) == (
        Decimal("3.75"),
        Decimal(6),
        None,
    )
    assert p.source.kind == "genai-prices"
    assert all(isinstance(getattr(p, f), Decimal) for f in ("input", "output", "cache_read"))


def test_openai_prices_and_snapshot() -> None:
    p = get_prices("openai/gpt-4o-2024-08-06", at=AT)
    assert (p.model_id, p.input, p.cache_read, p.output) == (
        "gpt-4o",
        Decimal("2.5"),
        Decimal("1.25"),
        Decimal(10),
    )
    assert p.cache_write is None  # no write fee before GPT-5.6


def test_dated_prices() -> None:
    # GPT-5.6 Sol: the reference's $5 table price for every date; the $4/$20 cut from
    # 2026-08-21 (genai-prices) is UNCONFIRMED in the reference (review 15 F11)
    assert get_prices("gpt-5.6", at=date(2026, 8, 1)).input == Decimal(5)
    later = get_prices("gpt-5.6-sol", at=datetime(2026, 9, 1, tzinfo=UTC))
    assert (later.input, later.cache_write) == (Decimal(5), Decimal("6.25"))
    assert later.source.kind == "catalog" and later.source.effective_from == date(2026, 7, 9)
    # Claude Sonnet 5.5 read: $0.20 before 2026-10-07, $0.10 from (genai-prices has no history,
    # the catalog row wins before the change)
    before = get_prices("claude-sonnet-5-5", at=date(2026, 10, 6))
    assert before.cache_read == Decimal("0.20") and before.source.kind == "catalog"
    after = get_prices("claude-sonnet-5-5", at=date(2026, 10, 7))
    assert after.cache_read == Decimal("0.1") and after.source.kind == "genai-prices"


def test_tier_rule_prices_whole_request() -> None:
    p = get_prices("claude-haiku-5-5", at=AT)
    assert [t.above_tokens for t in p.tiers] == [100_000]
    assert set(p.tier_counts) == {"input", "cache_read", "cache_write"}
    low, high = p.for_prompt(100_000), p.for_prompt(100_001)
    assert (low.input, low.output, low.cache_read) == (
        Decimal("0.1"),
        Decimal("0.5"),
        Decimal("0.01"),
    )
    assert (high.input, high.output, high.cache_read) == (
        Decimal("0.5"),
        Decimal("2.5"),
        Decimal("0.05"),
    )
    assert (high.cache_write_5m, high.cache_write_1h) == (Decimal("0.625"), Decimal(1))
    assert high.tiers == () and p.price("output", 250_000) == Decimal("2.5")
    sol = get_prices("gpt-6-sol", at=AT)
    assert sol.price("input", 272_001) == Decimal(4) and sol.price("output", 272_001) == Decimal(15)
    assert sol.price("input", 272_000) == Decimal(2)
    with pytest.raises(ValueError):
        p.for_prompt(-1)


def test_fallback_rows_for_models_genai_lacks() -> None:
    p = get_prices("claude-mythos-5-1", at=AT)
    assert p.source.kind == "catalog"
    assert p.source.url == "https://platform.claude.com/docs/en/about-claude/pricing"
    assert p.source.as_of is not None
    assert (p.input, p.cache_read, p.cache_write_5m, p.output) == (
        Decimal(10),
        Decimal("0.25"),
        Decimal("12.50"),
        Decimal(50),
    )


def test_models_outside_the_policy_catalog_still_priced_by_genai() -> None:
    p = get_prices("gpt-5.4-mini", at=AT)
    assert p.model_id == "gpt-5.4-mini" and p.input == Decimal("0.75")


def test_unknown_prices() -> None:
    with pytest.raises(UnknownPriceError) as info:
        get_prices("claude-mythos-preview", at=AT)  # a policy, but no price anywhere
    assert isinstance(info.value, UnknownModelError)
    assert "override" in str(info.value)
    with pytest.raises(UnknownModelError) as info2:
        get_prices("claude-sonet-4-5")
    assert "claude-sonnet-4-5" in info2.value.suggestions


def test_genai_auto_update_is_never_used(monkeypatch: pytest.MonkeyPatch) -> None:
    # A custom (e.g. auto-updated) snapshot elsewhere in the process must not change our prices.
    empty = data_snapshot.DataSnapshot(providers=[], from_auto_update=True)
    monkeypatch.setattr(data_snapshot, "_custom_snapshot", empty)
    assert get_prices("gpt-4o", at=AT).input == Decimal("2.5")


# ------------------------------------------------------------------------------- overrides


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_override_file_partial_and_new_model(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
[models."claude-sonnet-4-5-20250929"]
input = 2.5
cache_read = "0.25"
as_of = 2026-11-01
note = "negotiated"

[models."my-finetune"]
input = 1
output = 2
cache_read = 0.1
[[models."my-finetune".tiers]]
above_tokens = 1000
input = 3
""",
    )
    loaded = load_overrides(path)
    assert set(loaded) == {"claude-sonnet-4-5", "my-finetune"}
    p = get_prices("claude-sonnet-4-5", at=AT)
    assert (p.input, p.cache_read, p.output) == (Decimal("2.5"), Decimal("0.25"), Decimal(15))
    assert p.field_sources["input"].kind == "override"
    assert p.field_sources["input"].as_of == date(2026, 11, 1)
    assert "output" not in p.field_sources and p.source.kind == "genai-prices"
    mine = get_prices("my-finetune")
    assert mine.source.kind == "override" and mine.provider is None
    assert mine.for_prompt(1001).input == Decimal(3) and mine.for_prompt(1001).output == Decimal(2)
    clear_overrides()
    assert get_prices("claude-sonnet-4-5", at=AT).input == Decimal(3)


def test_override_from_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, '[models."gpt-4o"]\ninput = 2.0\n')
    monkeypatch.setenv(PRICES_ENV_VAR, str(path))
    assert get_prices("gpt-4o-2024-11-20", at=AT).input == Decimal(2)
    path.write_text('[models."gpt-4o"]\ninput = 1.5\n', encoding="utf-8")
    os.utime(path, ns=(1, 10**18))  # make sure the change is seen even on coarse clocks
    assert get_prices("gpt-4o", at=AT).input == Decimal("1.5")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[models.gpt-4o\ninput = 1", "invalid TOML"),
        ('[models."gpt-4o"]\ninput = -1\n', "greater than or equal to 0"),
        ('[models."gpt-4o"]\ninput = "cheap"\n', "models.gpt-4o.input"),
        ('[models."gpt-4o"]\ninptu = 1\n', "inptu"),
        ('[prices."gpt-4o"]\ninput = 1\n', "unknown top-level key"),
        (
            '[models."m"]\ninput = 1\noutput = 1\n[[models."m".tiers]]\nabove_tokens = 0\n',
            "above_tokens",
        ),
    ],
)
def test_malformed_override_file(tmp_path: Path, text: str, reason: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(CatalogError) as info:
        load_overrides(path)
    message = str(info.value)
    assert str(path) in message and reason in message


def test_missing_override_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CatalogError, match="not found"):
        load_overrides(tmp_path / "nope.toml")
    monkeypatch.setenv(PRICES_ENV_VAR, str(tmp_path / "nope.toml"))
    with pytest.raises(CatalogError, match=r"nope\.toml"):
        get_prices("gpt-4o")


def test_override_for_unknown_model_needs_input_and_output(tmp_path: Path) -> None:
    load_overrides(_write(tmp_path, '[models."brand-new"]\ninput = 1\n'))
    with pytest.raises(CatalogError, match="at least input and output"):
        get_prices("brand-new")


@pytest.mark.parametrize("model_id", known_models())
def test_every_catalog_model_is_priced_except_mythos_preview(model_id: str) -> None:
    if model_id == "claude-mythos-preview":  # no price in the reference nor in genai-prices
        with pytest.raises(UnknownPriceError):
            get_prices(model_id, at=AT)
        return
    p = get_prices(model_id, at=AT)
    assert p.model_id == model_id
    assert p.input > 0 and p.output > 0
    assert p.source.url.startswith("https://")
    policy = get_policy(model_id)
    assert p.provider == policy.provider
    if policy.provider == "anthropic":
        assert p.cache_write_5m is not None and p.cache_write_1h is not None
    else:
        assert (p.cache_write is not None) == bool(policy.write_multipliers)
