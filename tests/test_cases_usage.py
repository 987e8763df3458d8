"""Every ``usage`` case of ../shared/cases (BR-15, BR-25, BR-27, BR-28, BR-30), plus the usage
arithmetic inside BR-08, BR-12, BR-18, BR-21 and BR-24, asserted to the micro-dollar and to
4 decimals of hit rate, with each case's own prices."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import RawMessageDeltaEvent, RawMessageStartEvent
from click.testing import CliRunner
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from promptcache.cli import main
from promptcache.usage import (
    UsageRecord,
    UsageTracker,
    ZeroHitWarning,
    classify_openai,
    diagnose_hit_pattern,
    explicit_prices,
    merge_cumulative,
    parse_stream,
    parse_usage,
    price_record,
)
from tests.cases import case, load_cases

USAGE_IDS = ["BR-15", "BR-25", "BR-27", "BR-28", "BR-30"]


def _prices(table: dict[str, float]) -> Any:
    return explicit_prices(
        input=table["input"],
        output=table["output"],
        cache_read=table.get("cache_read", table.get("cached_input")),
        cache_write_5m=table.get("cache_write_5m"),
        cache_write_1h=table.get("cache_write_1h"),
        cache_write=table.get("cache_write"),
    )


def _usd(x: float) -> Decimal:
    return Decimal(str(x)).quantize(Decimal("0.000001"))


def _micro(d: Decimal | None) -> Decimal:
    assert d is not None
    return d.quantize(Decimal("0.000001"))


def test_every_usage_case_is_covered() -> None:
    assert sorted(c["id"] for c in load_cases("usage")) == USAGE_IDS


# ------------------------------------------------------------------------------------ BR-15


def _chat(usage: dict[str, Any], model: str = "gpt-4o") -> ChatCompletion:
    return ChatCompletion.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
        "choices": [], "usage": {"total_tokens": 0, "completion_tokens": 0, **usage},
    })


def test_br15_openai_classification() -> None:
    c = case("BR-15")
    exp = c["expected"]
    for resp in c["input"]["responses"]:
        rec = parse_usage(_chat(resp["usage"]), label=resp["label"])
        hit = classify_openai(rec, resp.get("identical_prefix_tokens_with_previous"))
        want = exp[resp["label"]]
        assert hit.classification == want["classification"], resp["label"]
        if "hit_rate" in want:
            assert rec.hit_rate is not None
            assert round(rec.hit_rate, 4) == want["hit_rate"]
    long = c["input"]["responses"][1]
    assert classify_openai(parse_usage(_chat(long["usage"])), 1990).predicted == 1920


def test_br15_report_surfaces_the_anomalous_response(tmp_path: Path) -> None:
    c = case("BR-15")
    log = tmp_path / "br15.jsonl"
    lines = [{"label": r["label"], "model": "gpt-4o", "usage": r["usage"]}
             for r in c["input"]["responses"]]
    lines.append({"label": "bad", "usage": {"prompt_tokens": 100, "completion_tokens": 1,
                                            "prompt_tokens_details": {"cached_tokens": 1024}}})
    log.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    res = CliRunner().invoke(main, ["report", str(log), "--format", "json"])
    assert res.exit_code == 0, res.output
    anomalies = json.loads(res.output)["anomalies"]
    odd = [a for a in anomalies if a["kind"] == c["expected"]["odd"]["classification"]]
    assert [(a["count"], a["labels"]) for a in odd] == [(1, ["odd"])]
    assert "cached_tokens 1000" in odd[0]["message"]
    flagged = [a for a in anomalies if a["kind"] == "usage_anomaly"]
    assert [(a["count"], a["labels"]) for a in flagged] == [(1, ["bad"])]
    assert "input_parts_exceed_total" in flagged[0]["message"]
    text = CliRunner().invoke(main, ["report", str(log)]).output
    assert f"  anomalous (1 record): {odd[0]['message']}" in text
    assert f"  usage_anomaly (1 record): {flagged[0]['message']}" in text


# ------------------------------------------------------------------------------------ BR-25


def test_br25_raw_anthropic_write_not_charged_twice() -> None:
    v = case("BR-25")["input"]["variant_raw_anthropic"]
    exp = case("BR-25")["expected"]["variant_raw_anthropic"]
    rec = parse_usage({"type": "message", "model": "claude-sonnet-4-5", "usage": v["usage"]})
    cost = price_record(rec, _prices(v["prices_usd_per_mtok"]))
    assert _micro(cost.total) == _usd(exp["cost_usd"])
    assert _micro(cost.total) != _usd(exp["buggy_cost_usd"])
    assert "write TTL not reported: priced at the 5m rate" in cost.notes


def test_br25_inclusive_total_subtracts_reads_and_writes() -> None:
    v = case("BR-25")["input"]["variant_normalized_inclusive"]
    exp = case("BR-25")["expected"]["variant_normalized_inclusive"]
    u = v["usage"]
    assert u["prompt_tokens_includes_cache"] is True
    rec = UsageRecord.from_inclusive_total(
        "anthropic", u["prompt_tokens"], cache_read=u["cached_read_tokens"],
        cache_write_5m=u["cache_creation_tokens"], cache_write_1h=0,
        output=u["completion_tokens"],
    )
    assert rec.uncached_input == exp["uncached_tokens"]
    cost = price_record(rec, _prices(v["prices_usd_per_mtok"]))
    assert _micro(cost.total) == _usd(exp["cost_usd"])
    assert _micro(cost.total) != _usd(exp["buggy_cost_usd"])


def test_br25_normalized_inclusive_usage_parsed_from_its_field_names() -> None:
    v = case("BR-25")["input"]["variant_normalized_inclusive"]
    exp = case("BR-25")["expected"]["variant_normalized_inclusive"]
    u = v["usage"]
    rec = parse_usage(u)  # the shape as a relay logs it, provider detected
    assert rec.provider == "normalized" and rec.flags == ()
    assert rec.uncached_input == exp["uncached_tokens"]
    assert (rec.cache_read, rec.cache_write) == (u["cached_read_tokens"],
                                                 u["cache_creation_tokens"])
    assert rec.total_input == u["prompt_tokens"]
    cost = price_record(rec, _prices(v["prices_usd_per_mtok"]))
    assert _micro(cost.total) == _usd(exp["cost_usd"])
    assert _micro(cost.total) != _usd(exp["buggy_cost_usd"])


# ------------------------------------------------------------------------------------ BR-27


def test_br27_openai_cached_tokens_priced_once() -> None:
    c = case("BR-27")
    rec = parse_usage(_chat(c["input"]["usage"]))
    assert rec.uncached_input == 10000 - 8064 and rec.cache_read == 8064
    cost = price_record(rec, _prices(c["input"]["prices_usd_per_mtok"]))
    assert _micro(cost.total) == _usd(c["expected"]["cost_usd"])
    assert _micro(cost.total) != _usd(c["expected"]["buggy_cost_usd"])
    assert rec.hit_rate is not None
    assert round(rec.hit_rate, 4) == c["expected"]["hit_rate"]


# ------------------------------------------------------------------------------------ BR-28


def test_br28_hit_rate_is_ratio_of_sums_with_exclusive_anthropic_input() -> None:
    c = case("BR-28")
    inp, exp = c["input"], c["expected"]
    agg = inp["aggregate_anthropic"]
    rec = UsageRecord(provider="anthropic", uncached_input=agg["sum_input_tokens"],
                      cache_read=agg["sum_cache_read_input_tokens"],
                      cache_write=agg["sum_cache_creation_input_tokens"], output=0)
    assert rec.hit_rate is not None
    assert round(rec.hit_rate, 4) == exp["aggregate_anthropic"]["hit_rate"]
    assert round(rec.hit_rate, 2) != exp["aggregate_anthropic"]["buggy"]
    for name in ("single_anthropic", "trap_anthropic"):
        r = parse_usage({**inp[name], "output_tokens": 1})
        assert r.provider == "anthropic"
        assert r.hit_rate is not None and round(r.hit_rate, 4) == exp[name]["hit_rate"]
    trap = parse_usage({**inp["trap_anthropic"], "output_tokens": 1})
    assert trap.hit_rate is not None
    assert round(trap.hit_rate, 4) != exp["trap_anthropic"]["wrong_if_inclusive_assumed"]
    oai = parse_usage(_chat({**inp["single_openai"], "completion_tokens": 0}))
    assert oai.hit_rate is not None
    assert round(oai.hit_rate, 4) == exp["single_openai"]["hit_rate"]


def test_br28_tracker_aggregate_is_not_mean_of_rates_and_stays_in_unit_interval() -> None:
    inp = case("BR-28")["input"]
    tracker = UsageTracker(default_prices=_prices({"input": 3, "output": 15, "cache_read": 0.3,
                                                   "cache_write_5m": 3.75}))
    recs = [parse_usage({**inp["single_anthropic"], "output_tokens": 1}),
            parse_usage({**inp["trap_anthropic"], "output_tokens": 1})]
    for r in recs:
        tracker.add(r)
    s = tracker.summary()
    assert s.hit_rate is not None and 0.0 <= s.hit_rate <= 1.0
    assert s.hit_rate == pytest.approx((8780 + 500) / (1000 + 8780 + 200 + 1000 + 500))
    mean = sum(r.hit_rate or 0 for r in recs) / 2
    assert round(s.hit_rate, 4) != round(mean, 4)


# ------------------------------------------------------------------------------------ BR-30


def _anthropic_events(events: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for ev in events:
        if ev["type"] == "message_start":
            msg = {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                   "model": "claude-sonnet-4-5", "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": 0, "output_tokens": 0}, **ev["message"]}
            if "usage" not in ev["message"]:
                # a relay that leaves message_start empty: emulate with a dict (the SDK type
                # requires usage), which the parser must treat as "no counts yet"
                out.append({"type": "message_start", "message": {
                    k: v for k, v in msg.items() if k != "usage"}})
                continue
            out.append(RawMessageStartEvent.model_validate({"type": "message_start",
                                                            "message": msg}))
        else:
            out.append(RawMessageDeltaEvent.model_validate({
                "type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                   "stop_sequence": None},
                "usage": ev["usage"]}))
    return out


def test_br30_anthropic_official_and_relay_streams_give_the_same_record() -> None:
    c = case("BR-30")
    exp = c["expected"]["anthropic_official"]
    official = parse_stream(_anthropic_events(c["input"]["anthropic_official"]))
    relay = parse_stream(_anthropic_events(c["input"]["anthropic_relay"]))
    for rec in (official, relay):
        assert rec.uncached_input == exp["input_tokens"]
        assert rec.cache_read == exp["cache_read_input_tokens"]
        assert rec.cache_write == exp["cache_creation_input_tokens"]
        assert rec.output == exp["output_tokens"]
        assert rec.total_input == exp["total_input"]
        assert rec.hit_rate is not None and round(rec.hit_rate, 4) == exp["hit_rate"]
        assert rec.flags == ()
    assert relay == official
    # the bug: reading the counts from message_delta alone
    buggy = c["expected"]["buggy_delta_only_on_official"]
    delta_only = parse_stream(_anthropic_events(c["input"]["anthropic_official"])[1:])
    assert delta_only.cache_read is None  # not reported there: unknown, not the buggy 0
    assert buggy["cache_read_input_tokens"] == 0


def test_br30_openai_compatible_overwrite_keeps_max_and_flags_decrease() -> None:
    c = case("BR-30")
    chunks = [
        ChatCompletionChunk.model_validate({
            "id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [], "usage": {"completion_tokens": 0, "total_tokens": 0, **ev["usage"]},
        })
        for ev in c["input"]["openai_compatible_overwrite"]
    ]
    rec = parse_stream(chunks, provider="vllm")
    assert rec.cache_read == c["expected"]["openai_compatible_overwrite"]["cached_tokens"]
    assert "usage_decreased:cached_tokens" in rec.flags
    assert rec.output == 120
    tracker = UsageTracker()
    events = tracker.add(rec)
    assert any(e.kind == "usage_anomaly" for e in events)


def test_br30_cumulative_counters_are_never_summed() -> None:
    c = case("BR-30")
    merged, decreased = merge_cumulative(ev["usage"] for ev in c["input"]["cumulative_summed"])
    assert merged["cache_read"] == c["expected"]["cumulative_summed"]["cache_read"]
    assert merged["cache_read"] != c["expected"]["cumulative_summed"]["must_not"]
    assert merged["input_tokens"] == 5105 and merged["output_tokens"] == 16
    assert decreased == ("input_tokens",)
    # the whole stream parsed (LangChain UsageMetadata, input_tokens inclusive): 5100 read
    rec = parse_stream(c["input"]["cumulative_summed"])
    assert rec.cache_read == c["expected"]["cumulative_summed"]["cache_read"]
    assert (rec.uncached_input, rec.total_input, rec.output) == (5, 5105, 16)


# ------------------------------------------------------------------ usage inside other kinds


def _anth(read: int, write: int, uncached: int, **kw: Any) -> UsageRecord:
    return UsageRecord(provider="anthropic", uncached_input=uncached, cache_read=read,
                       cache_write=write, cache_write_5m=write, cache_write_1h=0, **kw)


def test_br08_input_cost_before_and_after_fix() -> None:
    c = case("BR-08")
    prices = _prices(c["input"]["prices_usd_per_mtok"])
    exp = c["expected"]
    for key, want in (("usage_second_request_before_fix", exp["input_cost_usd_before"]),
                      ("usage_second_request_after_fix", exp["input_cost_usd_after"])):
        rec = parse_usage(exp[key])
        cost = price_record(rec, prices)
        assert _micro(cost.input) == _usd(want), key
        assert cost.output is None and cost.total is None  # output not in the case: unknown


def test_br12_naive_and_fixed_read_ratio() -> None:
    c = case("BR-12")
    exp = c["expected"]
    naive = parse_usage({"input_tokens": 0, **exp["naive_usage"]})
    fixed = parse_usage({"input_tokens": 0, **exp["fixed_usage"]})
    tc = c["input"]["token_counts"]
    total = tc["tools_and_system"] + tc["messages_blocks_0_to_9"] + tc["messages_blocks_10_to_33"]
    assert naive.total_input == fixed.total_input == total
    assert naive.hit_rate is not None and fixed.hit_rate is not None
    assert round(naive.hit_rate, 4) == round(12000 / 51000, 4)
    assert round(fixed.hit_rate, 4) == round(42000 / 51000, 4)


def test_br18_prefix_regression_flag_and_healthy_control() -> None:
    c = case("BR-18")
    tracker = UsageTracker()
    for step in c["input"]["usage_series"]:
        tracker.add(_anth(step["cache_read_input_tokens"], step["cache_creation_input_tokens"],
                          10, session="s1", model="claude-sonnet-4-5"))
    flags = [e for e in tracker.events if e.kind == "prefix_regression"]
    exp = c["expected"]["tracker"]
    assert len(flags) == 1
    assert flags[0].record.cache_read == exp["observed_read"]
    assert flags[0].data["expected_min_read"] == exp["expected_min_read"]
    assert flags[0].data["observed_read"] == exp["observed_read"]
    assert flags[0].data["shortfall"] == exp["shortfall"]

    healthy = UsageTracker()
    for u in c["input"]["healthy_control_series"]:
        healthy.add(parse_usage({**u, "output_tokens": 1}, session="ok",
                                model="claude-sonnet-4-5"))
    assert [e.kind for e in healthy.events] == c["expected"]["healthy_control"]["flags"]


def test_br21_concurrent_cold_writes_and_warmed_cost() -> None:
    c = case("BR-21")
    prices = _prices(c["input"]["prices_usd_per_mtok"])
    fan = c["input"]["fan_out"]
    obs = c["input"]["observed_usage_each"]
    tracker = UsageTracker(default_prices=prices)
    with pytest.warns(ZeroHitWarning):  # 8 cacheable requests, 0 reads: the alarm fires too
        for i in range(fan["requests"]):
            tracker.add(parse_usage(obs, model="claude-sonnet-4-5", start=0.0, first_token=1.5,
                                    end=4.0, request_id=f"r{i}"))
    exp = c["expected"]
    groups = tracker.cold_write_groups()
    assert len(groups) == 1
    assert groups[0].writes == exp["tracker"]["writes"]
    assert groups[0].redundant_writes == exp["tracker"]["redundant_writes"]
    s = tracker.summary()
    assert s.hit_rate == exp["tracker"]["hit_rate"]
    assert any(e.kind == exp["tracker"]["flag"] for e in tracker.events)
    assert _micro(s.input_cost) == _usd(exp["input_cost_usd_naive"])
    # 7 redundant writes of 5000 tokens: each cost 5000*(3.75-0.30) more than a read
    assert groups[0].wasted_usd == Decimal(7 * 5000) * (Decimal("3.75") - Decimal("0.3")) / 10**6

    warmed = UsageTracker(default_prices=prices)
    after = exp["usage_after_strategy"]
    warmed.add(parse_usage({"input_tokens": fan["unique_suffix_tokens"],
                            "cache_read_input_tokens": 0, **after["first"]},
                           start=0.0, first_token=1.5))
    for _ in range(fan["requests"] - 1):
        warmed.add(parse_usage({"input_tokens": fan["unique_suffix_tokens"],
                                **after["others_each"]}, start=1.6))
    assert _micro(warmed.summary().input_cost) == _usd(exp["input_cost_usd_warmed"])
    assert warmed.cold_write_groups() == []


def test_br24_request_level_and_token_level_hit_rates() -> None:
    s = case("BR-24")["input"]["series_no_key"]
    exp = case("BR-24")["expected"]["series_no_key"]
    tracker = UsageTracker(warmup=16)  # the series hits on request 6: no alarm within 16
    for i, cached in enumerate(s["cached_tokens"]):
        tracker.add(parse_usage(_chat({"prompt_tokens": s["prompt_tokens_each"],
                                       "prompt_tokens_details": {"cached_tokens": cached}}),
                                start=i * s["interval_seconds"]))
    assert not any(e.kind == "zero_hit_alarm" for e in tracker.events)
    summary = tracker.summary()
    assert summary.request_hit_rate == exp["request_hit_fraction"]
    assert summary.hit_rate is not None and round(summary.hit_rate, 4) == exp["token_hit_rate"]
    # "bimodal hits with identical prefixes -> routing, not content"
    pattern = diagnose_hit_pattern(tracker.records)
    assert (pattern.pattern, pattern.diagnosis) == ("bimodal", "routing")
