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
