"""explain / diff on OpenAI automatic caching (new-user trial 28): a chained Responses turn
whose ``instructions`` were edited at their end read one 128-token step less (2,944 of 3,072):
the calibrated prediction put the divergence's step boundary one step late (3,072), so the
loss was reported as a hit with ``system_changed`` "not confirmed by usage". The log is the
trial's, recorded from the local backend (gpt-5.5, three turns chained by
``previous_response_id``)."""

from __future__ import annotations

from pathlib import Path

from promptcache.diff import explain

LOG = Path(__file__).parent / "fixtures" / "s12_responses_instructions_edit.jsonl"


def test_one_step_loss_after_an_instructions_edit_is_that_edits_miss() -> None:
    report = explain(str(LOG))
    _first, second, third = report.requests
    assert second.status == "hit" and second.observed_cache_read == 3072
    assert third.status == "miss_explained", third
    assert third.cause == "system_changed"
    assert third.lost_tokens == 128
    assert "causes_not_confirmed_by_usage" not in (third.detail or {})
    assert report.misses == 1
