"""Review 25 of this session's lint changes: a ``uid`` of something else (``card.uid``,
``rev_uid``) is no per-user value; a time of day in a range ("hours 09:00-17:00") is a
schedule, and a clock word in an earlier sentence does not name a later time."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptcache.lint import lint_paths
from promptcache.lint.volatile import scan_text

STABLE = "You are a careful assistant for the card service. " * 30


@pytest.mark.parametrize("hole, flagged", [
    ("{{ card.uid }}", False), ("{{ rev_uid }}", False), ("{card.uid}", False),
    ("{{ uid }}", True), ("{{ user.uid }}", True), ("{uid}", True), ("{{ user_id }}", True),
])
def test_uid_is_a_user_id_only_alone_or_of_a_user(tmp_path: Path, hole: str,
                                                   flagged: bool) -> None:
    f = tmp_path / ("t.j2" if hole.startswith("{{") else "t.txt")
    f.write_text(f"{hole}\n{STABLE}\n")
    codes = [x.code for x in lint_paths([str(f)]).findings]
    assert ("PC104" in codes) is flagged, codes


@pytest.mark.parametrize("text", [
    "All times are UTC. Support hours 09:00-17:00.",
    "Support hours (local time): 09:00-17:00",
    "Support hours: 9:00 to 17:00 local time",
    "It is 14:03. Current time is unknown to you.",
])
def test_schedules_are_not_clock_values(text: str) -> None:
    assert scan_text(text) == []


@pytest.mark.parametrize("text, granularity", [
    ("Current time: 14:03", "minute"), ("Local time 14:03.", "minute"),
    ("All times are UTC. Now: 14:03", "minute"), ("The time now is 14:03:27", "second"),
    ("Last updated at 14:03:27 UTC", "second"),
])
def test_clock_values_still_found(text: str, granularity: str) -> None:
    assert [m.granularity for m in scan_text(text)] == [granularity]
