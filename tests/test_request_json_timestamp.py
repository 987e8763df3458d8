"""Log timestamps (``promptcache._times``, read alike by lint, diff and explain): 0 is a time.

Logs written with relative times start at 0 (the simulator's replay format too); before the
fix their first request had no time, so PC404 counted 39 of 40 requests in the minute
(new-user report, problem 7).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache._times import TIME_KEYS, parse_timestamp, timestamp_of
from promptcache.cli import main
from promptcache.lint.api import lint_paths
from tests.cases import filler


@pytest.mark.parametrize(("value", "expected"), [
    (0, 0.0),
    (0.0, 0.0),
    (1.5, 1.5),
    (1_760_000_000, 1_760_000_000.0),
    (1_760_000_000_500, 1_760_000_000.5),  # milliseconds
    ("1970-01-01T00:00:00Z", 0.0),
    ("2026-11-29T10:00:00Z", 1_795_946_400.0),
])
def test_valid_times(value: Any, expected: float) -> None:
    assert parse_timestamp(value) == expected


@pytest.mark.parametrize("value", [
    float("nan"), float("inf"), float("-inf"), pytest.param(10**400, id="huge"),
    True, False, "", "yesterday", [], {},
])
def test_values_that_are_not_times(value: Any) -> None:
    with pytest.raises(ValueError, match="not a timestamp"):
        parse_timestamp(value)
    assert timestamp_of({"ts": value}) is None  # skipped when reading a log leniently
    with pytest.raises(ValueError):
        timestamp_of({"ts": value}, strict=True)


def test_no_time_and_negative_times() -> None:
    assert parse_timestamp(None) is None
    assert timestamp_of({"ts": -1}) is None and timestamp_of({"ts": -0.5}) is None
    with pytest.raises(ValueError, match="negative"):
        timestamp_of({"ts": -1}, strict=True)


def test_timestamp_of_keeps_zero() -> None:
    assert timestamp_of({"ts": 0, "request": {}}) == 0.0
    assert timestamp_of({"timestamp": -3, "ts": 0}) == 0.0  # first valid key wins
    assert timestamp_of({"ts": None}) is None


def test_timestamp_of_prefers_a_positive_time() -> None:
    """A placeholder 0 does not hide a real time under a later key (review 4, item 4)."""
    assert timestamp_of({"timestamp": 0, "created_at": 1_700_000_300}) == 1_700_000_300.0
    assert timestamp_of({"timestamp": 0, "created_at": "2026-11-29T10:00:00Z"}) \
        == 1_795_946_400.0
    # key order still decides between positive times; 0 only when nothing else is positive
    assert timestamp_of({"timestamp": 5, "ts": 7}) == 5.0
    assert timestamp_of({"timestamp": 0, "created_at": 0}) == 0.0
    assert timestamp_of({"timestamp": 0, "created_at": "soon"}) == 0.0


def _request(key: str) -> dict[str, Any]:
    return {"model": "gpt-5", "prompt_cache_key": key,
            "messages": [{"role": "system", "content": filler(1200, "hot")},
                         {"role": "user", "content": "What is the status?"}]}


@pytest.mark.parametrize("start", [0.0, 1000.0])
def test_hot_key_counts_the_request_at_time_zero(tmp_path: Path, start: float) -> None:
    """40 requests at t = start, start + 1.5, ..., start + 58.5 s: all 40 in one minute."""
    log = tmp_path / "hot.jsonl"
    log.write_text("".join(json.dumps({"ts": start + 1.5 * i, "request": _request("tenant-42")})
                           + "\n" for i in range(40)))
    found = [f for f in lint_paths([str(log)]).findings if f.code == "PC404"]
    assert len(found) == 1
    assert found[0].details["requests_per_minute"] == 40


def test_zero_placeholder_does_not_shadow_created_at(tmp_path: Path) -> None:
    """40 requests 5 minutes apart by ``created_at``, each with ``"timestamp": 0``: no PC404."""
    log = tmp_path / "ph.jsonl"
    log.write_text("".join(json.dumps({"request": _request("tenant-42"), "timestamp": 0,
                                       "created_at": 1_700_000_000 + 300 * i}) + "\n"
                           for i in range(40)))
    assert [f for f in lint_paths([str(log)]).findings if f.code == "PC404"] == []


@pytest.mark.parametrize("value", [0, 1.5, 99_999_999_999, 100_000_000_001, 5e11,
                                   1_700_000_000_123])
def test_seconds_or_milliseconds(value: float) -> None:
    """Above 1e11 a number is milliseconds (1e11 s would be the year 5138)."""
    assert parse_timestamp(value) == pytest.approx(value / 1000 if value > 1e11 else value)


def _cached_request() -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": 64,
            "system": [{"type": "text", "text": filler(1500, "sys"),
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("key", TIME_KEYS)
def test_diff_and_explain_read_every_time_key(tmp_path: Path, key: str) -> None:
    """The same request 400 s later (past the 5-minute TTL): diff and explain both find the
    expiry, whichever key the log keeps the time under. Before, diff read 4 keys and explain 7,
    each a different set, and lint a third one: the TTL check was silently skipped."""
    req = _cached_request()
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"request": req, key: 1_700_000_000}))
    b.write_text(json.dumps({"request": req, key: 1_700_000_400}))
    runner = CliRunner()
    out = runner.invoke(main, ["diff", str(a), str(b), "--format", "json"])
    assert out.exit_code == 1, out.output
    assert json.loads(out.output)["cause"] == "ttl_expired"
    log = tmp_path / "log.jsonl"
    log.write_text(a.read_text() + "\n" + b.read_text() + "\n")
    out = runner.invoke(main, ["explain", str(log), "--format", "json"])
    assert out.exit_code == 1, out.output
    assert [r["cause"] for r in json.loads(out.output)["requests"]] == [None, "ttl_expired"]


def test_diff_names_the_file_with_a_bad_timestamp(tmp_path: Path) -> None:
    req = _cached_request()
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"request": req, "ts": "yesterday"}))
    b.write_text(json.dumps({"request": req, "ts": 1_700_000_000}))
    out = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert out.exit_code == 2
    assert f"{a}: bad timestamp" in out.output


def test_times_without_an_offset_are_utc_whatever_the_machines_zone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 8: an ISO time without an offset (and a naive datetime) was read in the local
    time zone, so the same log gave other gaps under another TZ; it is UTC, as the usage
    parser reads naive times."""
    import time
    from datetime import datetime

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert parse_timestamp("2025-05-04T14:00:00") == parse_timestamp("2025-05-04T14:00:00Z")
        assert parse_timestamp(datetime(2025, 5, 4, 14)) == 1_746_367_200.0
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


