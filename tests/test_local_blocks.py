"""Prefix-cache tests mirroring vLLM's ``tests/v1/core/test_prefix_caching.py``.

Exact block ids, ref counts and free-queue order after hit / free / miss; eviction order;
tenant-salt isolation; no ref-count change on a failed allocation; the collision guard.
Pure Python: no torch.
"""

from __future__ import annotations

import hashlib
import struct

import pytest

from promptcache._errors import InvalidRequestError, PoolExhaustedError
from promptcache.local.blocks import (
    BlockPool,
    KVCacheManager,
    PrefixCache,
    kv_bytes_per_token,
)
from promptcache.local.hashing import (
    BlockHash,
    block_hashes,
    hash_block_tokens,
    pack_tokens,
    root_hash,
)

HASH_FNS = ["sha256", "blake2b"]


def make_manager(
    num_blocks: int, block_size: int = 16, hash_fn: object = "sha256"
) -> KVCacheManager:
    return KVCacheManager(
        BlockPool(num_blocks, block_size),
        model_id="test-model",
        hash_fn=hash_fn,  # type: ignore[arg-type]
        bytes_per_token=kv_bytes_per_token(layers=2, kv_heads=2, head_dim=8, dtype_bytes=4),
    )


def ref_counts(m: KVCacheManager) -> list[int]:
    return [b.ref_cnt for b in m.pool.blocks]


def free_ids(m: KVCacheManager) -> list[int]:
    return m.pool.free_block_queue.block_ids()


# ---------------------------------------------------------------------------------------------
# hashing
# ---------------------------------------------------------------------------------------------


def test_hash_chain_matches_an_independent_sha256_computation() -> None:
    root = root_hash(tenant_salt=b"t", model_id="m", adapter_id="a", block_size=4)
    expected_root = hashlib.sha256(
        b"promptcache-kv/1"
        + struct.pack("<I", 1)
        + b"t"
        + struct.pack("<I", 1)
        + b"m"
        + struct.pack("<I", 1)
        + b"a"
        + struct.pack("<I", 4)
    ).digest()
    assert root == expected_root
    toks = [1, 2, 3, 70000, 5, 6, 7, 8, 9]
    h0 = hashlib.sha256(root + struct.pack("<4I", 1, 2, 3, 70000)).digest()
    h1 = hashlib.sha256(h0 + struct.pack("<4I", 5, 6, 7, 8)).digest()
    assert block_hashes(toks, root=root, block_size=4) == [h0, h1]  # partial block skipped
    assert hash_block_tokens(root, toks[:4]) == h0
    # extending a chain from block 1 gives the same hash as hashing all blocks
    assert block_hashes(toks, root=root, block_size=4, start=1, parent=BlockHash(h0)) == [h1]


@pytest.mark.parametrize("hash_fn", HASH_FNS)
def test_root_separates_salt_model_adapter_and_block_size(hash_fn: str) -> None:
    base = {"tenant_salt": b"", "model_id": "m", "adapter_id": "", "block_size": 16}
    roots = {
        root_hash(**base, hash_fn=hash_fn),  # type: ignore[arg-type]
        root_hash(**{**base, "tenant_salt": b"x"}, hash_fn=hash_fn),  # type: ignore[arg-type]
        root_hash(**{**base, "model_id": "m2"}, hash_fn=hash_fn),  # type: ignore[arg-type]
        root_hash(**{**base, "adapter_id": "lora"}, hash_fn=hash_fn),  # type: ignore[arg-type]
        root_hash(**{**base, "block_size": 32}, hash_fn=hash_fn),  # type: ignore[arg-type]
    }
    assert len(roots) == 5
    # fields are length-prefixed: ("ab", "c") != ("a", "bc")
    assert root_hash(tenant_salt="ab", model_id="c", block_size=16) != root_hash(
        tenant_salt="a", model_id="bc", block_size=16
    )
    # str salt == its UTF-8 bytes
    assert root_hash(tenant_salt="é", model_id="m", block_size=1) == root_hash(
        tenant_salt="é".encode(), model_id="m", block_size=1
    )


