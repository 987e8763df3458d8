"""Log timestamps (``promptcache.lint.sources.request_json.parse_timestamp``): 0 is a time.

Logs written with relative times start at 0 (the simulator's replay format too); before the
fix their first request had no time, so PC404 counted 39 of 40 requests in the minute
(new-user report, problem 7).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptcache.lint.api import lint_paths
from promptcache.lint.sources.request_json import parse_timestamp, timestamp_of
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
    None, -1, -0.5, float("nan"), float("inf"), float("-inf"), pytest.param(10**400, id="huge"),
    True, False,
    "", "yesterday", [], {},
])
def test_unknown_times(value: Any) -> None:
    assert parse_timestamp(value) is None


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


@pytest.mark.parametrize("value", [0, 1.5, 1_700_000_000, 99_999_999_999, 100_000_000_001,
                                   5e11, 1_700_000_000_000, 1_700_000_000_123])
def test_lint_and_explain_read_a_number_alike(value: float) -> None:
    """The same log is read by lint and by explain: one rule for seconds vs milliseconds
    (above 1e11 a number is milliseconds: 1e11 s would be the year 5138)."""
    from promptcache.diff._inputs import parse_timestamp as explain_timestamp

    assert parse_timestamp(value) == pytest.approx(explain_timestamp(value))
