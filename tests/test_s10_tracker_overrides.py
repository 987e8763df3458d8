"""A tracker that priced a model before the price overrides changed kept the old prices until
the next UTC day (review 16): `load_overrides`, `clear_overrides` and a changed
`$PROMPTCACHE_PRICES` file now reach a live tracker too."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from promptcache.catalog import PRICES_ENV_VAR, clear_overrides, load_overrides
from promptcache.usage import UsageTracker, parse_usage

OVERRIDE = '[models."gpt-4o"]\ninput = 100.0\noutput = 100.0\ncache_read = 50.0\n'


def _record():  # type: ignore[no-untyped-def]
    return parse_usage({"object": "chat.completion", "model": "gpt-4o", "usage": {
        "prompt_tokens": 1_000_000, "completion_tokens": 0, "total_tokens": 1_000_000,
        "prompt_tokens_details": {"cached_tokens": 0}}}).model_copy(
            update={"start": time.time()})


def _input_price(tracker: UsageTracker) -> object:
    cost = tracker.cost_of(_record())
    assert cost is not None
    return cost.total


def test_load_and_clear_overrides_reach_a_tracker_that_priced_before(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(OVERRIDE)
    tracker = UsageTracker()
    listed = _input_price(tracker)
    try:
        load_overrides(path)
        assert _input_price(tracker) == _input_price(UsageTracker()) != listed
    finally:
        clear_overrides()
    assert _input_price(tracker) == listed


def test_a_changed_env_override_file_reaches_a_live_tracker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(OVERRIDE)
    tracker = UsageTracker()
    listed = _input_price(tracker)
    monkeypatch.setenv(PRICES_ENV_VAR, str(path))
    first = _input_price(tracker)
    assert first != listed
    path.write_text(OVERRIDE.replace("100.0", "200.0"))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a visible mtime change
    assert _input_price(tracker) == 2 * first  # type: ignore[operator]