def test_bad_tokens_raise_a_named_error() -> None:
    with pytest.raises(InvalidRequestError, match=r"tokens\[1\]"):
        pack_tokens([1, -2, 3])
    with pytest.raises(InvalidRequestError):
        pack_tokens([2**32])
    assert pack_tokens([1, 2**32 - 1]) == b"\x01\x00\x00\x00\xff\xff\xff\xff"
    with pytest.raises(ValueError):
        root_hash(model_id="m", block_size=0)
    with pytest.raises(ValueError):
        root_hash(model_id="m", block_size=4, hash_fn="md5")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# lifecycle: hit / free / miss / eviction (exact ids and free-queue order)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("hash_fn", HASH_FNS)
def test_prefill_hit_free_miss_and_eviction_order(hash_fn: str) -> None:
    m = make_manager(11, 16, hash_fn)
    common = list(range(48))  # 3 full blocks

    # request 0: miss. 55 tokens -> 3 full blocks + a 7-token partial block.
    req0 = [*common, *range(1000, 1007)]
    a0 = m.allocate("0", req0)
    assert [b.block_id for b in a0.blocks] == [0, 1, 2, 3]
    assert a0.num_cached_tokens == 0
    assert [i for i, _ in m.commit("0", req0)] == [0, 1, 2]  # only full blocks
    assert m.pool.blocks[3].block_hash is None
    assert free_ids(m) == [4, 5, 6, 7, 8, 9, 10]

    # request 1: hit on the 3 common blocks, one new block for its 5-token tail.
    req1 = [*common, *range(2000, 2005)]
    a1 = m.allocate("1", req1)
    assert [b.block_id for b in a1.blocks] == [0, 1, 2, 4]
    assert a1.num_cached_tokens == 48
    assert ref_counts(m)[:5] == [2, 2, 2, 1, 1]
    assert free_ids(m) == [5, 6, 7, 8, 9, 10]

    # free request 0 (reverse order): the uncached partial block 3 goes to the head,
    # the shared blocks stay pinned by request 1.
    m.free("0")
    assert ref_counts(m)[:5] == [1, 1, 1, 0, 1]
    assert free_ids(m) == [3, 5, 6, 7, 8, 9, 10]

    # free request 1: block 4 (uncached) to the head; 2, 1, 0 to the tail in that order,
    # so the chain's tail block 2 is evicted before its parents.
    m.free("1")
    assert ref_counts(m) == [0] * 11
    assert free_ids(m) == [4, 3, 5, 6, 7, 8, 9, 10, 2, 1, 0]
    assert m.pool.num_cached_blocks == 3

    # request 2: a miss of 9 blocks takes the uncached blocks first, then evicts block 2.
    req2 = list(range(5000, 5000 + 16 * 9))
    a2 = m.allocate("2", req2)
    assert [b.block_id for b in a2.blocks] == [4, 3, 5, 6, 7, 8, 9, 10, 2]
    assert a2.num_cached_tokens == 0
    assert m.stats.evictions == 1
    assert free_ids(m) == [1, 0]

    # request 2 ends without committing: its blocks hold no hash and go back to the head.
    m.free("2")
    assert free_ids(m) == [4, 3, 5, 6, 7, 8, 9, 10, 2, 1, 0]
    assert m.pool.blocks[2].block_hash is None

    # request 3: the common prefix now hits only blocks 0 and 1 (block 2 was evicted).
    a3 = m.allocate("3", req0)
    assert [b.block_id for b in a3.blocks] == [0, 1, 4, 3]
    assert a3.num_cached_tokens == 32
    assert m.match_prefix(req0).num_cached_tokens == 32

    st = m.stats
    assert (st.queries, st.hits, st.hit_tokens) == (4, 2, 80)
    assert st.query_tokens == 55 + 53 + 144 + 55
    assert st.blocks_total == 11 and st.collisions == 0
    assert st.pool_bytes == 11 * 16 * kv_bytes_per_token(
        layers=2, kv_heads=2, head_dim=8, dtype_bytes=4
    )


def test_hit_is_capped_so_the_last_prompt_token_is_computed() -> None:
    m = make_manager(8, 4)
    toks = list(range(8))  # exactly 2 full blocks
    m.allocate("a", toks)
    m.commit("a", toks)
    m.free("a")
    # the whole prompt is cached, but only 1 block may be reused: 7 // 4 == 1
    assert m.match_prefix(toks).num_cached_tokens == 4
    assert m.match_prefix([*toks, 99]).num_cached_tokens == 8
    assert m.match_prefix(toks, max_tokens=3).num_cached_tokens == 0
    assert m.allocate("b", toks, max_cached_tokens=0).num_cached_tokens == 0


