"""Trial 17 finding 5: ``promptcache report`` on Anthropic usage without
``cache_creation_input_tokens`` left the uncached column blank, although Anthropic's
``input_tokens`` is exactly the uncached part (hosted-api-rules.md 1.8), and its reason named
the OpenAI field ``prompt_tokens_details.cache_write_tokens``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.cli import main
from promptcache.usage import UsageRecord
from promptcache.usage.parse import CACHE_WRITE_FIELDS


def _log(tmp_path: Path, *lines: dict[str, Any]) -> Path:
    path = tmp_path / "u.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _csv(path: Path) -> dict[str, dict[str, str]]:
    res = CliRunner().invoke(main, ["report", str(path), "--format", "csv"])
    assert res.exit_code == 0, res.output
    return {r["label"] or "": r for r in csv.DictReader(io.StringIO(res.output))}


ANTHROPIC_NO_WRITES = {"model": "claude-sonnet-4-5",
                       "usage": {"input_tokens": 500, "cache_read_input_tokens": 5100,
                                 "output_tokens": 16}}


def test_anthropic_without_cache_creation_keeps_uncached_and_names_its_field(
        tmp_path: Path) -> None:
    rows = _csv(_log(tmp_path, ANTHROPIC_NO_WRITES))
    for row in rows.values():
        assert row["uncached_input"] == "500"  # input_tokens is the uncached part
        assert row["cache_read"] == "5100"
        assert row["cache_write"] == ""  # the writes are unknown
        assert row["cost_usd"] == "unknown"
        reason = row["cost_unknown_reason"]
        assert "cache_creation_input_tokens" in reason
        assert "prompt_tokens_details" not in reason and "OpenAI" not in reason
        assert "uncached part are unknown" not in reason


def test_anthropic_without_any_cache_field_keeps_uncached(tmp_path: Path) -> None:
    rows = _csv(_log(tmp_path, {"model": "claude-sonnet-4-5",
                                "usage": {"input_tokens": 500, "output_tokens": 16}}))
    assert rows["TOTAL"]["uncached_input"] == "500"
    assert "cache_creation_input_tokens" in rows["TOTAL"]["cost_unknown_reason"]


def test_json_and_text_formats_agree(tmp_path: Path) -> None:
    path = _log(tmp_path, ANTHROPIC_NO_WRITES)
    data = json.loads(CliRunner().invoke(main, ["report", str(path), "--format",
                                                "json"]).output)
    assert data["total"]["uncached_input"] == 500 and data["total"]["cache_write"] is None
    [reason] = data["cost_unknown"]
    assert "cache_creation_input_tokens" in reason and "cache_write_tokens" not in reason
    text = CliRunner().invoke(main, ["report", str(path)]).output
    assert "cache_creation_input_tokens" in text and "cache_write_tokens" not in text


@pytest.mark.parametrize("usage,field", [
    ({"prompt_tokens": 5600, "prompt_tokens_details": {"cached_tokens": 5100},
      "completion_tokens": 16}, "prompt_tokens_details.cache_write_tokens"),
    ({"input_tokens": 5600, "input_tokens_details": {"cached_tokens": 5100},
      "output_tokens": 16}, "input_tokens_details.cache_write_tokens"),
])
def test_openai_gpt56_without_writes_still_hides_uncached(tmp_path: Path,
                                                          usage: dict[str, Any],
                                                          field: str) -> None:
    """Control: OpenAI's prompt count includes the writes, so the uncached part is unknown."""
    rows = _csv(_log(tmp_path, {"model": "gpt-5.6-sol", "usage": usage}))
    row = rows["TOTAL"]
    assert row["uncached_input"] == "" and row["cost_usd"] == "unknown"
    assert field in row["cost_unknown_reason"]
    assert "the writes and the uncached part are unknown" in row["cost_unknown_reason"]


def test_a_sink_record_line_is_read_the_same(tmp_path: Path) -> None:
    """A record as JsonlSink writes it (provider "anthropic", no cache_write)."""
    rec = UsageRecord(provider="anthropic", model="claude-sonnet-4-5", uncached_input=500,
                      cache_read=5100, output=16)
    path = tmp_path / "r.jsonl"
    path.write_text(rec.model_dump_json() + "\n")
    row = _csv(path)["TOTAL"]
    assert row["uncached_input"] == "500"
    assert CACHE_WRITE_FIELDS["anthropic"] in row["cost_unknown_reason"]
