"""Review 28 of the twelfth session's lint commits.

* de0cf70 counted an earlier request's implicit entry on GPT-5.6+ even when that request was
  sent with ``prompt_cache_options.mode: "explicit"``, which writes only at its markers
  (hosted-api-rules.md 2.3; the local backend's ``openai_breakpoints`` writes nothing there):
  PC105 said about 865 tokens were rewritten where all ~4,717 were.
* ca57178 stopped a line break from ending a sentence, so a clock word on an earlier line of
  prose named a time on the next one ("All times are UTC\\nSupport opens at 09:00"): a
  schedule flagged as a clock (review 25 had cleared it). A line break still joins a label to
  a time that starts the next line ("Current time:\\n14:32").
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from promptcache.lint import lint_paths
from promptcache.lint.volatile import scan_text

LOG = Path(__file__).parent / "fixtures" / "s12_gpt56_implicit_edit.jsonl"


def _pc105_tokens(path: Path) -> int:
    found = [f for f in lint_paths([str(path)]).findings if f.code == "PC105"]
    assert len(found) == 1
    m = re.search(r"about (\d+) cached tokens", found[0].message)
    assert m is not None
    return int(m.group(1))


def test_an_explicit_mode_request_wrote_no_implicit_entry(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in LOG.read_text().splitlines() if line.strip()]
    rows[0]["request"]["prompt_cache_options"] = {"mode": "explicit"}  # no markers: no write
    log = tmp_path / "explicit_first.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _pc105_tokens(log) > 4000  # nothing before the change was written
    assert 500 < _pc105_tokens(LOG) < 1200  # implicit mode: turn 1's entry is read


@pytest.mark.parametrize("text", [
    "All times are UTC\nSupport opens at 09:00",
    "- Time zone: UTC\n- Office opens at 09:00.",
])
def test_a_clock_word_on_an_earlier_line_names_no_later_time(text: str) -> None:
    assert [m.match for m in scan_text(text) if m.kind == "timestamp"] == []


@pytest.mark.parametrize("text", [
    "Current time:\n14:32", "## Current time\n14:32", "Current time:\n- 14:32",
    "Current time: 14:32",
])
def test_a_label_on_the_line_before_a_time_still_names_it(text: str) -> None:
    assert [m.match for m in scan_text(text) if m.kind == "timestamp"] == ["14:32"]


def test_the_end_of_a_range_with_am_pm_is_a_schedule() -> None:
    """ca57178 read '9:00 AM - 5:00 PM' as a range at its start only: its end, after 'AM',
    was still a clock."""
    assert scan_text("Current time: 9:00 AM - 5:00 PM") == []
    assert scan_text("Support hours 9:00am-5:00pm") == []
    assert scan_text("Current time is 11:45pm-12:15am") == []  # overnight, no UTC offset