def test_commit_grows_the_block_table_with_generated_tokens() -> None:
    m = make_manager(6, 4)
    prompt = list(range(6))  # 1 full block + partial
    a = m.allocate("a", prompt)
    assert len(a.blocks) == 2
    assert [i for i, _ in m.commit("a", prompt)] == [0]
    seq = [*prompt, 100, 101, 102, 103, 104]  # 11 tokens: blocks 0, 1 full, 2 partial
    assert [i for i, _ in m.commit("a", seq)] == [1]
    assert len(m.blocks_of("a")) == 3
    assert m.commit("a", seq) == []  # idempotent
    m.free("a")
    assert m.match_prefix([*seq, 7]).num_cached_tokens == 8


def test_commit_on_a_full_pool_caches_what_fits_without_error() -> None:
    m = make_manager(2, 4)
    m.allocate("a", list(range(5)))  # takes both blocks
    done = m.commit("a", list(range(13)))  # would need 4 blocks
    assert [i for i, _ in done] == [0, 1]
    assert len(m.blocks_of("a")) == 2


def test_duplicate_block_stays_unregistered_and_is_reused_first() -> None:
    m = make_manager(6, 4)
    toks = list(range(9))
    m.allocate("a", toks)
    m.allocate("b", toks)  # concurrent: a has not committed, so b misses
    assert [b.block_id for b in m.blocks_of("b")] == [3, 4, 5]
    m.commit("a", toks)
    assert m.commit("b", toks) == []  # same hashes, same content: duplicates
    assert m.pool.duplicates == 2 and m.pool.collisions == 0
    m.free("b")
    assert free_ids(m) == [3, 4, 5]  # b's unregistered blocks at the head (NOTE #1)
    m.free("a")
    assert free_ids(m) == [2, 3, 4, 5, 1, 0]


# ---------------------------------------------------------------------------------------------
# tenant salt
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("hash_fn", HASH_FNS)
def test_cache_key_salting(hash_fn: str) -> None:
    m = make_manager(20, 16, hash_fn)
    prompt = list(range(70))
    m.allocate("a", prompt, tenant_salt=b"tenant-a")
    m.commit("a", prompt)
    m.free("a")
    assert m.match_prefix(prompt, tenant_salt=b"tenant-b").num_cached_tokens == 0
    assert m.match_prefix(prompt).num_cached_tokens == 0  # unsalted
    b = m.allocate("b", prompt, tenant_salt=b"tenant-b")
    assert b.num_cached_tokens == 0
    c = m.allocate("c", prompt, tenant_salt="tenant-a")  # str salt == its UTF-8 bytes
    assert c.num_cached_tokens == 64
    assert m.stats.hits == 1


# ---------------------------------------------------------------------------------------------
# admission failure
# ---------------------------------------------------------------------------------------------


def test_failed_allocation_changes_no_ref_count() -> None:
    m = make_manager(4, 4)
    a = [*range(8), 50]  # 3 blocks
    m.allocate("a", a)
    m.commit("a", a)
    before = (ref_counts(m), free_ids(m), m.stats)
    b = [*range(8), *range(200, 209)]  # hits 2 pinned blocks, needs 3 new; 1 free
    with pytest.raises(PoolExhaustedError):
        m.allocate("b", b)
    assert (ref_counts(m), free_ids(m), m.stats) == before
    assert m.num_requests == 1


def test_failed_allocation_counts_free_cached_hits_as_unavailable() -> None:
    m = make_manager(4, 4)
    a = [*range(12), 99]  # 3 full blocks + 1 partial: the whole pool
    m.allocate("a", a)
    m.commit("a", a)
    m.free("a")
    assert free_ids(m) == [3, 2, 1, 0]
    # hits the 3 free cached blocks (touching removes them from the free queue) and needs
    # 2 new blocks: only 1 would remain, so admission must fail before touching anything.
    b = [*range(12), *range(300, 305)]
    before = (ref_counts(m), free_ids(m), m.pool.num_cached_blocks)
    with pytest.raises(PoolExhaustedError):
        m.allocate("b", b)
    assert (ref_counts(m), free_ids(m), m.pool.num_cached_blocks) == before
    # a prompt needing one new block fits
    ok = m.allocate("c", [*range(12), 7])
    assert ok.num_cached_tokens == 12


# ---------------------------------------------------------------------------------------------
# collision guard
# ---------------------------------------------------------------------------------------------


