"""``breakeven()`` refuses a TTL the model does not take, as the CLI's ``--ttl`` does (new-user
trial 14, F9): ``breakeven("gpt-5", 12000, "banana")`` answered as if no TTL had been given."""

from __future__ import annotations

import pytest

from promptcache.usage import breakeven


def test_a_ttl_on_a_model_without_ttls_is_refused() -> None:
    with pytest.raises(ValueError, match="takes no TTL"):
        breakeven("gpt-5", 12000, "banana")
    with pytest.raises(ValueError, match="takes no TTL"):
        breakeven("gpt-5", 12000, "1h")
    with pytest.raises(TypeError, match="ttl must be a string"):
        breakeven("gpt-5", 12000, ttl=42)  # type: ignore[arg-type]
    assert breakeven("gpt-5", 12000).ttl is None


def test_models_with_ttls_are_unchanged() -> None:
    assert breakeven("claude-sonnet-4-6", 12000, "1h").ttl == "1h"
    with pytest.raises(ValueError, match="not offered"):
        breakeven("claude-sonnet-4-6", 12000, "2h")


def test_a_record_with_an_impossible_start_is_unpriced_not_a_traceback() -> None:
    # model_construct skips the record's own range check (review 15 F7, U2's note)
    from promptcache.usage import UsageRecord, UsageTracker

    ok = UsageRecord(provider="anthropic", model="claude-sonnet-4-6", uncached_input=10,
                     cache_read=0, cache_write=0, output=1)
    bad = UsageRecord.model_construct(**{**ok.__dict__, "start": 1e300})
    assert UsageTracker().cost_of(bad) is None
