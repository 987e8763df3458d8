"""Review 15: reading usage logs (``promptcache report``, ``iter_usage_log_lines``) and records.

Absurd counts (F4), record times in milliseconds / past 9999 (F7), line times (F3), streams
logged chunk by chunk (F5, F6), ordinary lines that used to abort a report (F12), a BOM (F13.3),
and the ``inference_geo`` / ``speed`` record fields (F2, F9)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from promptcache._errors import InputError, InvalidRequestError
from promptcache.cli import main
from promptcache.usage import JsonlSink, UsageRecord, UsageTracker
from promptcache.usage.parse import parse_stream, parse_usage
from promptcache.usage.sinks import iter_jsonl, iter_usage_log_lines

#: 2026-10-01T00:00:00Z
OCT1 = 1790812800


def _write(tmp_path: Path, *objs: object, name: str = "log.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(o) for o in objs) + "\n", encoding="utf-8")
    return path


def _records(path: Path) -> list[tuple[str, UsageRecord]]:
    return list(iter_usage_log_lines(path))


def _anthropic(**usage: Any) -> dict[str, Any]:
    base = {"input_tokens": 10, "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0, "output_tokens": 1}
    return {"type": "message", "model": "claude-opus-4-6", "usage": {**base, **usage}}


# ---------------------------------------------------------------------------- F4 absurd counts


@pytest.mark.parametrize("value", [1e30, 10**35, 1e308, 2.0**60])
def test_absurd_count_is_an_error_naming_the_field(value: float) -> None:
    with pytest.raises(InvalidRequestError) as err:
        parse_usage(_anthropic(output_tokens=value)["usage"])
    assert err.value.path == "usage.output_tokens"
    assert "output_tokens" in err.value.reason


def test_large_but_plausible_count_is_kept_exactly() -> None:
    rec = parse_usage(_anthropic(cache_read_input_tokens=2_000_000.0)["usage"])
    assert rec.cache_read == 2_000_000


def test_record_refuses_a_count_beyond_the_bound() -> None:
    with pytest.raises(ValidationError):
        UsageRecord(provider="anthropic", output=10**35)
    with pytest.raises(ValidationError):
        UsageRecord(provider="anthropic", breakpoint_hashes=("a",), breakpoint_tokens=(10**35,))


@pytest.mark.parametrize("value", [1e30, 10**35, 1e308])
def test_report_exits_2_on_an_absurd_count(tmp_path: Path, value: float) -> None:
    path = tmp_path / "c.jsonl"
    bad = json.dumps(_anthropic()).replace('"output_tokens": 1', f'"output_tokens": {value!r}')
    path.write_text(json.dumps(_anthropic()) + "\n" + bad + "\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    assert res.exit_code == 2
    assert res.stderr.startswith(f"promptcache: {path}:2: ")
    assert "output_tokens" in res.stderr


# ---------------------------------------------------------------------------- F7 record times


def test_record_start_in_milliseconds_is_read_as_milliseconds() -> None:
    rec = UsageRecord(provider="anthropic", start=OCT1 * 1000.0, end=OCT1 * 1000.0 + 1500)
    assert rec.start == OCT1 and rec.end == OCT1 + 1.5


@pytest.mark.parametrize("value", [1e300, float("nan"), float("inf"), 1e17])
def test_record_start_out_of_range_is_a_validation_error(value: float) -> None:
    with pytest.raises(ValidationError) as err:
        UsageRecord(provider="anthropic", start=value)
    assert err.value.errors()[0]["loc"] == ("start",)


def test_tracker_add_takes_a_millisecond_start_and_prices_its_date() -> None:
    rec = UsageRecord(provider="anthropic", model="claude-sonnet-5-5", uncached_input=0,
                      cache_read=1_000_000, cache_write=0, output=0, start=OCT1 * 1000.0)
    tracker = UsageTracker(warn=False)
    tracker.add(rec)  # raised ValueError("year 58718 is out of range")
    day = UsageRecord(provider="anthropic", model="claude-sonnet-5-5", uncached_input=0,
                      cache_read=1_000_000, cache_write=0, output=0, start=float(OCT1))
    cost = tracker.costs[0]
    assert cost is not None and cost.total == UsageTracker(warn=False).cost_of(day).total  # type: ignore[union-attr]


def test_parse_usage_start_out_of_range_names_the_field() -> None:
    with pytest.raises(InvalidRequestError) as err:
        parse_usage(_anthropic(), start=1e300)
    assert err.value.path == "start"
    assert parse_usage(_anthropic(), start=OCT1 * 1000).start == OCT1


def test_report_record_line_start_in_ms_and_past_9999(tmp_path: Path) -> None:
    line = {"provider": "anthropic", "model": "claude-sonnet-5-5", "start": OCT1 * 1000,
            "uncached_input": 0, "cache_read": 1000000, "cache_write": 0, "output": 0}
    path = _write(tmp_path, line)
    res = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    ((_, rec),) = _records(path)
    assert rec.start == OCT1
    path = _write(tmp_path, {**line, "start": 1e300})
    res = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    assert res.exit_code == 2
    assert res.stderr.startswith(f"promptcache: {path}:1: ") and "start" in res.stderr
    assert "Traceback" not in res.output


def test_jsonl_sink_record_with_ms_start_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "u.jsonl"
    with JsonlSink(path) as sink:
        sink.write(UsageRecord(provider="anthropic", start=OCT1 * 1000.0))
    assert [r.start for r in iter_jsonl(path)] == [OCT1]


# ---------------------------------------------------------------------------- F3 line times

SONNET55_READ = {"type": "message", "model": "claude-sonnet-5-5",
                 "usage": {"input_tokens": 0, "cache_read_input_tokens": 1000000,
                           "cache_creation_input_tokens": 0, "output_tokens": 0}}


@pytest.mark.parametrize("value", ["2026-10-01", "2026/10/01", "20261001", "1790812800",
                                   "Thu, 01 Oct 2026 12:00:00 GMT", OCT1 * 1000])
def test_line_date_without_time_of_day_dates_the_line(tmp_path: Path, value: object) -> None:
    path = _write(tmp_path, {**SONNET55_READ, "created_at": value})
    ((_, rec),) = _records(path)
    assert rec.start is not None and OCT1 <= rec.start < OCT1 + 86400


def test_report_prices_a_date_only_line_at_that_days_price(tmp_path: Path) -> None:
    # Sonnet 5.5 cache read: 0.20 per MTok before 2026-10-07, 0.10 after (reference 1.6)
    dated = _write(tmp_path, {**SONNET55_READ, "created_at": "2026-10-01"}, name="a.jsonl")
    timed = _write(tmp_path, {**SONNET55_READ, "created_at": "2026-10-01T12:00:00Z"},
                   name="b.jsonl")
    totals = []
    for path in (dated, timed):
        res = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
        assert res.exit_code == 0, res.output
        totals.append(json.loads(res.stdout)["total"]["cost_usd"])
    assert totals[0] == totals[1]
    tracker = UsageTracker(warn=False)
    ((_, rec),) = _records(dated)
    later = rec.model_copy(update={"start": OCT1 + 30 * 86400})
    assert tracker.cost_of(rec) != tracker.cost_of(later)  # the date matters for this model


def test_small_elapsed_time_does_not_hide_the_real_date(tmp_path: Path) -> None:
    path = _write(tmp_path, {"time": 2.5, "created_at": "2026-10-01T12:00:00Z", **SONNET55_READ})
    ((_, rec),) = _records(path)
    assert rec.start == OCT1 + 43200
    path = _write(tmp_path, {"time": 2.5, **SONNET55_READ, "model": "claude-sonnet-5-5"})
    ((_, rec),) = _records(path)
    assert rec.start == 2.5  # a relative-time log keeps its relative time


@pytest.mark.parametrize("value", ["Oct 1 2026", "garbage", "2026-02-30", -5])
def test_unreadable_line_time_is_an_error_not_todays_price(tmp_path: Path, value: object) -> None:
    path = _write(tmp_path, {**SONNET55_READ, "created_at": value})
    with pytest.raises(InputError) as err:
        _records(path)
    assert err.value.file == f"{path}:1" and "created_at" in err.value.reason
    res = CliRunner().invoke(main, ["report", str(path)])
    assert res.exit_code == 2 and res.stderr.startswith(f"promptcache: {path}:1: created_at")


def test_unreadable_key_beside_a_readable_date_is_not_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path, {**SONNET55_READ, "time": "n/a", "created_at": "2026-10-01"})
    ((_, rec),) = _records(path)
    assert rec.start == OCT1


# ---------------------------------------------------------------------------- F5 one id, one request

def _chunk(cid: str, usage: dict[str, Any] | None, role: bool = False,
           choices: bool = True) -> dict[str, Any]:
    delta = {"role": "assistant", "content": ""} if role else {"content": "a"}
    return {"id": cid, "object": "chat.completion.chunk", "created": 1793491200,
            "model": "gpt-5", "choices": [{"index": 0, "delta": delta}] if choices else [],
            "usage": usage}


def _u(completion: int, cached: int = 4096) -> dict[str, Any]:
    return {"prompt_tokens": 5000, "completion_tokens": completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def test_continuous_usage_chunks_of_one_id_are_one_request(tmp_path: Path) -> None:
    path = _write(tmp_path, _chunk("cmpl-9", _u(0), role=True), _chunk("cmpl-9", _u(1)),
                  _chunk("cmpl-9", _u(2)), _chunk("cmpl-9", _u(3)),
                  _chunk("cmpl-9", _u(3), choices=False))
    ((where, rec),) = _records(path)
    assert where == f"{path}:1"
    assert (rec.uncached_input, rec.cache_read, rec.output) == (904, 4096, 3)


def test_usage_chunk_logged_twice_is_one_request(tmp_path: Path) -> None:
    path = _write(tmp_path, _chunk("c-1", None, role=True), _chunk("c-1", _u(100), choices=False),
                  _chunk("c-1", _u(100), choices=False))
    assert len(_records(path)) == 1


def test_same_id_reused_by_a_new_reply_after_the_usage_chunk_is_another_request(
        tmp_path: Path) -> None:
    # servers that give every completion one id: a chunk opening a reply starts a new one
    path = _write(tmp_path, _chunk("x", None, role=True), _chunk("x", _u(1), choices=False),
                  _chunk("x", None, role=True), _chunk("x", _u(2), choices=False))
    assert [r.output for _, r in _records(path)] == [1, 2]


def test_gemini_stream_chunks_of_one_response_id_are_one_request(tmp_path: Path) -> None:
    def chunk(n: int, rid: str = "r-1") -> dict[str, Any]:
        return {"candidates": [{"content": {"parts": [{"text": "a"}], "role": "model"}}],
                "usageMetadata": {"promptTokenCount": 10000, "cachedContentTokenCount": 8000,
                                  "candidatesTokenCount": n},
                "modelVersion": "gemini-2.5-pro", "responseId": rid}
    path = _write(tmp_path, chunk(1), chunk(2), chunk(3), chunk(5, "r-2"))
    got = [(r.uncached_input, r.cache_read, r.output, r.model) for _, r in _records(path)]
    assert got == [(2000, 8000, 3, "gemini-2.5-pro"), (2000, 8000, 5, "gemini-2.5-pro")]


def _message_start(mid: str) -> dict[str, Any]:
    return {"type": "message_start", "message": {
        "id": mid, "type": "message", "model": "claude-opus-4-6",
        "usage": {"input_tokens": 100, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 10000, "output_tokens": 1}}}


DELTA = {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 200}}
STOP = {"type": "message_stop"}


def test_anthropic_stream_logged_twice_with_one_id_is_one_request(tmp_path: Path) -> None:
    path = _write(tmp_path, _message_start("msg_1"), DELTA, DELTA, STOP,
                  _message_start("msg_1"), DELTA, STOP, _message_start("msg_2"), DELTA, STOP)
    got = [(r.request_id, r.cache_read, r.output) for _, r in _records(path)]
    assert got == [("msg_1", 10000, 200), ("msg_2", 10000, 200)]


# ---------------------------------------------------------------------------- F6 cut Anthropic stream

def test_anthropic_stream_cut_before_message_delta_has_unknown_output(tmp_path: Path) -> None:
    content = {"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "a"}}
    path = _write(tmp_path, _message_start("msg_1"), content, _message_start("msg_2"), DELTA,
                  STOP)
    (_, cut), (_, whole) = _records(path)
    assert cut.output is None and any(f.startswith("stream_incomplete") for f in cut.flags)
    assert cut.cache_read == 10000
    assert whole.output == 200 and whole.flags == ()
    cost = UsageTracker(warn=False).cost_of(cut)
    assert cost is not None and cost.total is None and cost.notes
    api = parse_stream([_message_start("msg_1")])
    assert api.output is None and api.flags == cut.flags
    assert parse_stream([_message_start("m"), DELTA]).output == 200


# ---------------------------------------------------------------------------- F12 ordinary lines

def test_interrupted_chat_stream_is_a_request_with_unknown_usage(tmp_path: Path) -> None:
    path = _write(tmp_path, _chunk("a", None, role=True), _chunk("b", None, role=True),
                  _chunk("b", _u(100), choices=False))
    (w1, cut), (w2, whole) = _records(path)
    assert (w1, w2) == (f"{path}:1", f"{path}:2")
    assert cut.model == "gpt-5" and cut.request_id == "a"
    assert (cut.uncached_input, cut.cache_read, cut.output) == (None, None, None)
    assert cut.flags and cut.flags[0].startswith("stream_incomplete")
    assert whole.cache_read == 4096
    res = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    total = json.loads(res.stdout)["total"]
    assert total["requests"] == 2 and total["cost_usd"] is None


@pytest.mark.parametrize("line", [
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    {"error": {"message": "Rate limit", "type": "requests", "code": "rate_limit_exceeded"}},
    {"request": {"model": "gpt-5", "messages": []},
     "response": {"error": {"message": "Rate limit", "code": "rate_limit_exceeded"}}},
    {"id": "batch_req_2", "custom_id": "r2", "response": None,
     "error": {"code": "batch_expired", "message": "expired"}},
    {"id": "batch_req_3", "custom_id": "r3", "response": {
        "status_code": 400, "request_id": "y",
        "body": {"error": {"message": "bad", "type": "invalid_request_error"}}}, "error": None},
    {"custom_id": "r4", "result": {"type": "errored", "error": {
        "type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}}},
    {"custom_id": "r5", "result": {"type": "expired"}},
])
def test_failed_request_line_is_skipped_with_a_warning(tmp_path: Path,
                                                       line: dict[str, Any]) -> None:
    path = _write(tmp_path, _anthropic(), line)
    res = CliRunner().invoke(main, ["report", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["total"]["requests"] == 1
    assert res.stderr.startswith(f"promptcache: {path}:2: ") and "skipped" in res.stderr


def test_openai_batch_output_line_is_read(tmp_path: Path) -> None:
    line = {"id": "batch_req_1", "custom_id": "r1", "response": {
        "status_code": 200, "request_id": "x", "body": {
            "object": "chat.completion", "model": "gpt-5", "created": 1793491200,
            "usage": {"prompt_tokens": 10000, "completion_tokens": 1000,
                      "prompt_tokens_details": {"cached_tokens": 8192}}}}, "error": None}
    ((_, rec),) = _records(_write(tmp_path, line))
    assert (rec.model, rec.uncached_input, rec.cache_read, rec.output, rec.start) == (
        "gpt-5", 1808, 8192, 1000, 1793491200)
    assert parse_usage(line).cache_read == 8192


def test_anthropic_batch_result_is_read_with_its_batch_tier(tmp_path: Path) -> None:
    line = {"custom_id": "r1", "result": {"type": "succeeded", "message": {
        "id": "msg_1", "type": "message", "model": "claude-opus-4-6",
        "usage": {"input_tokens": 1000, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 10000, "output_tokens": 100,
                  "service_tier": "batch"}}}}
    ((_, rec),) = _records(_write(tmp_path, line))
    assert (rec.model, rec.cache_read, rec.output, rec.service_tier) == (
        "claude-opus-4-6", 10000, 100, "batch")
    assert parse_usage(line).service_tier == "batch"


def test_bedrock_converse_stream_events_are_one_request(tmp_path: Path) -> None:
    meta = {"metadata": {"usage": {"inputTokens": 1000, "outputTokens": 100,
                                   "cacheReadInputTokens": 9000, "cacheWriteInputTokens": 0},
                         "metrics": {"latencyMs": 500}}}
    events = [{"messageStart": {"role": "assistant"}},
              {"contentBlockDelta": {"delta": {"text": "hi"}, "contentBlockIndex": 0}},
              {"messageStop": {"stopReason": "end_turn"}}]
    path = _write(tmp_path, *events, meta, *events)
    (w1, rec), (w2, cut) = _records(path)
    assert (w1, w2) == (f"{path}:1", f"{path}:5")
    assert (rec.provider, rec.uncached_input, rec.cache_read, rec.output) == (
        "bedrock", 1000, 9000, 100)
    assert cut.cache_read is None and cut.flags[0].startswith("stream_incomplete")


# ---------------------------------------------------------------------------- F13.3 BOM

def test_utf8_bom_at_the_start_of_a_log_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (json.dumps(_anthropic()) + "\n").encode() * 2)
    assert len(_records(path)) == 2
    text = "\ufeff" + json.dumps(_anthropic()) + "\n"
    assert len(list(iter_usage_log_lines("-", text=text))) == 1
    res = CliRunner().invoke(main, ["report", "-"], input=text)
    assert res.exit_code == 0, res.output


# ---------------------------------------------------------------------------- F2 / F9 fields

def test_inference_geo_is_read_from_anthropic_usage_and_persisted(tmp_path: Path) -> None:
    rec = parse_usage(_anthropic(inference_geo="us"))
    assert rec.inference_geo == "us"
    start = {**_message_start("m")}
    start["message"] = {**start["message"], "usage": {
        **start["message"]["usage"], "inference_geo": "us"}}
    assert parse_stream([start, DELTA]).inference_geo == "us"
    assert parse_usage(_anthropic()).inference_geo is None
    path = tmp_path / "u.jsonl"
    with JsonlSink(path) as sink:
        sink.write(rec.model_copy(update={"speed": "fast"}))
    (back,) = iter_jsonl(path)
    assert (back.inference_geo, back.speed) == ("us", "fast")
    ((_, again),) = _records(path)
    assert (again.inference_geo, again.speed) == ("us", "fast")


def test_speed_is_read_from_a_logged_request(tmp_path: Path) -> None:
    line = {"request": {"model": "claude-opus-4-8", "speed": "fast", "max_tokens": 100,
                        "messages": [{"role": "user", "content": "hi"}]},
            "response": {"id": "msg_f", "type": "message", "model": "claude-opus-4-8",
                         "usage": {"input_tokens": 10000, "cache_creation_input_tokens": 0,
                                   "cache_read_input_tokens": 0, "output_tokens": 1000}}}
    plain = {**line, "request": {"model": "claude-opus-4-8", "max_tokens": 100,
                                 "messages": [{"role": "user", "content": "hi"}]}}
    (_, fast), (_, std) = _records(_write(tmp_path, line, plain))
    assert (fast.speed, std.speed) == ("fast", None)
    ((_, top),) = _records(_write(tmp_path, {**_anthropic(), "speed": "fast"}))
    assert top.speed == "fast"


def test_responses_stream_cut_before_completed_is_a_request_with_unknown_usage(
        tmp_path: Path) -> None:
    resp = {"id": "resp_1", "object": "response", "created_at": 1793491200,
            "model": "gpt-5", "usage": None}
    path = _write(tmp_path, {"type": "response.created", "response": resp},
                  {"type": "response.output_text.delta", "delta": "x"})
    ((_, rec),) = _records(path)
    assert (rec.provider, rec.model, rec.request_id, rec.start) == (
        "openai-responses", "gpt-5", "resp_1", 1793491200)
    assert rec.cache_read is None and rec.flags[0].startswith("stream_incomplete")
