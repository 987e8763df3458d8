"""The local backend's OpenAI idle ledger (automatic caching before GPT-5.6) grew without
bound: ~780 entries per distinct 100k-token prompt, kept up to 24 h (review 16, finding 11).
It is now bounded by the block cache's capacity: a prefix whose KV was evicted cannot be read,
so the least recently used entries past the bound are dropped."""

from __future__ import annotations

from typing import Any

import pytest

from promptcache.catalog import get_policy
from promptcache.local.accounting import (
    CacheLedger,
    automatic_live_prefix,
    automatic_prefix_keys,
)
from promptcache.local.app import BackendService, idle_ledger_capacity

POLICY = get_policy("gpt-4o")
MIN = POLICY.min_cacheable_tokens
STEP = POLICY.cache_step_tokens or 1
DAY = 86400.0


def _keys(first: int, length: int) -> Any:
    ids = [first, *range(length - 1)]
    return automatic_prefix_keys(ids, b"salt", min_tokens=MIN, step_tokens=STEP)


def test_bounded_ledger_keeps_at_most_its_bound_and_the_recent_prompts() -> None:
    cap = 50
    ledger = CacheLedger(max_entries=cap)
    prompts = [_keys(r, MIN + 20 * STEP) for r in range(30)]  # 21 entries each
    for r, keys in enumerate(prompts):
        automatic_live_prefix(ledger, keys, float(r), DAY)
    assert len(ledger._entries) <= cap
    last = prompts[-1]
    assert automatic_live_prefix(ledger, last, 40.0, DAY) == last[-1][0]  # fully readable
    assert automatic_live_prefix(ledger, prompts[0], 41.0, DAY) == 0  # long evicted


def test_a_prompt_longer_than_the_bound_keeps_its_start_readable() -> None:
    keys = _keys(7, MIN + 40 * STEP)  # 41 entries
    ledger = CacheLedger(max_entries=10)
    automatic_live_prefix(ledger, keys, 0.0, DAY)
    # the tails went first: the 10 shortest prefixes are still there
    assert automatic_live_prefix(ledger, keys, 1.0, DAY) == keys[9][0]


def test_unbounded_ledger_still_sweeps_expired_entries() -> None:
    ledger = CacheLedger()
    automatic_live_prefix(ledger, _keys(1, MIN + 10 * STEP), 0.0, 3600)
    later = 3600 + 2 * CacheLedger.SWEEP_EVERY
    automatic_live_prefix(ledger, _keys(2, MIN), later, 3600)
    assert len(ledger._entries) == 1


def test_bad_bound_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        CacheLedger(max_entries=0)


class _Engine:
    def __init__(self, metrics: dict[str, Any]) -> None:
        self.metrics = metrics

    def generate(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - not called
        raise AssertionError

    def available_prefix(self, tokens: Any, *, tenant_salt: bytes = b"") -> int:
        return 0  # pragma: no cover - not called


def test_backend_bounds_its_idle_ledger_by_the_block_cache_capacity() -> None:
    blocks, size, tails = 2048, 16, 4096
    engine = _Engine({"prefix_cache_blocks_total": blocks, "prefix_cache_block_size": size,
                      "tail_tokens_capacity": tails})
    service = BackendService(engine)
    cap = service.openai_idle_ledger.max_entries
    assert cap == idle_ledger_capacity(engine) == (blocks * size + tails) // STEP
    assert service.anthropic_ledger.max_entries is None  # breakpoint ledgers: unchanged
    # an engine that reports no capacity: bounded by the sweep only, no crash
    assert BackendService(_Engine({})).openai_idle_ledger.max_entries is None
