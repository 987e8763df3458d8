"""Session 9, review 15 pricing findings: service tier (F1), inference geo (F2), fast mode (F9).

Every expected USD below is computed by hand from the per-MTok prices of
../shared/reference/hosted-api-rules.md, written out in the test, never by the code under test:

* gpt-5 (2.5): input 1.25, cached read 0.125, output 10. "Batch and Flex: 50% off. Fast
  mode: 2x."
* claude-opus-4-6 / 4-8 / opus-5 (1.6): input 5, 5m write 6.25, 1h write 10, read 0.50,
  output 25. "inference_geo: 'us': 1.1x on all token categories (Claude 4.6 and later)."
* Fast mode (1.6): "Opus 5.5 $8/$40; Opus 5 and Opus 4.8 $10/$50."

``inference_geo`` and ``speed`` are UsageRecord fields another engineer (U2) is adding; until
they exist, :func:`_with` sets them on the built record as plain attributes (billing reads them
with ``getattr``), so these tests run before and after that change.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.catalog import price_adjustment
from promptcache.cli import main
from promptcache.usage import UsageRecord, UsageTracker, price_record

M = Decimal(1_000_000)


def _with(rec: UsageRecord, **fields: Any) -> UsageRecord:
    """``rec`` with ``fields`` set."""
    return rec.model_copy(update=fields)


def _gpt5(uncached: int, read: int, out: int, **kw: Any) -> UsageRecord:
    return _with(UsageRecord(provider="openai", model="gpt-5", uncached_input=uncached,
                             cache_read=read, input_total=uncached + read, output=out), **kw)


def _opus(model: str, unc: int, w5: int, w1: int, read: int, out: int, **kw: Any) -> UsageRecord:
    return _with(UsageRecord(provider="anthropic", model=model, uncached_input=unc,
                             cache_read=read, cache_write=w5 + w1, cache_write_5m=w5,
                             cache_write_1h=w1, output=out), **kw)


def _cost(rec: UsageRecord) -> Any:
    cost = UsageTracker(warn=False).cost_of(rec)
    assert cost is not None
    return cost


def _report(path: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["report", "--format", "json", *args, str(path)])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


# ------------------------------------------------------------------------------ F1 flex


GPT5_STANDARD = (1808 * Decimal("1.25") + 8192 * Decimal("0.125") + 1000 * 10) / M  # 0.013284
GPT5_SAVINGS = (10_000 * Decimal("1.25") - 1808 * Decimal("1.25") - 8192 * Decimal("0.125")) / M


def test_flex_is_half_the_standard_price() -> None:
    cost = _cost(_gpt5(1808, 8192, 1000, service_tier="flex"))
    assert GPT5_STANDARD == Decimal("0.013284")
    assert cost.total == GPT5_STANDARD / 2 == Decimal("0.006642")
    assert cost.savings == GPT5_SAVINGS / 2 == Decimal("0.004608")
    assert any("flex" in n and "0.5x" in n for n in cost.assumptions)
    # the standard tiers keep the list price
    for tier in ("default", "auto", None):
        assert _cost(_gpt5(1808, 8192, 1000, service_tier=tier)).total == GPT5_STANDARD


@pytest.mark.parametrize("tier", ["priority", "scale", "turbo"])
def test_a_tier_the_catalog_cannot_price_is_unknown_never_standard(tier: str) -> None:
    cost = _cost(_gpt5(1808, 8192, 1000, service_tier=tier))
    assert cost.total is None and cost.savings is None
    assert any(f"service_tier {tier!r}" in n for n in cost.unknown_reasons)


def test_report_prices_a_flex_chat_completion_at_half(tmp_path: Path) -> None:
    line = {"object": "chat.completion", "model": "gpt-5", "created": 1793491200,
            "service_tier": "flex",
            "usage": {"prompt_tokens": 10000, "completion_tokens": 1000,
                      "prompt_tokens_details": {"cached_tokens": 8192}}}
    path = tmp_path / "a2.jsonl"
    path.write_text(json.dumps(line) + "\n")
    data = _report(path)
    assert Decimal(data["total"]["cost_usd"]) == Decimal("0.006642")
    assert Decimal(data["total"]["savings_usd"]) == Decimal("0.004608")
    assert any("flex" in n["message"] for n in data["notes"])
    line["service_tier"] = "priority"
    path.write_text(json.dumps(line) + "\n")
    data = _report(path)
    assert data["total"]["cost_usd"] is None
    assert any("priority" in reason for reason in data["cost_unknown"])


# ------------------------------------------------------------------------------ F2 geo


def test_inference_geo_us_is_1_1x_on_every_token_for_claude_4_6() -> None:
    rec = _opus("claude-opus-4-6", 1000, 1000, 2000, 20_000, 500, inference_geo="us")
    list_price = (1000 * 5 + 1000 * Decimal("6.25") + 2000 * 10 + 20_000 * Decimal("0.5")
                  + 500 * 25) / M
    assert list_price == Decimal("0.05375")
    cost = _cost(rec)
    assert cost.total == list_price * Decimal("1.1") == Decimal("0.059125")
    input_side = (1000 * 5 + 1000 * Decimal("6.25") + 2000 * 10 + 20_000 * Decimal("0.5")) / M
    assert cost.savings == (24_000 * 5 / M - input_side) * Decimal("1.1") == Decimal("0.086625")
    assert any("inference_geo 'us'" in n for n in cost.assumptions)
    # global (and no geo) keep the list price
    assert _cost(_with(rec, inference_geo="global")).total == list_price
    assert _cost(_with(rec, inference_geo=None)).total == list_price


def test_inference_geo_before_claude_4_6_keeps_the_list_price() -> None:
    # Haiku 4.5 (1.6): input 1, 5m write 1.25, read 0.10, output 5; not "4.6 and later"
    rec = _with(UsageRecord(provider="anthropic", model="claude-haiku-4-5", uncached_input=1000,
                            cache_read=10_000, cache_write=0, cache_write_5m=0,
                            cache_write_1h=0, output=100), inference_geo="us")
    assert _cost(rec).total == (1000 * 1 + 10_000 * Decimal("0.10") + 100 * 5) / M


def test_an_unknown_inference_geo_on_a_4_6_model_is_unknown() -> None:
    cost = _cost(_opus("claude-opus-4-6", 1000, 0, 0, 0, 10, inference_geo="eu"))
    assert cost.total is None
    assert any("inference_geo 'eu'" in n for n in cost.unknown_reasons)


def test_geo_multiplier_and_models_are_catalog_data_with_a_source() -> None:
    adj = price_adjustment("claude-sonnet-5-5", inference_geo="us")
    assert adj.multiplier == Decimal("1.1") and adj.unknown == ()
    assert "https://platform.claude.com/docs/en/about-claude/pricing" in adj.notes[0]
    assert price_adjustment("claude-sonnet-4-5", inference_geo="us").multiplier == 1


@pytest.mark.parametrize(("model", "inp", "out"), [
    ("bedrock/anthropic.claude-opus-4-6-v1", 5, 25),
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", 3, 15),  # Sonnet 4.5: $3/$15
    ("vertex_ai/claude-opus-4-6", 5, 25), ("claude-opus-4-6@20250929", 5, 25)])
def test_bedrock_and_vertex_ids_get_a_regional_premium_note_not_a_guess(
        model: str, inp: int, out: int) -> None:
    rec = _opus(model, 1000, 0, 0, 0, 100)
    cost = _cost(rec)
    assert cost.total == (1000 * inp + 100 * out) / M  # the list price, no guessed +10 %
    assert any(n.startswith("regional endpoint:") and "10%" in n for n in cost.assumptions)
    assert not any("regional" in n for n in _cost(_with(rec, model="claude-opus-4-6")).notes)


# ------------------------------------------------------------------------------ F9 fast mode


def test_fast_mode_uses_the_reference_fast_prices() -> None:
    # Opus 4.8 fast: $10/$50 (standard $5/$25)
    cost = _cost(_opus("claude-opus-4-8", 10_000, 0, 0, 0, 1000, speed="fast"))
    assert cost.total == (10_000 * 10 + 1000 * 50) / M == Decimal("0.15")
    # Opus 5.5 fast: $8/$40
    cost = _cost(_opus("claude-opus-5-5", 10_000, 0, 0, 0, 1000, speed="fast"))
    assert cost.total == (10_000 * 8 + 1000 * 40) / M
    # speed "standard" is the list price
    std = _cost(_opus("claude-opus-4-8", 10_000, 0, 0, 0, 1000, speed="standard"))
    assert std.total == (10_000 * 5 + 1000 * 25) / M


def test_fast_mode_without_a_reference_price_is_unknown() -> None:
    # no fast-mode price for Opus 4.6 in the reference
    cost = _cost(_opus("claude-opus-4-6", 10_000, 0, 0, 0, 1000, speed="fast"))
    assert cost.total is None
    assert any("speed 'fast'" in n for n in cost.unknown_reasons)
    # the reference gives fast-mode input/output only: cache reads in fast mode are unknown
    cost = _cost(_opus("claude-opus-4-8", 1000, 0, 0, 5000, 100, speed="fast"))
    assert cost.total is None
    assert any("cache reads" in n for n in cost.unknown_reasons)


def test_openai_fast_mode_is_2x() -> None:
    cost = _cost(_gpt5(1000, 0, 100, speed="fast"))
    assert cost.total == 2 * (1000 * Decimal("1.25") + 100 * 10) / M == Decimal("0.0045")


def test_tracker_total_is_unknown_for_an_unpriced_fast_request() -> None:
    rec = _opus("claude-opus-4-6", 10_000, 0, 0, 0, 1000, speed="fast")
    tracker = UsageTracker(warn=False)
    tracker.add(rec)
    assert tracker.summary().cost is None
    assert price_record(rec, _prices("claude-opus-4-6")).total is None


def _prices(model: str) -> Any:
    from promptcache.catalog import get_prices

    return get_prices(model)


# ------------------------------------------------------------------------------ F14 ft: ids

FT = "ft:gpt-4o-2024-08-06:org::abc"


def test_a_fine_tuned_id_is_not_priced_as_its_base_model(tmp_path: Path) -> None:
    from promptcache.catalog import UnknownPriceError, clear_overrides, get_prices, load_overrides

    with pytest.raises(UnknownPriceError, match="fine-tuned"):
        get_prices(FT)
    # an override for the base model does not price the fine-tune
    base = tmp_path / "base.toml"
    base.write_text('[models."gpt-4o"]\ninput = 2.5\noutput = 10\n')
    load_overrides(base)
    try:
        with pytest.raises(UnknownPriceError):
            get_prices(FT)
        # an override naming the ft: id does (its own numbers; cache_read left out is None)
        own = tmp_path / "ft.toml"
        own.write_text(f'[models."{FT}"]\ninput = 3.75\noutput = 15\ncache_read = 1.875\n')
        load_overrides(own)
        p = get_prices(FT)
        assert (p.input, p.cache_read, p.output) == (Decimal("3.75"), Decimal("1.875"),
                                                     Decimal(15))
        assert p.model_id == FT and p.source.kind == "override"
        assert get_prices("gpt-4o").input == Decimal("2.5")  # the base is unchanged
    finally:
        clear_overrides()


def test_report_gives_a_fine_tuned_record_an_unknown_cost_with_a_reason(tmp_path: Path) -> None:
    line = {"object": "chat.completion", "model": FT, "created": 1793491200,
            "usage": {"prompt_tokens": 2000, "completion_tokens": 100,
                      "prompt_tokens_details": {"cached_tokens": 1024}}}
    path = tmp_path / "ft.jsonl"
    path.write_text(json.dumps(line) + "\n")
    data = _report(path)
    assert data["total"]["cost_usd"] is None
    assert any("fine-tuned" in r for r in data["cost_unknown"])
    own = tmp_path / "ft.toml"
    own.write_text(f'[models."{FT}"]\ninput = 3.75\noutput = 15\ncache_read = 1.875\n')
    try:
        data = _report(path, "--prices", str(own))
    finally:
        from promptcache.catalog import clear_overrides

        clear_overrides()
    # 976 x 3.75 + 1024 x 1.875 + 100 x 15 per MTok (the override's own prices)
    assert Decimal(data["total"]["cost_usd"]) == (976 * Decimal("3.75") + 1024 * Decimal("1.875")
                                                  + 100 * 15) / M


def test_tracker_prices_override_for_the_base_model_does_not_price_a_fine_tune() -> None:
    from promptcache.usage import explicit_prices

    tracker = UsageTracker(warn=False, prices={"gpt-4o": explicit_prices(input=2.5, output=10,
                                                                         cache_read=1.25)})
    rec = UsageRecord(provider="openai", model=FT, uncached_input=10, cache_read=0,
                      input_total=10, output=1)
    assert tracker.cost_of(rec) is None


# ------------------------------------------------------------------------------ F11


def test_gpt_5_6_sol_after_the_unconfirmed_cut_is_priced_at_the_reference_table(
        tmp_path: Path) -> None:
    """Reference 2.5: gpt-5.6-sol 5.00 / cached 0.50 / write 6.25 / output 30.00; "One source
    says GPT-5.6 Sol is now $4/$20. That conflicts with the others and is UNCONFIRMED." """
    done = {"type": "response.completed",
            "response": {"id": "resp_1", "object": "response", "model": "gpt-5.6-sol",
                         "created_at": 1793491200,  # 2026-11-01, after the claimed cut
                         "service_tier": "default",
                         "usage": {"input_tokens": 5000, "output_tokens": 100,
                                   "input_tokens_details": {"cached_tokens": 3000,
                                                            "cache_write_tokens": 1500}}}}
    path = tmp_path / "s3.jsonl"
    path.write_text(json.dumps(done) + "\n")
    data = _report(path)
    expected = (500 * 5 + 3000 * Decimal("0.5") + 1500 * Decimal("6.25") + 100 * 30) / M
    assert expected == Decimal("0.016375")
    assert Decimal(data["total"]["cost_usd"]) == expected
    from datetime import UTC, datetime

    from promptcache.catalog import get_prices

    p = get_prices("gpt-5.6-sol", at=datetime(2026, 11, 1, tzinfo=UTC))
    assert (p.input, p.cache_read, p.cache_write, p.output) == (
        Decimal(5), Decimal("0.5"), Decimal("6.25"), Decimal(30))
    assert p.source.confirmed is True


