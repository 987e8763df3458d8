"""A request sent no later than A cannot read what A writes (an entry is readable once the
response writing it has begun, hosted-api-rules.md 1.9). ``diff`` / ``explain`` took a negative
or zero gap from the timestamps as "within the TTL" and predicted a full read (new-user trial
14, F7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from promptcache.diff import diff, explain
from tests.cases import filler


def _request(question: str = "q") -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": 64,
            "system": [{"type": "text", "text": filler(3000),
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": question}]}


def test_b_sent_before_or_with_a_reads_nothing_of_a() -> None:
    for b_at in ("2026-11-30T09:00:00Z", "2026-11-30T10:00:00Z"):  # before A, with A
        r = diff(_request(), _request(), timestamps=("2026-11-30T10:00:00Z", b_at))
        assert r.verdict == "miss_explained" and r.cause == "sent_before_a"
        assert r.predicted is not None and r.predicted.cache_read == 0
        assert r.lost_tokens and r.lost_tokens > 2000
        check = next(c for c in r.checks if c.name == "gap < TTL")
        assert check.passed is False and "no later than A" in (check.detail or "")
    after = diff(_request(), _request(), timestamps=("2026-11-30T10:00:00Z",
                                                     "2026-11-30T10:01:00Z"))
    assert after.verdict == "no_miss"


def test_explain_does_not_compare_with_a_line_sent_later(tmp_path: Path) -> None:
    # logged at response end: line 2 started before line 1
    log = tmp_path / "requests.jsonl"
    lines = [{"request": _request(), "timestamp": "2026-11-30T10:10:00Z", "session_id": "s"},
             {"request": _request(), "timestamp": "2026-11-30T10:00:00Z", "session_id": "s"}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    report = explain(log)
    assert report.misses == 0
    assert report.requests[1].compared_with_line is None
    # the same start: both wrote (concurrent cold writes), a miss
    lines[1]["timestamp"] = "2026-11-30T10:10:00Z"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert explain(log).requests[1].cause == "sent_before_a"