@pytest.mark.parametrize("value", ["2025-05-04", "20250504", "2025-W18-7", 10**30])
def test_a_date_or_an_absurd_number_is_not_a_send_time(value: Any) -> None:
    """Review 8: a date alone read as midnight (same-day lines 0 s apart), and 1e30 was taken."""
    with pytest.raises(ValueError, match="not a timestamp"):
        parse_timestamp(value)


def test_a_bad_time_beside_a_good_one_is_skipped_everywhere() -> None:
    """Review 8: lint skipped ``"timestamp": "n/a"`` beside a real ``created_at`` while diff
    and explain refused the input; all three now take the real time, and refuse only a record
    whose time keys hold no time at all."""
    assert timestamp_of({"timestamp": "n/a", "created_at": 1_700_000_000}, strict=True) \
        == 1_700_000_000.0
    assert timestamp_of({"timestamp": -1, "created_at": 1_700_000_000}, strict=True) \
        == 1_700_000_000.0
    with pytest.raises(ValueError, match="timestamp: not a timestamp"):
        timestamp_of({"timestamp": "n/a"}, strict=True)


def test_a_placeholder_zero_next_to_an_epoch_time_gives_no_gap(tmp_path: Path) -> None:
    """Review 8: line 1 with ``"timestamp": 0``, line 2 with a real time: a 1.7e9-second gap,
    blamed on an expired TTL. A relative time and an epoch time have no gap between them."""
    from promptcache._times import gap_seconds

    assert gap_seconds(0.0, 1_700_000_000.0) is None
    assert gap_seconds(0.0, 400.0) == 400.0
    assert gap_seconds(1_700_000_000.0, 1_700_000_400.0) == 400.0
    req = _cached_request()
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"request": req, "timestamp": 0}) + "\n"
                   + json.dumps({"request": req, "timestamp": 1_700_000_400}) + "\n")
    out = CliRunner().invoke(main, ["explain", str(log), "--format", "json"])
    assert out.exit_code == 0, out.output
    assert [r["cause"] for r in json.loads(out.output)["requests"]] == [None, None]
