"""The OpenAI idle ledger of the local backend (automatic caching before GPT-5.6) was bounded by
a count of prefixes, least recently used first, and never told when the block cache evicted
KV. The two orders diverge when many prefixes share their KV (prompts that differ only in their
last 128 tokens: one block each, one ledger entry each): the ledger dropped a prefix whose
blocks the cache still held, and the backend reported ``cached_tokens`` 1024 for a request the
cache served 1152 tokens of. The ledger now anchors each prefix whose KV is cached to the block
holding its last token; the count bound never drops an anchored entry, and the pool's eviction
of that block (an eviction listener of :class:`BlockPool`) forgets exactly its entries.

The Anthropic / OpenAI TTL ledgers have no count bound, and a plan drops an entry whose KV is
gone (``available_tokens``), so they cannot report a miss for cached KV nor a read of evicted
KV; they are not anchored (checked below)."""

from __future__ import annotations

from typing import Any

import pytest

from promptcache.catalog import get_policy
from promptcache.local.accounting import (
    CacheLedger,
    automatic_live_prefix,
    automatic_prefix_keys,
    openai_automatic_cached_tokens,
)
from promptcache.local.blocks import BlockPool, KVCacheManager
from promptcache.local.testing import LocalBackend

TINY: dict[str, int] = {"hidden_size": 32, "layers": 1, "heads": 2, "kv_heads": 1}
POLICY = get_policy("gpt-4o")
MIN = POLICY.min_cacheable_tokens
STEP = POLICY.cache_step_tokens or 1
DAY = 86400.0

W = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


def _text(n: int, s: int) -> str:
    return " ".join(W[(i * 5 + s) % len(W)] + str(i % 11) for i in range(n))


# ------------------------------------------------------------------------------ block pool
def test_pool_tells_its_listeners_exactly_the_hashes_it_evicts() -> None:
    manager = KVCacheManager(BlockPool(4, 2))
    told: list[bytes] = []
    manager.pool.add_eviction_listener(told.append)
    manager.allocate("a", [1, 2, 3, 4, 5])  # 3 blocks; the 2 full ones get registered
    manager.commit("a", [1, 2, 3, 4, 5])
    a_hashes = manager.block_hashes_of("a")
    manager.free("a")
    assert told == [] and manager.pool.num_cached_blocks == 2
    # 3 new blocks: the free uncached one, then a's tail block (freed first), not its head
    manager.allocate("b", [9, 8, 7, 6, 5, 4])
    assert told == [a_hashes[1]]
    assert manager.cached_prefix_hashes([1, 2, 3, 4]) == a_hashes[:1]
    manager.free("b")
    assert manager.pool.reset_prefix_cache()
    assert told == a_hashes[1:] + a_hashes[:1]
    manager.pool.remove_eviction_listener(told.append)
    manager.allocate("c", [1, 2, 3])
    manager.commit("c", [1, 2, 3])
    manager.free("c")
    manager.pool.reset_prefix_cache()
    assert len(told) == 2  # removed: not told any more
    manager.pool.remove_eviction_listener(told.append)  # a second removal is a no-op


def test_cached_prefix_hashes_counts_the_last_full_block_and_pins_nothing() -> None:
    manager = KVCacheManager(BlockPool(8, 4))
    tokens = list(range(8))
    manager.allocate("r", tokens)
    manager.commit("r", tokens)
    manager.free("r")
    # match_prefix keeps the last token to compute (1 block); what is cached is 2 blocks
    assert manager.match_prefix(tokens).num_cached_tokens == 4
    assert manager.cached_prefix_hashes(tokens) == manager.match_prefix([*tokens, 0]).block_hashes
    assert len(manager.cached_prefix_hashes(tokens)) == 2
    assert manager.pool.get_num_free_blocks() == 8 and manager.stats.queries == 1
    assert manager.cached_prefix_hashes(tokens, tenant_salt=b"other") == []


# ------------------------------------------------------------------------------ ledger
def test_bound_drops_unanchored_entries_only_and_eviction_forgets_anchored_ones() -> None:
    ledger = CacheLedger(max_entries=2)
    for i, key in enumerate((b"a", b"b")):
        ledger.put(key, 1024, "3600s", float(i))
    assert ledger.anchor(b"a", b"block-a") and not ledger.anchor(b"zz", b"block-z")
    assert ledger.anchored == 1
    for i, key in enumerate((b"c", b"d", b"e")):
        ledger.put(key, 1024, "3600s", 2.0 + i)
    # a is anchored: kept although least recent; b and c were dropped for d and e
    assert sorted(ledger._entries) == [b"a", b"d", b"e"]
    ledger.forget_block(b"block-b")  # no entry anchored there: nothing happens
    ledger.forget_block(b"block-a")
    assert sorted(ledger._entries) == [b"d", b"e"] and ledger.anchored == 0
    # the forgotten key comes back unanchored and counts against the bound again
    ledger.put(b"a", 1024, "3600s", 9.0)
    assert sorted(ledger._entries) == [b"a", b"e"]


def test_expiry_and_drop_also_untie_the_anchor() -> None:
    ledger = CacheLedger(max_entries=4)
    ledger.put(b"a", 1024, "10s", 0.0)
    ledger.put(b"b", 1024, "10s", 0.0)
    ledger.anchor(b"a", b"h")
    ledger.anchor(b"b", b"h")  # two entries may end in one block (blocks over 128 tokens)
    assert ledger.get(b"a", 11.0) is None  # expired
    ledger.drop(b"b")
    assert ledger.anchored == 0 and ledger._keys_at == {}
    ledger.put(b"a", 1024, "10s", 20.0)
    ledger.forget_block(b"h")  # the old anchor went with the entry: a stays
    assert ledger.get(b"a", 21.0) is not None


