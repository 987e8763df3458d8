"""Session 8, usage: findings F1, F2 (report), F3, F4 and F12 of new-user trial 13.

* F1: a growing conversation's collapse was always ``prefix_changed`` (the last-breakpoint
  digest moves every turn); now the wrapper's ``kept_prefix`` decides.
* F4: fan-out requests that share a prefix but carry a later breakpoint each (auto_cache) never
  formed a ``concurrent_cold_writes`` group; now they group by the longest shared breakpoint
  digest, and the waste counts only the shared prefix's tokens.
* F2: ``report`` priced dated response / usage lines at today's price.
* F3: ``report`` showed cost ``?`` without a reason, and write/uncached counts it did not know.
* F12: ``report`` counted a streamed Anthropic response's message_start + message_delta lines
  as two requests and lost the cost.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.cli import main
from promptcache.usage import UsageRecord, UsageTracker, explicit_prices
from promptcache.usage.classify import classify_collapse

# BR-21's prices (the case's own table)
PRICES = explicit_prices(input=3, output=15, cache_read=0.3, cache_write_5m=3.75,
                         cache_write_1h=6)
MTOK = Decimal(10) ** 6


def rec(read: int, write: int, uncached: int = 10, **kw: Any) -> UsageRecord:
    fields: dict[str, Any] = {"provider": "anthropic", "model": "claude-sonnet-4-5",
                              "uncached_input": uncached, "cache_read": read,
                              "cache_write": write, "cache_write_5m": write,
                              "cache_write_1h": 0, "output": 5, **kw}
    return UsageRecord.model_validate(fields)


# ------------------------------------------------------------------------------------- record


def test_breakpoint_fields_round_trip_through_the_jsonl_sink(tmp_path: Path) -> None:
    from promptcache.usage import JsonlSink, read_jsonl

    r = rec(0, 1300, breakpoint_hashes=("s", "t"), breakpoint_tokens=(1212, 1300),
            kept_prefix=True, prefix_hash="t")
    with JsonlSink(tmp_path / "u.jsonl") as sink:
        sink.write(r)
        sink.write(rec(0, 1))  # without them: nothing written for them, defaults read back
    back = read_jsonl(tmp_path / "u.jsonl")
    assert back == [r, rec(0, 1)]
    assert back[1].breakpoint_hashes == () and back[1].kept_prefix is None


def test_breakpoint_tokens_must_match_the_hashes() -> None:
    with pytest.raises(ValueError, match="one count per breakpoint"):
        rec(0, 10, breakpoint_hashes=("a",), breakpoint_tokens=(1, 2))


# ----------------------------------------------------------------------------------------- F1


def _turns(kept: bool | None, gap: float = 60.0) -> list[UsageRecord]:
    """A growing conversation: each turn's last breakpoint (and prefix_hash) moves forward."""
    return [
        rec(0, 4000, start=0.0, session="s", prefix_hash="h1", breakpoint_hashes=("h1",)),
        rec(4000, 300, start=30.0, session="s", prefix_hash="h2",
            breakpoint_hashes=("h1", "h2"), kept_prefix=True),
        rec(0, 4600, start=30.0 + gap, session="s", prefix_hash="h3",
            breakpoint_hashes=("h2", "h3"), kept_prefix=kept),
    ]


@pytest.mark.parametrize(("kept", "gap", "cause"), [
    (True, 60.0, "unknown"),  # the history was kept: eviction / routing, not the payload
    (True, 400.0, "ttl_expired"),
    (False, 60.0, "prefix_changed"),
    (False, 400.0, "ttl_expired"),
])
def test_collapse_in_a_growing_conversation_follows_kept_prefix(
        kept: bool, gap: float, cause: str) -> None:
    t = UsageTracker(default_prices=PRICES, warn=False)
    for r in _turns(kept, gap):
        t.add(r)
    collapse = [e for e in t.events if e.kind == "collapse"]
    assert [e.data["cause"] for e in collapse] == [cause]
    assert f"({cause})" in collapse[0].message