def test_forced_collision_is_rejected_and_counted() -> None:
    def constant(_: bytes) -> bytes:  # every block hash collides
        return b"\x00" * 32

    m = make_manager(8, 4, constant)
    a = list(range(9))
    m.allocate("a", a)
    done = m.commit("a", a)
    # block 1 has the same (colliding) hash as block 0 but other tokens: refused
    assert [i for i, _ in done] == [0]
    assert m.stats.collisions == 1
    m.free("a")
    b = list(range(100, 109))  # other tokens, same hash
    alloc = m.allocate("b", b)
    assert alloc.num_cached_tokens == 0
    assert m.stats.collisions == 2
    assert m.stats.hits == 0


def test_parent_hash_verification_rejects_a_hash_that_ignores_the_parent() -> None:
    def tokens_only(data: bytes) -> bytes:
        # a block hash (32-byte parent + 4 tokens) that ignores the parent, so the same block
        # under two salts collides; roots (other lengths) stay distinct.
        return hashlib.sha256(data[-16:] if len(data) == 48 else data).digest()

    m = make_manager(8, 4, tokens_only)
    toks = list(range(9))
    m.allocate("a", toks, tenant_salt=b"a")
    m.commit("a", toks)
    m.free("a")
    assert m.allocate("b", toks, tenant_salt=b"b").num_cached_tokens == 0
    assert m.stats.collisions >= 1
    assert m.allocate("c", toks, tenant_salt=b"a").num_cached_tokens == 8


# ---------------------------------------------------------------------------------------------
# misc
# ---------------------------------------------------------------------------------------------


def test_create_simulated_is_the_same_class_sized_in_tokens_or_bytes() -> None:
    sim = PrefixCache.create_simulated(capacity_tokens=1000, block_size=16)
    assert type(sim) is KVCacheManager
    assert sim.pool.num_blocks == 62
    per_token = 2 * 32 * 8 * 128 * 2
    sim2 = KVCacheManager.create_simulated(capacity_bytes=per_token * 16 * 10 + 5)
    assert sim2.pool.num_blocks == 10
    assert sim2.stats.pool_bytes == per_token * 160
    with pytest.raises(ValueError):
        KVCacheManager.create_simulated()
    with pytest.raises(ValueError):
        KVCacheManager.create_simulated(capacity_tokens=8)


def test_reset_prefix_cache_only_when_nothing_is_pinned() -> None:
    m = make_manager(4, 4)
    toks = list(range(9))
    m.allocate("a", toks)
    m.commit("a", toks)
    assert not m.pool.reset_prefix_cache()
    m.free("a")
    assert m.pool.reset_prefix_cache()
    assert m.match_prefix(toks).num_cached_tokens == 0


def test_request_errors() -> None:
    m = make_manager(4, 4)
    with pytest.raises(ValueError):
        m.allocate("a", [])
    m.allocate("a", [1])
    with pytest.raises(ValueError):
        m.allocate("a", [1])
    with pytest.raises(KeyError):
        m.free("zzz")
    with pytest.raises(ValueError):
        BlockPool(0, 4)


def test_lru_across_requests_and_a_hit_refreshes_recency() -> None:
    m = make_manager(6, 4)
    a = [*range(8), 1000]  # 2 full blocks + partial
    b = [*range(100, 108), 1001]
    for rid, toks in (("a", a), ("b", b)):
        m.allocate(rid, toks)
        m.commit(rid, toks)
    m.free("a")
    m.free("b")
    # partial blocks (uncached) first, then a's chain tail-first, then b's
    assert free_ids(m) == [5, 2, 1, 0, 4, 3]
    # a hit on a's prefix pins and then re-frees its blocks: they become most recent
    m.allocate("a2", a)
    assert [blk.block_id for blk in m.blocks_of("a2")] == [0, 1, 5]
    m.free("a2")
    assert free_ids(m) == [5, 2, 4, 3, 1, 0]
    # a 4-block miss now evicts b's chain (tail first) before a's
    m.allocate("c", list(range(500, 516)))
    assert [blk.block_id for blk in m.blocks_of("c")] == [5, 2, 4, 3]
    assert m.stats.evictions == 2
    assert m.match_prefix(b).num_cached_tokens == 0
    assert m.match_prefix(a).num_cached_tokens == 8


def test_block_cache_imports_without_torch() -> None:
    # promptcache.sim uses the block cache without the local extra: no torch at import time.
    import subprocess
    import sys

    code = (
        "import sys, promptcache.local, promptcache.local.blocks, promptcache.local.hashing; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
