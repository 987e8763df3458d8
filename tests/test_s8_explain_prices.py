"""Trial 13: explain prices misses at the line's date (F2), says $0 with no miss (F5), runs
the append-only check on a healthy usage-only log (F9); DeepSeek / Gemini priced from
genai-prices (F8)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.catalog import get_prices
from promptcache.cli import main
from promptcache.diff import explain
from tests.cases import filler

SONNET55 = "claude-sonnet-5-5"
SEPT = datetime(2026, 9, 21, 14, 13, 20, tzinfo=UTC)  # before the 2026-10-07 read price change
NOV = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)


def _request(question: str) -> dict[str, Any]:
    return {"model": SONNET55, "max_tokens": 5,
            "system": [{"type": "text", "text": filler(1500, "sys").strip(),
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": question}]}


def _usage(read: int, write: int) -> dict[str, int]:
    return {"input_tokens": 5, "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read, "output_tokens": 5}


def _ttl_log(start: datetime) -> list[dict[str, Any]]:
    """4 requests of one session; the 4th comes 350 s after the 3rd's read (5m entry expired)
    and rewrites the 2,000 tokens the others read."""
    t0 = start.timestamp()
    steps = [(0, 0, 2000), (200, 2000, 0), (450, 2000, 0), (800, 0, 2000)]
    return [{"request": _request(f"q{k}"), "timestamp": t0 + dt, "session_id": "s",
             "usage": _usage(read, write)} for k, (dt, read, write) in enumerate(steps)]


def _miss_usd(at: datetime, tokens: int) -> float:
    p = get_prices(SONNET55, at=at)
    assert p.cache_write_5m is not None and p.cache_read is not None
    return float(tokens * (p.cache_write_5m - p.cache_read) / Decimal(1_000_000))


# ------------------------------------------------------------------ F2: the line's date


def test_a_miss_is_priced_at_the_price_in_force_on_its_line_s_date() -> None:
    sept, nov = explain(_ttl_log(SEPT)), explain(_ttl_log(NOV))
    for report in (sept, nov):
        assert report.misses == 1 and report.lost_tokens == 2000
        assert report.requests[-1].cause == "ttl_expired"
    # the read price fell from $0.20 to $0.10 on 2026-10-07: the September miss cost more
    # than today's price says (2,000 x ($2.50 - $0.20) / MTok)
    assert _miss_usd(SEPT, 2000) != _miss_usd(NOV, 2000)
    assert sept.miss_cost_usd == pytest.approx(_miss_usd(SEPT, 2000))
    assert sept.miss_cost_usd == pytest.approx(0.0046)
    assert nov.miss_cost_usd == pytest.approx(_miss_usd(NOV, 2000))


def test_a_usage_only_regression_is_priced_at_its_line_s_date() -> None:
    t0 = SEPT.timestamp()
    lines = [{"model": SONNET55, "session_id": "s", "timestamp": t0 + dt, "usage": _usage(r, w)}
             for dt, r, w in ((0, 0, 3000), (60, 3000, 500), (120, 1000, 0))]
    row = explain(lines).requests[-1]
    assert row.status == "prefix_regression" and row.lost_tokens == 2500
    assert row.miss_cost_usd == pytest.approx(_miss_usd(SEPT, 2500))


def test_relative_times_price_at_today_s_rows() -> None:
    """A log in relative seconds (from 0) is not a 1970 log: today's prices."""
    lines = _ttl_log(datetime.fromtimestamp(0, tz=UTC))
    assert explain(lines).miss_cost_usd == pytest.approx(
        _miss_usd(datetime.now(tz=UTC), 2000))


# ------------------------------------------------------------------ F5: no miss costs $0


def test_a_log_without_a_miss_costs_zero_not_unknown(tmp_path: Path) -> None:
    lines = _ttl_log(NOV)[:3]  # cold start and two hits
    report = explain(lines)
    assert report.misses == 0 and report.miss_cost_usd == 0.0
    path = tmp_path / "ok.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = CliRunner().invoke(main, ["explain", str(path)])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "0 misses, 0 tokens rewritten, $0.000000 extra" in text
    assert "unknown" not in text
    out = CliRunner().invoke(main, ["explain", str(path), "--format", "json"])
    assert json.loads(out.output)["miss_cost_usd"] == 0


def test_a_miss_with_unknown_prices_is_still_unknown() -> None:
    lines = [{"model": "my-own-model", "session_id": "s", "usage": _usage(r, w)}
             for r, w in ((0, 3000), (3000, 500), (1000, 0))]
    report = explain(lines)
    assert report.misses == 1 and report.miss_cost_usd is None


# ------------------------------------------------ F9: usage-only logs, healthy or not

BR18_HEALTHY = [(0, 2634), (2634, 398), (3032, 861), (3893, 534)]  # case BR-18's control
BR18 = [(31853, 2230), (34083, 4363), (38446, 2100), (31073, 9600)]


def _usage_log(tmp_path: Path, series: list[tuple[int, int]], name: str) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps({"model": "claude-sonnet-4-5", "session_id": "s1",
                                        "usage": _usage(r, w)}) + "\n" for r, w in series))
    return path


def test_a_healthy_usage_only_log_passes_the_append_only_check(tmp_path: Path) -> None:
    path = _usage_log(tmp_path, BR18_HEALTHY, "h.jsonl")
    out = CliRunner().invoke(main, ["explain", str(path)])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "0 misses" in text
    assert "append-only check read[n] >= read[n-1] + write[n-1] held on all 3 lines" in text
    out = CliRunner().invoke(main, ["explain", str(path), "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["misses"] == 0 and doc["miss_cost_usd"] == 0
    assert [r["status"] for r in doc["requests"]] == ["cold_start", "hit", "hit", "hit"]


def test_the_unhealthy_series_runs_the_same_check(tmp_path: Path) -> None:
    path = _usage_log(tmp_path, BR18, "u.jsonl")
    out = CliRunner().invoke(main, ["explain", str(path)])
    assert out.exit_code == 1, out.output
    text = " ".join(out.output.split())
    assert "prefix_regression" in text and "failed on 1 of 3 lines" in text


def test_a_usage_log_with_nothing_to_compare_is_still_refused(tmp_path: Path) -> None:
    path = _usage_log(tmp_path, BR18_HEALTHY[:1], "one.jsonl")
    out = CliRunner().invoke(main, ["explain", str(path)])
    assert out.exit_code == 2
    assert "no two lines of one session and model" in out.output


def test_explain_help_states_the_usage_only_exit_codes() -> None:
    out = CliRunner().invoke(main, ["explain", "--help"])
    text = " ".join(out.output.split())
    assert "exit 0 when it holds on every pair of lines it compared" in text


# ------------------------------------------------ F8: other providers from genai-prices

AT = date(2026, 11, 1)