def test_collapse_without_kept_prefix_uses_the_breakpoint_digests_then_the_hash() -> None:
    prev = rec(4000, 300, start=0.0, session="s", prefix_hash="h2")
    # the new request has a breakpoint exactly where the previous prefix ended: kept
    grown = rec(0, 4600, start=10.0, session="s", prefix_hash="h3", breakpoint_hashes=("h2", "h3"))
    assert classify_collapse(prev, grown, 300.0) == "unknown"
    # records without the new fields behave as before
    assert classify_collapse(prev, rec(0, 4600, start=10.0, prefix_hash="x"), 300.0) == (
        "prefix_changed")
    assert classify_collapse(prev, rec(0, 4600, start=10.0, prefix_hash="h2"), 300.0) == (
        "unknown")


# ----------------------------------------------------------------------------------------- F4


def _fan_out(n: int, *, shared: int = 5000, suffix: int = 200) -> list[UsageRecord]:
    """BR-21 through auto_cache: a breakpoint on the shared system prompt (digest "S") and one
    at the end of each request's own user turn (digest "U<i>"): all sent at t=0, cold."""
    return [rec(0, shared + suffix, uncached=0, start=0.0, first_token=1.5, end=4.0,
                request_id=f"r{i}", prefix_hash=f"U{i}", breakpoint_hashes=("S", f"U{i}"),
                breakpoint_tokens=(shared, shared + suffix))
            for i in range(n)]


def test_fan_out_with_a_later_breakpoint_each_is_one_cold_write_group() -> None:
    t = UsageTracker(default_prices=PRICES, warn=False)
    for r in _fan_out(8):
        t.add(r)
    groups = t.cold_write_groups()
    assert len(groups) == 1
    g = groups[0]
    assert (g.key, g.writes, g.redundant_writes) == ("S", 8, 7)
    # only the shared 5,000 tokens were written again, not each request's own 200
    assert g.redundant_write_tokens == 7 * 5000
    assert g.wasted_usd == 7 * 5000 * (Decimal("3.75") - Decimal("0.3")) / MTOK
    events = [e for e in t.events if e.kind == "concurrent_cold_writes"]
    # reported as the group grows (2, 4, 8), each message with the count so far
    assert [e.data["writes"] for e in events] == [2, 4, 8]
    assert events[-1].message.startswith("8 requests so far wrote the same cold prefix")
    assert "35,000 tokens written again" in events[-1].message
    assert events[0].message.startswith("2 requests wrote the same cold prefix")


def test_cold_write_group_takes_the_longest_shared_prefix_and_recounts_the_waste() -> None:
    t = UsageTracker(default_prices=PRICES, warn=False)

    def w(i: int, hashes: tuple[str, ...], tokens: tuple[int, ...]) -> UsageRecord:
        return rec(0, tokens[-1], uncached=0, start=float(i), end=10.0, request_id=f"r{i}",
                   prefix_hash=hashes[-1], breakpoint_hashes=hashes, breakpoint_tokens=tokens)

    t.add(w(0, ("S", "T", "U0"), (3000, 4000, 4100)))
    t.add(w(1, ("S", "T", "U1"), (3000, 4000, 4100)))  # shares S and T: T is the longer
    [g] = t.cold_write_groups()
    assert g.key == "T" and g.redundant_write_tokens == 4000
    t.add(w(2, ("S", "V2"), (3000, 3500)))  # shares only S: the group's prefix is S now
    [g] = t.cold_write_groups()
    assert g.key == "S" and g.writes == 3 and g.redundant_write_tokens == 2 * 3000
    assert g.wasted_usd == 2 * 3000 * (Decimal("3.75") - Decimal("0.3")) / MTOK
    t.add(w(3, ("X", "Y"), (3000, 3100)))  # another prefix: its own (single) write
    assert [len(x.records) for x in t.cold_write_groups()] == [3]


def test_cold_writes_without_breakpoint_digests_group_as_before() -> None:
    t = UsageTracker(default_prices=PRICES, warn=False)
    t.add(rec(0, 5000, start=100.0, end=103.0, prefix_hash="h"))
    t.add(rec(0, 5000, start=100.5, end=104.0, prefix_hash="other"))
    t.add(rec(0, 5000, start=101.0, end=104.0, prefix_hash="h"))
    [g] = t.cold_write_groups()
    assert g.key == "h" and g.writes == 2 and g.redundant_write_tokens == 5000
    assert g.wasted_usd == 5000 * (Decimal("3.75") - Decimal("0.3")) / MTOK


