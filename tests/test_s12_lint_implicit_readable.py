"""lint PC105 on GPT-5.6+ in implicit mode (review 27): a change in a later turn said no entry
before it could be read ("about 4717 cached tokens are written again"), though the first
turn's request wrote an entry at its implicit breakpoint (its newest input item) that the
local backend read (3,876 tokens). The log is the review's, recorded from the local backend
(gpt-5.6-sol, no explicit markers, turn 3 edits a timestamp in turn 2's user message)."""

from __future__ import annotations

import re
from pathlib import Path

from promptcache.lint import lint_paths

LOG = Path(__file__).parent / "fixtures" / "s12_gpt56_implicit_edit.jsonl"


def test_an_earlier_requests_implicit_entry_is_readable() -> None:
    found = [f for f in lint_paths([str(LOG)]).findings if f.code == "PC105"]
    assert len(found) == 1
    m = re.search(r"about (\d+) cached tokens", found[0].message)
    assert m is not None
    assert 500 < int(m.group(1)) < 1200, found[0].message  # not ~4717 (nothing readable)
    assert "no breakpoint before the change can be read" not in found[0].message