@pytest.mark.parametrize("model", ["claude-fable-5-2", "gpt-6.1-sol"])
def test_a_price_the_reference_marks_unconfirmed_stays_unconfirmed(model: str,
                                                                   tmp_path: Path) -> None:
    from promptcache.catalog import get_prices

    p = get_prices(model)
    assert p.source.confirmed is False and "UNCONFIRMED" in (p.source.note or "")
    # and the report says so (Fable 5.2, reference 1.6: input 8, output 40, "UNCONFIRMED
    # officially"; gpt-6.1-sol, 2.5: input 2.00, output 10.00, write "UNCONFIRMED (2.50?)")
    line = {"model": model, "input_tokens": 1000, "output_tokens": 10} if model.startswith(
        "claude") else {"model": model, "prompt_tokens": 1000, "completion_tokens": 10,
                        "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}}
    if model.startswith("claude"):
        line.update(cache_read_input_tokens=0, cache_creation_input_tokens=0)
    path = tmp_path / "u.jsonl"
    path.write_text(json.dumps(line) + "\n")
    data = _report(path)
    inp, out = (8, 40) if model.startswith("claude") else (2, 10)
    assert Decimal(data["total"]["cost_usd"]) == (1000 * inp + 10 * out) / M
    assert any(n["message"].startswith(f"unconfirmed price for {model}") for n in data["notes"])
    text = CliRunner().invoke(main, ["report", str(path)]).output
    assert f"unconfirmed price for {model}" in text


# ------------------------------------------------------------------------------ end to end

def test_report_prices_an_inference_geo_us_response_at_1_1x(tmp_path: Path) -> None:
    line = {"model": "claude-opus-4-6", "type": "message", "created_at": "2026-11-01T00:00:00Z",
            "usage": {"input_tokens": 1000, "cache_creation_input_tokens": 3000,
                      "cache_read_input_tokens": 20000,
                      "cache_creation": {"ephemeral_5m_input_tokens": 1000,
                                         "ephemeral_1h_input_tokens": 2000},
                      "output_tokens": 500, "service_tier": "standard", "inference_geo": "us"}}
    path = tmp_path / "a1.jsonl"
    path.write_text(json.dumps(line) + "\n")
    data = _report(path)
    # (1000 x 5 + 1000 x 6.25 + 2000 x 10 + 20000 x 0.5 + 500 x 25) x 1.1 per MTok
    assert Decimal(data["total"]["cost_usd"]) == Decimal("0.05375") * Decimal("1.1")
    assert Decimal(data["total"]["savings_usd"]) == Decimal("0.086625")


def test_report_prices_a_fast_mode_request_log_line(tmp_path: Path) -> None:
    line = {"request": {"model": "claude-opus-4-8", "speed": "fast", "max_tokens": 100,
                        "messages": [{"role": "user", "content": "hi"}]},
            "response": {"id": "msg_f", "type": "message", "model": "claude-opus-4-8",
                         "usage": {"input_tokens": 10000, "cache_creation_input_tokens": 0,
                                   "cache_read_input_tokens": 0, "output_tokens": 1000}}}
    path = tmp_path / "fast.jsonl"
    path.write_text(json.dumps(line) + "\n")
    # 10000 x 10 + 1000 x 50 per MTok (Opus 4.8 fast mode)
    assert Decimal(_report(path)["total"]["cost_usd"]) == Decimal("0.15")
