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

from promptcache._errors import InvalidRequestError
from promptcache.cli import main
from promptcache.usage import JsonlSink, UsageRecord, UsageTracker
from promptcache.usage.parse import parse_usage
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
