"""Session 9, review 15 report-output findings: F8 (tiny costs), F10 (--write-ttl and the note
on writes without a TTL split), F13.1 (CSV unknown cost) and F13.2 (negative money).

Expected USD by hand from ../shared/reference/hosted-api-rules.md: claude-opus-4-6 (1.6) input
5, 5m write 6.25, 1h write 10, output 25; gpt-5-mini (2.5) input 0.25, output 2.00; gpt-4o
(2.5) input 2.50, cached 1.25, output 10.
"""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.cli import main
from promptcache.usage import UsageTracker

M = Decimal(1_000_000)


def _log(tmp_path: Path, *lines: dict[str, Any]) -> Path:
    path = tmp_path / "u.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _run(*args: str) -> str:
    res = CliRunner().invoke(main, ["report", *args])
    assert res.exit_code == 0, res.output
    return res.output


def _row(text: str, label: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(f"│ {label} "))
    return [c.strip() for c in line.split("│")[1:-1]]


# writes without a cache_creation TTL split (an older response, or a relay that drops it)
W1 = {"type": "message", "model": "claude-opus-4-6",
      "usage": {"input_tokens": 100, "cache_creation_input_tokens": 10_000,
                "cache_read_input_tokens": 0, "output_tokens": 10}}


# ------------------------------------------------------------------------------- F10


def test_report_says_writes_without_a_ttl_split_were_priced_at_5m(tmp_path: Path) -> None:
    path = _log(tmp_path, W1)
    data = json.loads(_run("--format", "json", str(path)))
    assert Decimal(data["total"]["cost_usd"]) == (100 * 5 + 10_000 * Decimal("6.25")
                                                  + 10 * 25) / M == Decimal("0.06325")
    [note] = [n for n in data["notes"] if "write TTL" in n["message"]]
    assert "5m rate" in note["message"] and "--write-ttl 1h" in note["message"]
    assert note["count"] == 1 and note["models"] == ["claude-opus-4-6"]
    text = _run(str(path))
    assert "note (1 record): write TTL not reported: priced at the 5m rate" in text


def test_report_write_ttl_1h_prices_unsplit_writes_at_the_1h_rate(tmp_path: Path) -> None:
    path = _log(tmp_path, W1)
    data = json.loads(_run("--format", "json", "--write-ttl", "1h", str(path)))
    assert Decimal(data["total"]["cost_usd"]) == (100 * 5 + 10_000 * 10 + 10 * 25) / M == (
        Decimal("0.10075"))
    assert any("1h rate" in n["message"] for n in data["notes"])
    assert "--write-ttl" in _run("--help")
    bad = CliRunner().invoke(main, ["report", "--write-ttl", "2h", str(path)])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


# ------------------------------------------------------------------------------- F8, F13.2


def test_text_report_prints_sub_cent_costs_not_zero(tmp_path: Path) -> None:
    # gpt-5-mini, 100 prompt + 10 completion: 100 x 0.25 + 10 x 2 per MTok = $0.000045
    small = {"object": "chat.completion", "model": "gpt-5-mini", "label": "small",
             "created": 1793491200,
             "usage": {"prompt_tokens": 100, "completion_tokens": 10,
                       "prompt_tokens_details": {"cached_tokens": 0}}}
    # 2 prompt tokens: 2 x 0.25 per MTok = $0.0000005, under a millionth
    tiny = {**small, "label": "tiny", "usage": {"prompt_tokens": 2, "completion_tokens": 0,
                                                "prompt_tokens_details": {"cached_tokens": 0}}}
    text = _run(str(_log(tmp_path, small, tiny)))
    assert (100 * Decimal("0.25") + 10 * 2) / M == Decimal("0.000045")
    assert _row(text, "small")[11] == "$0.000045"
    assert _row(text, "tiny")[11] == "<$0.000001"


def test_negative_savings_print_with_the_sign_first(tmp_path: Path) -> None:
    # savings = 10,100 x 5 - (100 x 5 + 10,000 x 6.25) per MTok = 0.0505 - 0.063 = -0.0125
    text = _run(str(_log(tmp_path, W1)))
    assert _row(text, "-")[12] == "-$0.0125"
    assert "$-" not in text


# ------------------------------------------------------------------------------- F13.1


def test_csv_marks_an_unknown_cost_and_says_why(tmp_path: Path) -> None:
    known = {"label": "a", "object": "chat.completion", "model": "gpt-4o",
             "created": 1793491200,
             "usage": {"prompt_tokens": 2000, "completion_tokens": 100,
                       "prompt_tokens_details": {"cached_tokens": 1024}}}
    # no prompt_tokens_details: the cached count, so the cost, is unknown
    unknown = {**known, "label": "b", "usage": {"prompt_tokens": 2000, "completion_tokens": 100}}
    rows = {r["label"]: r for r in csv.DictReader(io.StringIO(
        _run("--format", "csv", str(_log(tmp_path, known, unknown)))))}
    # 976 x 2.50 + 1024 x 1.25 + 100 x 10 per MTok
    assert Decimal(rows["a"]["cost_usd"]) == (976 * Decimal("2.5") + 1024 * Decimal("1.25")
                                              + 100 * 10) / M
    assert rows["a"]["cost_unknown_reason"] == "" and rows["a"]["requests_unknown"] == "0"
    for label in ("b", "TOTAL"):
        assert rows[label]["cost_usd"] == "unknown" and rows[label]["savings_usd"] == "unknown"
        assert "cache reads not reported" in rows[label]["cost_unknown_reason"]
        assert rows[label]["requests_unknown"] == "1"


def test_tracker_rejects_a_write_ttl_it_cannot_price() -> None:
    with pytest.raises(ValueError, match="default_write_ttl"):
        UsageTracker(default_write_ttl="2h")
