"""Hypothesis state machine: the block cache against a plain reference model.

The reference keys cached blocks by ``(tenant salt, tuple of every token up to the block's
end)`` -- no hashing, no linked list, O(n) list operations -- and implements the documented
policy directly: hits capped at ``n - 1`` tokens, admission checked before touching, LRU free
list with uncached blocks at the head, release tail first, lazy eviction. After every step the
real cache must agree exactly (block ids, hit lengths, free-queue order, exceptions, evictions)
and its invariants must hold: a referenced block is never evicted and the accounting balances.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
)

from promptcache._errors import PoolExhaustedError
from promptcache.local.blocks import BlockPool, KVCacheManager

BLOCK = 2
NUM_BLOCKS = 5
SALTS = [b"", b"t1"]

Key = tuple[bytes, tuple[int, ...]]


@dataclass
class RefBlock:
    ref: int = 0
    key: Key | None = None


@dataclass
class RefCache:
    """The reference model: the policy written as plainly as possible."""

    blocks: list[RefBlock] = field(default_factory=lambda: [RefBlock() for _ in range(NUM_BLOCKS)])
    free: list[int] = field(default_factory=lambda: list(range(NUM_BLOCKS)))
    cached: dict[Key, int] = field(default_factory=dict)
    requests: dict[str, tuple[bytes, list[int], int]] = field(default_factory=dict)
    evictions: int = 0

    def match(self, salt: bytes, tokens: list[int]) -> list[int]:
        out: list[int] = []
        for i in range((len(tokens) - 1) // BLOCK):
            bid = self.cached.get((salt, tuple(tokens[: (i + 1) * BLOCK])))
            if bid is None:
                break
            out.append(bid)
        return out

    def allocate(self, rid: str, salt: bytes, tokens: list[int]) -> tuple[list[int], int]:
        hits = self.match(salt, tokens)
        need = -(-len(tokens) // BLOCK) - len(hits)
        usable = len(self.free) - sum(1 for b in hits if self.blocks[b].ref == 0)
        if need > usable:
            raise PoolExhaustedError("reference: pool exhausted")
        for b in hits:
            if self.blocks[b].ref == 0:
                self.free.remove(b)
            self.blocks[b].ref += 1
        new: list[int] = []
        for _ in range(need):
            b = self.free.pop(0)
            key = self.blocks[b].key
            if key is not None:
                del self.cached[key]
                self.blocks[b].key = None
                self.evictions += 1
            self.blocks[b].ref += 1
            new.append(b)
        table = hits + new
        self.requests[rid] = (salt, table, len(hits))
        return table, len(hits) * BLOCK

    def commit(self, rid: str, tokens: list[int]) -> None:
        salt, table, _ = self.requests[rid]
        for i in range(len(tokens) // BLOCK):
            b = table[i]
            key = (salt, tuple(tokens[: (i + 1) * BLOCK]))
            if self.blocks[b].key is not None or key in self.cached:
                continue
            self.blocks[b].key = key
            self.cached[key] = b

    def release(self, rid: str) -> None:
        _, table, _ = self.requests.pop(rid)
        for b in reversed(table):
            self.blocks[b].ref -= 1
            if self.blocks[b].ref == 0:
                if self.blocks[b].key is None:
                    self.free.insert(0, b)
                else:
                    self.free.append(b)


prompts = st.lists(st.integers(0, 2), min_size=1, max_size=9)


class BlockCacheMachine(RuleBasedStateMachine):
    live = Bundle("live")

    def __init__(self) -> None:
        super().__init__()
        self.real = KVCacheManager(BlockPool(NUM_BLOCKS, BLOCK), model_id="m")
        self.ref = RefCache()
        self.tokens: dict[str, list[int]] = {}
        self.pinned_hashes: dict[str, list[tuple[int, bytes]]] = {}
        self.counter = 0

    @rule(target=live, tokens=prompts, salt=st.sampled_from(SALTS), commit=st.booleans())
    def allocate(self, tokens: list[int], salt: bytes, commit: bool) -> str:
        rid = f"r{self.counter}"
        self.counter += 1
        try:
            expected = self.ref.allocate(rid, salt, tokens)
        except PoolExhaustedError:
            before = (
                [b.ref_cnt for b in self.real.pool.blocks],
                self.real.pool.free_block_queue.block_ids(),
            )
            try:
                self.real.allocate(rid, tokens, tenant_salt=salt)
            except PoolExhaustedError:
                after = (
                    [b.ref_cnt for b in self.real.pool.blocks],
                    self.real.pool.free_block_queue.block_ids(),
                )
                assert before == after
                return "none"
            raise AssertionError("real cache admitted what the reference refused") from None
        got = self.real.allocate(rid, tokens, tenant_salt=salt)
        assert ([b.block_id for b in got.blocks], got.num_cached_tokens) == expected
        self.tokens[rid] = tokens
        self.pinned_hashes[rid] = [
            (b.block_id, b.block_hash) for b in got.blocks if b.block_hash is not None
        ]
        if commit:
            self.ref.commit(rid, tokens)
            for _, block in self.real.commit(rid, tokens):
                assert block.block_hash is not None
                self.pinned_hashes[rid].append((block.block_id, block.block_hash))
        return rid

    @rule(rid=consumes(live))
    def free(self, rid: str) -> None:
        if rid == "none":
            return
        self.ref.release(rid)
        self.real.free(rid)
        del self.tokens[rid]
        del self.pinned_hashes[rid]

    @rule(tokens=prompts, salt=st.sampled_from(SALTS))
    def probe(self, tokens: list[int], salt: bytes) -> None:
        assert self.real.match_prefix(tokens, tenant_salt=salt).num_cached_tokens == (
            len(self.ref.match(salt, tokens)) * BLOCK
        )

    @invariant()
    def agrees_with_reference(self) -> None:
        pool = self.real.pool
        assert pool.free_block_queue.block_ids() == self.ref.free
        assert [b.ref_cnt for b in pool.blocks] == [b.ref for b in self.ref.blocks]
        assert pool.evictions == self.ref.evictions
        assert pool.num_cached_blocks == len(self.ref.cached)

    @invariant()
    def referenced_blocks_are_never_evicted(self) -> None:
        pool = self.real.pool
        for pinned in self.pinned_hashes.values():
            for block_id, h in pinned:
                block = pool.blocks[block_id]
                assert block.ref_cnt > 0
                assert block.block_hash == h
                assert pool.cached_block_hash_to_block[h] is block

    @invariant()
    def accounting_balances(self) -> None:
        pool = self.real.pool
        used = sum(1 for b in pool.blocks if b.ref_cnt > 0)
        assert pool.get_num_free_blocks() + used == pool.num_blocks
        assert sum(b.ref_cnt for b in pool.blocks) == sum(
            len(self.real.blocks_of(r)) for r in self.tokens
        )
        assert all(b.ref_cnt == 0 for b in pool.free_block_queue)
        assert all(blk.block_hash == h for h, blk in pool.cached_block_hash_to_block.items())
        assert sum(1 for b in pool.blocks if b.block_hash is not None) == pool.num_cached_blocks
        stats = self.real.stats
        assert stats.blocks_used == used and stats.collisions == 0


BlockCacheMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
TestBlockCache = BlockCacheMachine.TestCase