def test_anchor_automatic_prefixes_anchors_the_prefixes_whose_last_block_is_cached() -> None:
    from promptcache.local.accounting import anchor_automatic_prefixes  # new in session 11

    ids = list(range(MIN + 3 * STEP))
    keys = automatic_prefix_keys(ids, b"salt", min_tokens=MIN, step_tokens=STEP)
    assert [end for end, _ in keys] == [MIN, MIN + STEP, MIN + 2 * STEP, MIN + 3 * STEP]
    ledger = CacheLedger(max_entries=2)
    automatic_live_prefix(ledger, keys, 0.0, DAY)
    assert sorted(ledger._entries) == sorted(k for _, k in keys[:2])  # the shortest two
    hashes = [bytes([i]) * 32 for i in range((MIN + STEP) // 16)]  # KV of 1024 + 128 cached
    assert anchor_automatic_prefixes(ledger, keys, hashes, 16) == 2
    assert ledger._anchor_of[keys[0][1]] == hashes[MIN // 16 - 1]
    assert ledger._anchor_of[keys[1][1]] == hashes[-1]
    other = automatic_prefix_keys(ids, b"other", min_tokens=MIN, step_tokens=STEP)
    automatic_live_prefix(ledger, other, 1.0, DAY)
    # the anchored prefixes stay readable past the bound; 2 of the other prompt's are kept
    assert automatic_live_prefix(ledger, keys, 2.0, DAY) == MIN + STEP
    assert len(ledger._entries) == 4
    with pytest.raises(ValueError, match="block_size"):
        anchor_automatic_prefixes(ledger, keys, hashes, 0)


# ------------------------------------------------------------------------------ backend
def _ask(client: Any, system: str, i: int) -> Any:
    r = client.chat.completions.create(
        model="gpt-4o",
        max_completion_tokens=1,
        messages=[{"role": "system", "content": system},
                  {"role": "user", "content": f"variant {i} " + _text(6, i + 1)}],
    )
    assert r.usage is not None and r.usage.prompt_tokens_details is not None
    return r.usage


def _reused(backend: LocalBackend) -> float:
    return float(backend.metrics().get("promptcache_reused_tokens_total", 0.0))


@pytest.fixture()
def backend() -> Any:
    with LocalBackend(**TINY, pool_mb=0.5) as b:
        yield b


def test_reported_read_equals_what_the_cache_serves_when_variants_outnumber_the_bound(
    backend: LocalBackend,
) -> None:
    """A shared system prompt of about 1,140 tokens, then 40 user variants: each variant adds
    one idle-ledger entry (its 1,152-token prefix) but only two KV blocks, so the pool holds all
    of them while a count bound of the pool's tokens / 128 (32 here) dropped the oldest ones."""
    service = backend.service
    cap = service.openai_idle_ledger.max_entries
    pool = backend.engine.manager.pool
    assert cap == 32 and pool.num_blocks == 240
    client = backend.openai()
    system = _text(478, 0)
    first = _ask(client, system, 0)
    assert MIN + STEP < first.prompt_tokens < MIN + 2 * STEP  # entries at 1024 and 1152
    for i in range(1, cap + 8):
        _ask(client, system, i)
    assert pool.evictions == 0  # the cache still holds every variant
    before = _reused(backend)
    again = _ask(client, system, 0)
    reused = _reused(backend) - before
    assert reused >= MIN + STEP  # the cache served variant 0's 1152-token prefix
    expected = openai_automatic_cached_tokens(reused, again.prompt_tokens,
                                              min_tokens=MIN, step_tokens=STEP)
    assert expected == MIN + STEP
    assert again.prompt_tokens_details.cached_tokens == expected  # was 1024 before the fix
    # more entries than the count bound, each anchored to a block the pool holds
    assert len(service.openai_idle_ledger._entries) > cap
    assert service.openai_idle_ledger.anchored <= pool.num_cached_blocks


def test_the_ledger_forgets_a_prefix_when_the_pool_evicts_its_block(
    backend: LocalBackend,
) -> None:
    service = backend.service
    ledger = service.openai_idle_ledger
    pool = backend.engine.manager.pool
    client = backend.openai()
    system = _text(478, 0)
    _ask(client, system, 0)
    anchored = set(ledger._anchor_of.values())
    assert len(anchored) == 2  # the 1024 and 1152 prefixes of variant 0
    # other long prompts until the pool has evicted both blocks
    seed = 1
    while anchored & set(pool.cached_block_hash_to_block):
        client.chat.completions.create(
            model="gpt-4o", max_completion_tokens=1,
            messages=[{"role": "user", "content": _text(900, seed) + f" other {seed}"}])
        seed += 1
        assert seed < 20
    assert not anchored & set(ledger._anchor_of.values())
    assert ledger.anchored <= pool.num_cached_blocks
    # variant 0 again: the report follows the cache (nothing of it is cached: no read)
    before = _reused(backend)
    usage = _ask(client, system, 0)
    reused = _reused(backend) - before
    assert usage.prompt_tokens_details.cached_tokens == openai_automatic_cached_tokens(
        reused, usage.prompt_tokens, min_tokens=MIN, step_tokens=STEP) == 0


def test_ttl_ledgers_are_not_bounded_nor_anchored(backend: LocalBackend) -> None:
    service = backend.service
    assert service.anthropic_ledger.max_entries is None
    assert service.openai_ledger.max_entries is None
    client = backend.openai()
    client.chat.completions.create(
        model="gpt-5.6-sol", max_completion_tokens=1,
        messages=[{"role": "system", "content": _text(478, 3)},
                  {"role": "user", "content": "q"}])
    assert service.openai_ledger.anchored == 0 and service.openai_idle_ledger.anchored == 0