# ----------------------------------------------------------------------------------- report


def _report(path: Path, *args: str) -> dict[str, Any]:
    res = CliRunner().invoke(main, ["report", str(path), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    data: dict[str, Any] = json.loads(res.output)
    return data


def _write(path: Path, *lines: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


# ----------------------------------------------------------------------------------------- F2


def test_report_prices_a_dated_responses_object_at_its_created_at(tmp_path: Path) -> None:
    """A Responses object's created_at is read (gpt-5.6-sol: $5/MTok input on both dates since
    review 15 F11 dropped the unconfirmed $4 cut; the dated switch itself is covered by the
    claude-sonnet-5-5 tests)."""
    resp = {"id": "resp_1", "object": "response", "created_at": 1785000000,  # 2026-07-25
            "model": "gpt-5.6-sol", "output": [],
            "usage": {"input_tokens": 1000, "output_tokens": 0,
                      "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}}}
    old = _report(_write(tmp_path / "old.jsonl", resp))
    assert Decimal(old["total"]["cost_usd"]) == Decimal("0.005")
    new = _report(_write(tmp_path / "new.jsonl", {**resp, "created_at": 1795000000}))
    assert Decimal(new["total"]["cost_usd"]) == Decimal("0.005")


def test_report_prices_a_dated_chat_completion_at_its_created(tmp_path: Path) -> None:
    chat = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1785000000,
            "model": "gpt-5.6-sol", "choices": [],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 0,
                      "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}}}
    data = _report(_write(tmp_path / "c.jsonl", chat))
    assert Decimal(data["total"]["cost_usd"]) == Decimal("0.005")


@pytest.mark.parametrize("key", ["timestamp", "start"])
def test_report_prices_a_usage_line_at_its_timestamp(tmp_path: Path, key: str) -> None:
    """claude-sonnet-5-5: cache read $0.20/MTok before 2026-10-07, $0.10 from then."""
    usage = {"input_tokens": 0, "cache_read_input_tokens": 1_000_000,
             "cache_creation_input_tokens": 0, "output_tokens": 0}
    line = {"model": "claude-sonnet-5-5", key: "2026-09-21T14:13:20Z", "usage": usage}
    assert Decimal(_report(_write(tmp_path / "u.jsonl", line))["total"]["cost_usd"]) == (
        Decimal("0.20"))
    later = {**line, key: "2026-11-18T00:00:00Z"}
    assert Decimal(_report(_write(tmp_path / "v.jsonl", later))["total"]["cost_usd"]) == (
        Decimal("0.10"))
    # a relative time (a log starting at 0) is no date: today's price, not 1970's
    relative = {**line, key: 30}
    assert Decimal(_report(_write(tmp_path / "w.jsonl", relative))["total"]["cost_usd"]) == (
        Decimal("0.10"))


# ----------------------------------------------------------------------------------------- F3


def test_report_says_why_a_gpt56_chat_cost_is_unknown_and_hides_unknown_counts(
        tmp_path: Path) -> None:
    chat = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1795000000,
            "model": "gpt-5.6-sol", "choices": [],
            # above the 1,024-token minimum: under it no write can happen (writes are 0)
            "usage": {"prompt_tokens": 1500, "completion_tokens": 0,
                      "prompt_tokens_details": {"cached_tokens": 0}}}
    path = _write(tmp_path / "c.jsonl", chat)
    data = _report(path)
    total = data["total"]
    assert total["cost_usd"] is None
    # the writes are not reported, so neither they nor the uncached part are known
    assert total["cache_write"] is None and total["uncached_input"] is None
    assert total["cache_read"] == 0
    [reason] = data["cost_unknown"]
    assert "'gpt-5.6-sol'" in reason and "cache writes not reported" in reason
    text = CliRunner().invoke(main, ["report", str(path)])
    assert text.exit_code == 0
    assert "cost unknown: 1 record of model 'gpt-5.6-sol': cache writes not reported" in (
        text.output)
    assert "1,500" not in text.output  # the uncached count is not shown as known


def test_report_says_a_price_override_lacks_cache_read(tmp_path: Path) -> None:
    prices = tmp_path / "p.toml"
    prices.write_text('[models."my-llama"]\ninput = 1.0\noutput = 2.0\n')
    line = {"model": "my-llama", "usage": {"prompt_tokens": 1300, "completion_tokens": 5,
                                           "prompt_tokens_details": {"cached_tokens": 1024}}}
    data = _report(_write(tmp_path / "l.jsonl", line), "--prices", str(prices))
    assert data["total"]["cost_usd"] is None
    [reason] = data["cost_unknown"]
    assert "no cache_read price for model 'my-llama'" in reason and "--prices" in reason


# ---------------------------------------------------------------------------------------- F12


def _br30_events() -> list[dict[str, Any]]:
    return [
        {"type": "message_start",
         "message": {"id": "msg_1", "type": "message", "role": "assistant",
                     "model": "claude-sonnet-4-5", "content": [],
                     "usage": {"input_tokens": 50, "cache_read_input_tokens": 2400,
                               "cache_creation_input_tokens": 120, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 310}},
        {"type": "message_stop"},
    ]


def test_report_merges_a_streamed_anthropic_response_into_one_request(tmp_path: Path) -> None:
    """BR-30 anthropic_official: one request, input 50 / read 2,400 / write 120 / output 310."""
    events = _br30_events()
    # a second response (its own id): chunks of one id are one response (review 15 F5)
    second = [{**events[0], "message": {**events[0]["message"], "id": "msg_2"}}, *events[1:]]
    for lines in ([events[0], events[4]], events, [*events, *second]):
        data = _report(_write(tmp_path / "e.jsonl", *lines))
        n = 2 if len(lines) > len(events) else 1
        total = data["total"]
        assert (total["requests"], total["uncached_input"], total["cache_read"],
                total["cache_write"], total["output"]) == (n, 50 * n, 2400 * n, 120 * n, 310 * n)
        assert round(total["hit_rate"], 4) == 0.9339
        assert total["cost_usd"] is not None and data["cost_unknown"] == []


def test_report_merges_a_relay_stream_and_keeps_lone_deltas(tmp_path: Path) -> None:
    relay = [{"type": "message_start", "message": {"model": "claude-sonnet-4-5"}},
             {"type": "message_delta",
              "usage": {"input_tokens": 50, "cache_read_input_tokens": 2400,
                        "cache_creation_input_tokens": 120, "output_tokens": 310}}]
    total = _report(_write(tmp_path / "r.jsonl", *relay))["total"]
    assert (total["requests"], total["cache_read"], total["output"]) == (1, 2400, 310)
    # a log of delta-only lines (one per request, no message_start): one record each
    total = _report(_write(tmp_path / "d.jsonl", relay[1], relay[1]))["total"]
    assert (total["requests"], total["cache_read"]) == (2, 4800)


def test_report_stream_without_usage_is_bad_input_naming_its_first_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "n.jsonl", {"type": "message_start", "message": {}},
                  {"type": "message_stop"})
    res = CliRunner().invoke(main, ["report", str(path)])
    assert res.exit_code == 2
    assert f"{path}:1" in res.output and "usage" in res.output


def test_report_merges_responses_stream_events(tmp_path: Path) -> None:
    resp = {"id": "resp_1", "object": "response", "created_at": 1785000000,
            "model": "gpt-5.6-sol", "usage": None}
    done = {**resp, "usage": {"input_tokens": 1000, "output_tokens": 3,
                              "input_tokens_details": {"cached_tokens": 0,
                                                       "cache_write_tokens": 0}}}
    path = _write(tmp_path / "r.jsonl", {"type": "response.created", "response": resp},
                  {"type": "response.output_text.delta", "delta": "x"},
                  {"type": "response.completed", "response": done})
    data = _report(path)
    assert data["total"]["requests"] == 1
    # priced at the stream's created_at (2026-07-25): the $5/MTok input row, not today's $4
    from datetime import UTC, datetime

    from promptcache.catalog import get_prices

    then = get_prices("gpt-5.6-sol", at=datetime.fromtimestamp(1785000000, tz=UTC))
    assert then.input == 5
    assert Decimal(data["total"]["cost_usd"]) == (1000 * then.input + 3 * then.output) / MTOK


# --------------------------------------------------------------------------------- F4 report


def test_report_lists_a_cold_write_group_once_with_its_final_count(tmp_path: Path) -> None:
    from promptcache.usage import JsonlSink

    path = tmp_path / "fan.jsonl"
    with JsonlSink(path) as sink:
        for r in _fan_out(5):
            sink.write(r)
    data = _report(path)
    assert data["events"]["concurrent_cold_writes"] == 1
    cold = [m for m in data["messages"] if "cold prefix" in m]
    assert cold == [cold[0]] and cold[0].startswith("5 requests wrote the same cold prefix")
    assert "20,000 tokens written again" in cold[0]


def test_report_merges_chat_completion_chunks_of_one_id(tmp_path: Path) -> None:
    def chunk(cid: str, usage: dict[str, Any] | None) -> dict[str, Any]:
        return {"id": cid, "object": "chat.completion.chunk", "created": 1795000000,
                "model": "gpt-4o", "choices": [] if usage else [{"index": 0, "delta": {}}],
                "usage": usage}

    usage = {"prompt_tokens": 2000, "completion_tokens": 7,
             "prompt_tokens_details": {"cached_tokens": 1024}}
    path = _write(tmp_path / "c.jsonl", chunk("a", None), chunk("a", None), chunk("a", usage),
                  chunk("b", None), chunk("b", usage))
    total = _report(path)["total"]
    assert (total["requests"], total["cache_read"], total["output"]) == (2, 2048, 14)
    assert total["cost_usd"] is not None


def test_tracker_does_not_take_a_relative_start_for_a_date() -> None:
    """A record with ``start`` 30.0 (a log that starts at 0) was priced at 1970's catalog row
    (claude-sonnet-5-5's $0.20 read price); it is no date: today's row ($0.10)."""
    t = UsageTracker(warn=False)
    r = UsageRecord(provider="anthropic", model="claude-sonnet-5-5", uncached_input=0,
                    cache_read=1_000_000, cache_write=0, output=0, start=30.0)
    dated = r.model_copy(update={"start": 1790000000.0})  # 2026-09-21: the old row
    today = r.model_copy(update={"start": None})
    cost, old, now = t.cost_of(r), t.cost_of(dated), t.cost_of(today)
    assert cost is not None and old is not None and now is not None
    assert old.total != now.total  # the model has dated rows
    assert cost.total == now.total


def test_report_prices_openai_shaped_usage_as_a_gemini_model(tmp_path: Path) -> None:
    """Review 13: Gemini's and DeepSeek's OpenAI- (and Anthropic-) compatible endpoints return
    those usage shapes, so `--model gemini-2.5-flash` on OpenAI-shaped usage is priced (a
    refusal added earlier this session, exit 2, is gone)."""
    log = tmp_path / "g.jsonl"
    log.write_text(json.dumps({"usage": {"prompt_tokens": 5000, "completion_tokens": 10,
                                         "prompt_tokens_details": {"cached_tokens": 4000}}})
                   + "\n")
    res = CliRunner().invoke(main, ["report", str(log), "--model", "gemini-2.5-flash",
                                    "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["total"]["cost_usd"] is not None


def test_report_counts_prompts_under_the_minimum_as_not_cacheable(tmp_path: Path) -> None:
    """New-user trial 13 (BR-15 partial): the below-minimum classification existed in the
    Python API but `report` never said why a short prompt's hit rate is 0 %."""
    log = tmp_path / "u.jsonl"
    lines = [{"usage": {"prompt_tokens": 912, "completion_tokens": 150,
                        "prompt_tokens_details": {"cached_tokens": 0}}},
             {"usage": {"prompt_tokens": 2006, "completion_tokens": 300,
                        "prompt_tokens_details": {"cached_tokens": 1920}}},
             {"model": "claude-sonnet-4-6", "usage": {"input_tokens": 800, "output_tokens": 1,
                                                      "cache_read_input_tokens": 0,
                                                      "cache_creation_input_tokens": 0}}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = CliRunner().invoke(main, ["report", str(log), "--format", "json"])
    assert res.exit_code == 0, res.output
    notes = {(n["model"], n["minimum"]): n["count"] for n in json.loads(res.output)["not_cacheable"]}
    assert notes == {(None, 1024): 1, ("claude-sonnet-4-6", 1024): 1}
    text = CliRunner().invoke(main, ["report", str(log)]).output
    assert "not cacheable (1 record): prompt under the 1,024-token minimum: nothing" in text


def test_a_12h_write_is_priced_at_the_documented_write_rate_with_a_note() -> None:
    """Review 12 follow-up: a Responses write reported as ttl_12h (openai-python 3.57.0; the
    reference lists 30m only) was priced at the write rate without saying it assumed so."""
    tracker = UsageTracker()
    rec = UsageRecord(provider="openai-responses", model="gpt-5.6", uncached_input=10,
                      cache_read=0, cache_write=3528, cache_write_ttl="12h", output=1)
    tracker.add(rec)
    cost = tracker.costs[-1]
    assert cost is not None and cost.cache_write is not None
    assert any(n.startswith("write TTL 12h") for n in cost.notes)
    tracker.add(rec.model_copy(update={"cache_write_ttl": "30m"}))
    assert tracker.costs[-1].cache_write == cost.cache_write and not tracker.costs[-1].notes


def test_report_keeps_usage_chunks_without_an_id_apart(tmp_path: Path) -> None:
    """Review 13: two requests' final usage chunks logged without their ids were merged into
    one record (per counter the maximum): a request and its tokens vanished."""
    def chunk(prompt: int, cached: int, out: int) -> dict[str, Any]:
        return {"object": "chat.completion.chunk", "model": "gpt-4o", "choices": [],
                "usage": {"prompt_tokens": prompt, "completion_tokens": out,
                          "prompt_tokens_details": {"cached_tokens": cached}}}

    log = tmp_path / "c.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in (chunk(5000, 4864, 10),
                                                          chunk(5100, 4992, 20))))
    res = CliRunner().invoke(main, ["report", str(log), "--format", "json"])
    assert res.exit_code == 0, res.output
    total = json.loads(res.output)["total"]
    assert (total["requests"], total["cache_read"], total["output"]) == (2, 9856, 30)


@pytest.mark.parametrize("order", [(10, 18), (18, 10)])
def test_deepseek_is_priced_at_each_record_s_time_of_day(order: tuple[int, int]) -> None:
    """Review 13: the tracker cached prices per model and UTC day, but genai-prices gives
    DeepSeek off-peak prices (16:30-00:30 UTC): the day's first record priced them all."""
    from datetime import UTC, datetime

    from promptcache.catalog import get_prices

    def at(hour: int) -> datetime:
        return datetime(2026, 11, 2, hour, 0, tzinfo=UTC)

    tracker = UsageTracker()
    for hour in order:
        tracker.add(UsageRecord(provider="deepseek", model="deepseek-chat",
                                uncached_input=1_000_000, cache_read=0, cache_write=0,
                                output=0, start=at(hour).timestamp()))
    for rec, cost in zip(tracker.records, tracker.costs, strict=True):
        assert rec.start is not None and cost is not None
        hour = datetime.fromtimestamp(rec.start, UTC).hour
        assert cost.total == get_prices("deepseek-chat", at=at(hour)).input
    assert get_prices("deepseek-chat", at=at(10)).input != get_prices("deepseek-chat",
                                                                        at=at(18)).input


def test_a_short_gpt56_prompt_without_cache_write_tokens_is_priced(tmp_path: Path) -> None:
    """Review 13: GPT-5.6 chat usage off the Standard tier omits cache_write_tokens; under the
    1,024-token minimum nothing can be written, yet the record's cost (and the log's total)
    was unknown while report also called it "not cacheable"."""
    log = tmp_path / "g.jsonl"
    log.write_text(json.dumps({"model": "gpt-5.6", "usage": {
        "prompt_tokens": 500, "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 0}}}) + "\n")
    out = json.loads(CliRunner().invoke(main, ["report", str(log), "--format", "json"]).output)
    assert out["cost_unknown"] == [] and out["total"]["cost_usd"] is not None
    assert out["total"]["uncached_input"] == 500 and out["not_cacheable"][0]["count"] == 1
    long = tmp_path / "l.jsonl"  # above the minimum the writes stay unknown
    long.write_text(json.dumps({"model": "gpt-5.6", "usage": {
        "prompt_tokens": 1500, "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 0}}}) + "\n")
    out = json.loads(CliRunner().invoke(main, ["report", str(long), "--format", "json"]).output)
    assert out["total"]["cost_usd"] is None and out["cost_unknown"]
