"""`promptcache breakeven` (new-user trial 27): the per-prefix line priced at the tier of the
whole prompt, as the policy table; an in-memory option on a model that takes only 24h listed
as unavailable; money rounded half up; "1 write", not "1 writes"."""

from __future__ import annotations

from decimal import Decimal

import pytest
from click.testing import CliRunner

from promptcache.cli import main
from promptcache.usage.breakeven import breakeven, ttl_policy


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, ["breakeven", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_per_prefix_line_uses_the_whole_prompts_tier() -> None:
    low = breakeven("claude-haiku-5-5", 90_000)
    high = breakeven("claude-haiku-5-5", 90_000, prompt_tokens=110_000)
    assert high.uncached_prefix_usd > low.uncached_prefix_usd
    out = _run("--model", "claude-haiku-5-5", "--prefix-tokens", "90000", "--suffix-tokens",
               "20000", "--interval", "200")
    assert f"uncached ${high.uncached_prefix_usd:.6f}" in out
    pol = ttl_policy("claude-haiku-5-5", 90_000, 200, suffix_tokens=20_000)
    none = next(o for o in pol.options if o.name == "none")
    # the table's no-caching cost is the per-prefix uncached price plus the suffix, per request
    assert none.cost / pol.requests > high.uncached_prefix_usd


def test_prompt_tokens_under_the_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="prompt_tokens"):
        breakeven("claude-sonnet-4-6", 5_000, prompt_tokens=4_000)


def test_in_memory_unavailable_where_only_24h() -> None:
    pol = ttl_policy("gpt-5.5", 5_000, 600)
    in_memory = next(o for o in pol.options if o.name == "in_memory")
    assert not in_memory.available and "24h" in in_memory.note
    assert pol.best.name == "24h"
    gpt5 = ttl_policy("gpt-5", 5_000, 600)  # takes both: priced as before
    assert next(o for o in gpt5.options if o.name == "in_memory").available


def test_singular_counts_and_half_up_rounding() -> None:
    out = _run("--model", "claude-sonnet-4-6", "--prefix-tokens", "5000", "--interval", "60",
               "--requests", "2")
    assert "1 write, 1 read;" in out
    from promptcache.usage.cli import _money_short

    assert _money_short(Decimal("0.09525")) == "$0.0953"
