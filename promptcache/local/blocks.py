"""The block pool and the prefix-cache manager of the local backend (pure Python, no torch).

One class per concept, named as in vLLM's prefix-caching design
(``docs/design/prefix_caching.md``; ``vllm/v1/core/block_pool.py``, ``kv_cache_manager.py``):

* :class:`KVBlock` -- a preallocated record: id, ref count, set-once block hash, the block's
  token ids and its parent hash (to verify a hit), and intrusive free-list links.
* :class:`FreeBlockQueue` -- a sentinel-linked list of blocks with ``ref_cnt == 0``; O(1)
  ``remove``; ``popleft`` takes the least recently freed block first.
* :class:`BlockPool` -- the *mechanism*: owns the block-hash -> block map; allocates (evicting
  lazily), touches, frees, and verifies hits.
* :class:`KVCacheManager` (alias :data:`PrefixCache`) -- the *policy*: how long a hit is (capped
  so at least one prompt token is computed: its logits are needed), which blocks a request
  pins, which blocks get registered after prefill, and release order (tail first).

The KV tensors themselves live elsewhere (``promptcache.local.kv``), indexed by ``block_id``;
this module only does bookkeeping, so ``promptcache.sim`` runs the *same* classes without a
model through :meth:`KVCacheManager.create_simulated`.

Invariants (checked by the hypothesis state machine in ``tests/test_local_blocks_stateful.py``):

1. A block with ``ref_cnt > 0`` is never in the free queue and is never evicted.
2. ``num_free_blocks + #{blocks with ref_cnt > 0} == num_blocks``.
3. ``sum(ref_cnt) == sum(len(blocks) for live requests)``.
4. A block is in the hash map iff its ``block_hash`` is set, and the map has one block per hash.

Free-queue order (what is evicted first)::

    head -> [never-cached blocks] [cached blocks, least recently freed first] <- tail

    A request's blocks are freed in reverse (tail block first), so within one request the
    tail is evicted before its parents and the shared prefix survives longest.

Deviations from vLLM, and why:

NOTE #1: a freed block that holds no block hash (the partial last block of a request, or a
duplicate of a block another request registered first) goes to the *head* of the free queue:
it caches nothing, so it should be reused before any block that does. vLLM appends it to the
tail, which evicts useful blocks first.

NOTE #2: the hash map keeps one block per hash. vLLM keeps several (its block tables are
append-only, so it cannot swap a duplicate for the registered block); here a duplicate simply
stays unregistered and returns to the head of the free queue when its request ends.

NOTE #3: a hit is verified by comparing the stored tokens and the stored parent hash with the
request's; a mismatch is a hash collision: the hit is rejected (a miss from that block on) and
counted in :attr:`CacheStats.collisions`. A new block whose hash is already registered for
other content is not registered (also counted).

NOTE #4 (speed): :meth:`KVCacheManager.match_prefix` packs the prompt once, hashes block by
block and stops at the first miss; it verifies a hit against the block's packed
``token_bytes`` (one bytes comparison) instead of building a tuple per block. The engine
passes that match to :meth:`KVCacheManager.allocate` so a request is hashed once.
``bench/block_hash.py`` prints the resulting ns/token.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, cast

from promptcache._errors import PoolExhaustedError
from promptcache.local.hashing import (
    BlockHash,
    HashFn,
    block_hashes,
    hasher,
    pack_tokens,
    root_hash,
)

__all__ = [
    "Allocation",
    "BlockPool",
    "CacheStats",
    "EvictionListener",
    "FreeBlockQueue",
    "KVBlock",
    "KVCacheManager",
    "MatchResult",
    "PrefixCache",
    "kv_bytes_per_token",
]


def kv_bytes_per_token(*, layers: int, kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Bytes of KV one token occupies: ``2 (K and V) x layers x kv_heads x head_dim x dtype_bytes``."""
    for name, value in (
        ("layers", layers),
        ("kv_heads", kv_heads),
        ("head_dim", head_dim),
        ("dtype_bytes", dtype_bytes),
    ):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    return 2 * layers * kv_heads * head_dim * dtype_bytes


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class KVBlock:
    """One KV block: ``block_size`` token slots of K/V in every layer.

    Attributes:
        block_id: index into the pool (and into the KV storage tensors), ``0..num_blocks-1``.
        ref_cnt: live requests using this block; ``0`` means it is in the free queue.
        token_ids: the block's tokens, set when the block is registered (verifies a hit).
        token_bytes: the same tokens packed as little-endian uint32 (the fast comparison).
        parent_hash: hash of the previous block in the chain, or the root (verifies a hit).
        prev_free, next_free: free-queue links (only meaningful while ``ref_cnt == 0``).
    """

    block_id: int
    ref_cnt: int = 0
    _block_hash: BlockHash | None = None
    token_ids: tuple[int, ...] = ()
    parent_hash: BlockHash | None = None
    token_bytes: bytes = b""
    prev_free: KVBlock | None = field(default=None, repr=False)
    next_free: KVBlock | None = field(default=None, repr=False)

    @property
    def block_hash(self) -> BlockHash | None:
        """The block hash once the block is full and registered, else ``None``."""
        return self._block_hash

    @block_hash.setter
    def block_hash(self, value: BlockHash) -> None:
        if self._block_hash is not None:
            raise RuntimeError(f"block {self.block_id} already has a hash (set once)")
        self._block_hash = value

    def reset_hash(self) -> None:
        """Forget the hash and contents (the block was evicted)."""
        self._block_hash = None
        self.token_ids = ()
        self.token_bytes = b""
        self.parent_hash = None


class FreeBlockQueue:
    """Doubly linked list of free blocks with O(1) ``remove`` (sentinel head and tail).

    Order is eviction order: :meth:`popleft` returns the block that should be reused first.
    Initially blocks ``0..n-1`` in id order.
    """

    def __init__(self, blocks: Sequence[KVBlock]) -> None:
        self._head = KVBlock(-1)
        self._tail = KVBlock(-2)
        self._head.next_free = self._tail
        self._tail.prev_free = self._head
        self.num_free_blocks = 0
        for block in blocks:
            self.append(block)

    def __len__(self) -> int:
        return self.num_free_blocks

    def __iter__(self) -> Iterator[KVBlock]:
        node = self._head.next_free
        while node is not None and node is not self._tail:
            yield node
            node = node.next_free

    def popleft(self) -> KVBlock:
        """Remove and return the first (next to evict) block.

        Raises:
            PoolExhaustedError: the queue is empty.
        """
        first = self._head.next_free
        if first is None or first is self._tail:
            raise PoolExhaustedError("no free KV blocks")
        self.remove(first)
        return first

    def remove(self, block: KVBlock) -> None:
        """Unlink ``block`` (which must be in the queue) in O(1)."""
        prev, nxt = block.prev_free, block.next_free
        if prev is None or nxt is None:
            raise RuntimeError(f"block {block.block_id} is not in the free queue")
        prev.next_free = nxt
        nxt.prev_free = prev
        block.prev_free = block.next_free = None
        self.num_free_blocks -= 1

    def append(self, block: KVBlock) -> None:
        """Put ``block`` at the tail (evicted last)."""
        last = self._tail.prev_free
        assert last is not None
        last.next_free = block
        block.prev_free = last
        block.next_free = self._tail
        self._tail.prev_free = block
        self.num_free_blocks += 1

    def appendleft(self, block: KVBlock) -> None:
        """Put ``block`` at the head (reused first)."""
        first = self._head.next_free
        assert first is not None
        self._head.next_free = block
        block.prev_free = self._head
        block.next_free = first
        first.prev_free = block
        self.num_free_blocks += 1

    def block_ids(self) -> list[int]:
        """The queue's block ids, head first (for tests and debugging)."""
        return [b.block_id for b in self]


# ---------------------------------------------------------------------------------------------
# Mechanism: the block pool
# ---------------------------------------------------------------------------------------------

EvictionListener = Callable[[BlockHash], None]
"""``listener(block_hash)``: told that a registered block's hash left the cache
(:meth:`BlockPool.add_eviction_listener`)."""


class BlockPool:
    """A fixed set of KV blocks, the block-hash map, and lazy LRU eviction.

    Args:
        num_blocks: blocks in the pool (``>= 1``).
        block_size: tokens per block (``>= 1``).
        enable_caching: ``False`` disables registration and lookup (every request misses).

    Counters (read them through :meth:`KVCacheManager.stats`): ``evictions`` (registered
    blocks whose hash was dropped to reuse the block), ``collisions`` (rejected hits plus
    refused registrations, NOTE #3 of the module docstring).

    Eviction listeners (:meth:`add_eviction_listener`) are told each hash that leaves the
    cache, so that state kept beside the pool (the local backend's OpenAI idle ledger,
    :meth:`promptcache.local.accounting.CacheLedger.forget_block`) forgets exactly what the
    pool evicted, in the pool's own order.
    """

    def __init__(self, num_blocks: int, block_size: int, *, enable_caching: bool = True) -> None:
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.blocks = [KVBlock(i) for i in range(num_blocks)]
        self.free_block_queue = FreeBlockQueue(self.blocks)
        self.cached_block_hash_to_block: dict[BlockHash, KVBlock] = {}
        self.evictions = 0
        self.collisions = 0
        self.duplicates = 0
        self._eviction_listeners: list[EvictionListener] = []

    # -- eviction listeners ---------------------------------------------------------------------

    def add_eviction_listener(self, listener: EvictionListener) -> None:
        """Call ``listener(block_hash)`` for every hash that leaves the block-hash map: a
        registered block evicted to be reused (:meth:`get_new_blocks`) or dropped by
        :meth:`reset_prefix_cache`. It is called after the pool's state changed (the hash is no
        longer cached), under whatever lock the caller holds (the engine's), so it must be quick,
        must not raise and must not call back into the pool. Adding the same listener twice
        calls it twice."""
        self._eviction_listeners.append(listener)

    def remove_eviction_listener(self, listener: EvictionListener) -> None:
        """Stop calling ``listener`` (one registration of it; a no-op if it has none)."""
        try:
            self._eviction_listeners.remove(listener)
        except ValueError:
            pass

    def _evicted(self, block_hash: BlockHash) -> None:
        for listener in self._eviction_listeners:
            listener(block_hash)

    # -- lookup -------------------------------------------------------------------------------

    def get_cached_block(
        self, block_hash: BlockHash, token_ids: Sequence[int], parent_hash: BlockHash
    ) -> KVBlock | None:
        """The registered block for ``block_hash`` if its stored tokens and parent match.

        A block registered under the same hash but holding other tokens or another parent is
        a collision: it is counted and ``None`` is returned (the caller treats it as a miss).
        Does not change ref counts (see :meth:`touch`).
        """
        block = self.cached_block_hash_to_block.get(block_hash)
        if block is None:
            return None
        if block.parent_hash != parent_hash or block.token_ids != tuple(token_ids):
            self.collisions += 1
            return None
        return block

    # -- registration -------------------------------------------------------------------------

    def cache_full_blocks(
        self,
        blocks: Sequence[KVBlock],
        hashes: Sequence[BlockHash],
        token_ids: Sequence[int],
        *,
        root: BlockHash,
        start: int,
        stop: int,
    ) -> list[int]:
        """Register blocks ``start..stop-1`` of a request as full, cached blocks.

        Args:
            blocks: the request's block table (block ``i`` holds tokens
                ``[i*block_size, (i+1)*block_size)``).
            hashes: the request's block hashes, at least ``stop`` of them.
            token_ids: the request's tokens, at least ``stop * block_size``.
            root: the chain's root hash (parent of block 0).
            start, stop: block indices to register.

        Returns:
            The indices (into ``blocks``) of the blocks registered now; a block that is already
            registered, or whose hash is taken (duplicate or collision), is skipped.
        """
        if not self.enable_caching:
            return []
        bs = self.block_size
        step = 4 * bs
        registered: list[int] = []
        table = self.cached_block_hash_to_block
        packed = pack_tokens(token_ids[start * bs : stop * bs])
        for i in range(start, stop):
            block = blocks[i]
            if block._block_hash is not None:
                continue
            h = hashes[i]
            parent = root if i == 0 else hashes[i - 1]
            off = (i - start) * step
            raw = packed[off : off + step]
            existing = table.get(h)
            if existing is not None:
                if existing.parent_hash == parent and existing.token_bytes == raw:
                    self.duplicates += 1
                else:
                    self.collisions += 1
                continue
            block.block_hash = h
            block.token_ids = tuple(token_ids[i * bs : (i + 1) * bs])
            block.token_bytes = raw
            block.parent_hash = parent
            table[h] = block
            registered.append(i)
        return registered

    # -- allocation ---------------------------------------------------------------------------

    def get_num_free_blocks(self) -> int:
        """Blocks with ``ref_cnt == 0`` (cached or not): what :meth:`get_new_blocks` can hand out."""
        return self.free_block_queue.num_free_blocks

    def get_new_blocks(self, num_blocks: int) -> list[KVBlock]:
        """Take ``num_blocks`` blocks from the head of the free queue, evicting lazily.

        A taken block that still holds a hash is evicted now (its hash leaves the map). The
        returned blocks have ``ref_cnt == 1``.

        Raises:
            PoolExhaustedError: fewer than ``num_blocks`` free blocks; nothing is changed.
        """
        if num_blocks > self.free_block_queue.num_free_blocks:
            raise PoolExhaustedError(
                f"need {num_blocks} free KV blocks, {self.free_block_queue.num_free_blocks} "
                f"free of {self.num_blocks} (the rest are pinned by running requests)"
            )
        out: list[KVBlock] = []
        for _ in range(num_blocks):
            block = self.free_block_queue.popleft()
            self._maybe_evict(block)
            block.ref_cnt += 1
            out.append(block)
        return out

    def _maybe_evict(self, block: KVBlock) -> None:
        h = block._block_hash
        if h is None:
            return
        cached = self.cached_block_hash_to_block.get(h) is block
        if cached:
            del self.cached_block_hash_to_block[h]
        block.reset_hash()
        self.evictions += 1
        if cached and self._eviction_listeners:
            self._evicted(h)

    def touch(self, blocks: Iterable[KVBlock]) -> None:
        """Pin blocks that a request reuses: ``ref_cnt += 1``, leaving the free queue if free."""
        for block in blocks:
            if block.ref_cnt == 0:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1

    def free_blocks(self, ordered_blocks: Iterable[KVBlock]) -> None:
        """Unpin blocks in the given order (callers pass a request's blocks tail first).

        A block reaching ``ref_cnt == 0`` joins the free queue: at the tail if it holds a hash
        (it stays cached until evicted), at the head if not (NOTE #1).
        """
        for block in ordered_blocks:
            if block.ref_cnt <= 0:
                raise RuntimeError(f"block {block.block_id} freed more often than allocated")
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                if block._block_hash is None:
                    self.free_block_queue.appendleft(block)
                else:
                    self.free_block_queue.append(block)

    def reset_prefix_cache(self) -> bool:
        """Drop every cached hash; only when no block is pinned. Returns whether it did.
        Eviction listeners are told each dropped hash."""
        if self.free_block_queue.num_free_blocks != self.num_blocks:
            return False
        dropped = list(self.cached_block_hash_to_block)
        self.cached_block_hash_to_block.clear()
        for block in self.blocks:
            block.reset_hash()
        for h in dropped:
            self._evicted(h)
        return True

    @property
    def num_cached_blocks(self) -> int:
        """Blocks currently registered under a block hash (pinned or free)."""
        return len(self.cached_block_hash_to_block)


# ---------------------------------------------------------------------------------------------
# Policy: the prefix-cache manager
# ---------------------------------------------------------------------------------------------


class MatchResult(NamedTuple):
    """A prefix match (not pinned).

    Attributes:
        blocks: the matched registered blocks, block 0 first.
        num_cached_tokens: ``len(blocks) * block_size`` (tokens whose KV is reusable).
        block_hashes: hashes of the matched blocks (the parent of the next block is the last).
    """

    blocks: list[KVBlock]
    num_cached_tokens: int
    block_hashes: list[BlockHash]


class Allocation(NamedTuple):
    """The blocks a request pinned on :meth:`KVCacheManager.allocate`.

    Attributes:
        blocks: the request's block table; ``blocks[:num_cached_tokens // block_size]`` are
            hits (already hold K/V), the rest are new.
        num_cached_tokens: prompt tokens whose K/V is reused (a multiple of ``block_size``).
        root: the chain root of this request (tenant salt, model, adapter, block size).
    """

    blocks: list[KVBlock]
    num_cached_tokens: int
    root: BlockHash


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Prefix-cache counters since construction (or :meth:`KVCacheManager.reset_stats`).

    Attributes:
        queries: requests allocated.
        query_tokens: prompt tokens of those requests.
        hits: requests with at least one reused block.
        hit_tokens: prompt tokens whose K/V was reused (cache reads, in tokens).
        evictions: registered blocks evicted to make room.
        collisions: rejected hits and refused registrations (hash equal, content not).
        blocks_used: blocks pinned now (``ref_cnt > 0``).
        blocks_cached: blocks registered under a hash now (pinned or free).
        blocks_total: blocks in the pool.
        block_size: tokens per block.
        bytes_per_block: KV bytes of one block (``None`` if the model shape is unknown).
        pool_bytes: ``blocks_total * bytes_per_block`` (``None`` if unknown).
    """

    queries: int
    query_tokens: int
    hits: int
    hit_tokens: int
    evictions: int
    collisions: int
    blocks_used: int
    blocks_cached: int
    blocks_total: int
    block_size: int
    bytes_per_block: int | None
    pool_bytes: int | None

    @property
    def hit_rate(self) -> float | None:
        """``hit_tokens / query_tokens`` (``None`` before the first query)."""
        return self.hit_tokens / self.query_tokens if self.query_tokens else None


@dataclass(slots=True)
class _RequestState:
    blocks: list[KVBlock]
    root: BlockHash
    hashes: list[BlockHash]
    num_registered: int  # blocks[:num_registered] are registered or were hits


class KVCacheManager:
    """Prefix-cache policy over a :class:`BlockPool`: match, pin, register, release.

    Blocks layout of one request (``B = block_size``, prompt of ``n`` tokens)::

        |<-- hit blocks (touched) -->|<----- new blocks (from the free queue) ----->|
        [ b0 ][ b1 ] ... [ bh-1 ]    [ bh ] ... [ b(k-2) ][ b(k-1): partial tail ]
        |<---- num_cached_tokens --->|<------- computed by prefill ------------------>|
        num_cached_tokens = h * B <= n - 1        k = ceil(n / B)

    Args:
        pool: the block pool.
        model_id, adapter_id: mixed into every chain root (KV of another model never matches).
        hash_fn: ``"sha256"`` (default), ``"blake2b"``, or a test callable.
        bytes_per_token: KV bytes per token (:func:`kv_bytes_per_token`), for stats only.
    """

    def __init__(
        self,
        pool: BlockPool,
        *,
        model_id: str = "random",
        adapter_id: str = "",
        hash_fn: HashFn = "sha256",
        bytes_per_token: int | None = None,
    ) -> None:
        self.pool = pool
        self.block_size = pool.block_size
        self.model_id = model_id
        self.adapter_id = adapter_id
        self.hash_fn = hash_fn
        self._hasher = hasher(hash_fn)
        self.bytes_per_token = bytes_per_token
        self._roots: dict[bytes, BlockHash] = {}
        self._requests: dict[str, _RequestState] = {}
        self.reset_stats()

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def create_simulated(
        cls,
        *,
        capacity_tokens: int | None = None,
        capacity_bytes: int | None = None,
        block_size: int = 16,
        layers: int = 32,
        kv_heads: int = 8,
        head_dim: int = 128,
        dtype_bytes: int = 2,
        model_id: str = "simulated",
        hash_fn: HashFn = "sha256",
    ) -> KVCacheManager:
        """A manager with no KV storage, for the simulator (the same class, not a copy).

        Give exactly one of ``capacity_tokens`` (rounded down to whole blocks) or
        ``capacity_bytes`` (divided by the KV bytes of one block; the defaults describe a
        Llama-3-8B-like shape: 32 layers, 8 KV heads, head dim 128, 2-byte dtype = 128 KiB
        per token).

        Raises:
            ValueError: neither or both capacities given, or a capacity below one block.
        """
        if (capacity_tokens is None) == (capacity_bytes is None):
            raise ValueError("give exactly one of capacity_tokens or capacity_bytes")
        per_token = kv_bytes_per_token(
            layers=layers, kv_heads=kv_heads, head_dim=head_dim, dtype_bytes=dtype_bytes
        )
        if capacity_tokens is not None:
            num_blocks = capacity_tokens // block_size
        else:
            assert capacity_bytes is not None
            num_blocks = capacity_bytes // (per_token * block_size)
        if num_blocks < 1:
            raise ValueError("capacity is smaller than one block")
        return cls(
            BlockPool(num_blocks, block_size),
            model_id=model_id,
            hash_fn=hash_fn,
            bytes_per_token=per_token,
        )

    def root(self, tenant_salt: bytes | str = b"") -> BlockHash:
        """The chain root for a tenant salt under this manager's model, adapter, block size."""
        key = tenant_salt.encode("utf-8") if isinstance(tenant_salt, str) else bytes(tenant_salt)
        r = self._roots.get(key)
        if r is None:
            r = root_hash(
                tenant_salt=key,
                model_id=self.model_id,
                adapter_id=self.adapter_id,
                block_size=self.block_size,
                hash_fn=self.hash_fn,
            )
            self._roots[key] = r
        return r

    # -- lookup -------------------------------------------------------------------------------

    def match_prefix(
        self,
        tokens: Sequence[int],
        *,
        root: BlockHash | None = None,
        tenant_salt: bytes | str = b"",
        max_tokens: int | None = None,
    ) -> MatchResult:
        """The longest run of registered blocks matching ``tokens``, without pinning.

        Capped at ``len(tokens) - 1`` tokens (the last prompt token must be computed for its
        logits) and at ``max_tokens`` if given. Blocks are hashed lazily: hashing stops at the
        first miss.

        Args:
            root: the chain root; default ``self.root(tenant_salt)``.
        """
        if root is None:
            root = self.root(tenant_salt)
        limit = len(tokens) - 1 if max_tokens is None else min(len(tokens) - 1, max_tokens)
        max_blocks = max(limit, 0) // self.block_size
        blocks, hashes, collided = self._walk(tokens, root, max_blocks)
        if collided:
            self.pool.collisions += 1
        return MatchResult(blocks, len(blocks) * self.block_size, hashes)

    def cached_prefix_hashes(
        self, tokens: Sequence[int], *, root: BlockHash | None = None, tenant_salt: bytes | str = b""
    ) -> list[BlockHash]:
        """Hashes of the leading run of ``tokens``' full blocks that the pool holds now, block 0
        first (``len`` of it x ``block_size`` tokens of KV are cached). Unlike
        :meth:`match_prefix` the last block counts too (nothing is capped for logits), and
        nothing is pinned or counted: it asks what is cached, e.g. to tie state kept beside
        the pool to the blocks it describes (:meth:`BlockPool.add_eviction_listener`).

        Args:
            root: the chain root; default ``self.root(tenant_salt)``.
        """
        if root is None:
            root = self.root(tenant_salt)
        return self._walk(tokens, root, len(tokens) // self.block_size)[1]

    def _walk(
        self, tokens: Sequence[int], root: BlockHash, max_blocks: int
    ) -> tuple[list[KVBlock], list[BlockHash], bool]:
        """``(blocks, hashes, collided)``: the registered blocks matching the first
        ``max_blocks`` full blocks of ``tokens``, hashed lazily up to the first miss;
        ``collided``: that miss was a registered block holding other tokens (NOTE #3)."""
        if not self.pool.enable_caching or max_blocks <= 0:
            return [], [], False
        bs = self.block_size
        new = self._hasher
        get = self.pool.cached_block_hash_to_block.get
        packed = pack_tokens(tokens[: max_blocks * bs])
        step = 4 * bs
        blocks: list[KVBlock] = []
        hashes: list[bytes] = []
        parent: bytes = root
        for off in range(0, max_blocks * step, step):
            chunk = packed[off : off + step]
            h = new(parent + chunk).digest()
            block = get(h)  # type: ignore[call-overload]
            if block is None:
                break
            # inline of BlockPool.get_cached_block: verify stored tokens and parent
            if block.parent_hash != parent or block.token_bytes != chunk:
                return blocks, cast(list[BlockHash], hashes), True
            blocks.append(block)
            hashes.append(h)
            parent = h
        return blocks, cast(list[BlockHash], hashes), False

    # -- request lifecycle ------------------------------------------------------------------------

    def allocate(
        self,
        request_id: str,
        tokens: Sequence[int],
        *,
        root: BlockHash | None = None,
        tenant_salt: bytes | str = b"",
        max_cached_tokens: int | None = None,
        match: MatchResult | None = None,
    ) -> Allocation:
        """Match the prefix and pin blocks for the whole prompt (hits + new blocks).

        Args:
            request_id: a new, unique id (``free`` it when the request ends).
            tokens: the prompt's token ids (``>= 1``).
            root / tenant_salt: the chain root (see :meth:`root`).
            max_cached_tokens: reuse at most this many tokens (e.g. ``0`` to force a miss).
            match: a :meth:`match_prefix` result for these tokens and root computed just before
                (under the same lock), to skip hashing twice; ``max_cached_tokens`` is then
                ignored.

        Raises:
            ValueError: empty prompt or a ``request_id`` already live.
            PoolExhaustedError: not enough free blocks; no ref count or stat changes.
        """
        if not tokens:
            raise ValueError("cannot allocate an empty prompt")
        if request_id in self._requests:
            raise ValueError(f"request {request_id!r} is already allocated")
        if root is None:
            root = self.root(tenant_salt)
        if match is None:
            match = self.match_prefix(tokens, root=root, max_tokens=max_cached_tokens)
        bs = self.block_size
        num_total = -(-len(tokens) // bs)
        num_new = num_total - len(match.blocks)
        # Hit blocks with ref_cnt == 0 sit in the free queue; touching them removes them.
        evictable_hits = sum(1 for b in match.blocks if b.ref_cnt == 0)
        free = self.pool.get_num_free_blocks()
        if num_new > free - evictable_hits:
            raise PoolExhaustedError(
                f"request needs {num_new} new KV blocks of {bs} tokens; "
                f"{free - evictable_hits} can be freed (pool of {self.pool.num_blocks} blocks)"
            )
        self.pool.touch(match.blocks)
        new_blocks = self.pool.get_new_blocks(num_new)
        blocks = match.blocks + new_blocks
        self._requests[request_id] = _RequestState(
            blocks, root, list(match.block_hashes), len(match.blocks)
        )
        self._queries += 1
        self._query_tokens += len(tokens)
        if match.blocks:
            self._hits += 1
            self._hit_tokens += match.num_cached_tokens
        return Allocation(blocks, match.num_cached_tokens, root)

    def blocks_of(self, request_id: str) -> list[KVBlock]:
        """The live request's block table (block 0 first).

        Raises:
            KeyError: unknown request.
        """
        return list(self._requests[request_id].blocks)

    def root_of(self, request_id: str) -> BlockHash:
        """The chain root a live request was allocated under.

        Raises:
            KeyError: unknown request.
        """
        return self._requests[request_id].root

    def block_hashes_of(self, request_id: str) -> list[BlockHash]:
        """The live request's block hashes computed so far (block 0 first): its hit blocks
        after :meth:`allocate`, every full block after :meth:`commit`.

        Raises:
            KeyError: unknown request.
        """
        return list(self._requests[request_id].hashes)

    def commit(self, request_id: str, tokens: Sequence[int]) -> list[tuple[int, KVBlock]]:
        """Register the request's newly *full* blocks once their K/V has been written.

        ``tokens`` is the request's whole sequence so far (prompt, then generated tokens).
        If it outgrew the blocks allocated, more blocks are taken from the free queue; when
        none are free the extra blocks are simply not cached (no error: caching is optional
        after admission).

        Returns:
            ``(index, block)`` of each block registered by this call, block order. The caller
            writes K/V into these blocks before the next request can read them (the engine
            holds one lock around both).

        Raises:
            KeyError: unknown request.
        """
        state = self._requests[request_id]
        bs = self.block_size
        num_full = len(tokens) // bs
        need = -(-len(tokens) // bs) - len(state.blocks)
        if need > 0:
            take = min(need, self.pool.get_num_free_blocks())
            state.blocks.extend(self.pool.get_new_blocks(take))
            num_full = min(num_full, len(state.blocks))
        if num_full <= state.num_registered:
            return []
        have = len(state.hashes)
        if num_full > have:
            parent = state.root if have == 0 else state.hashes[-1]
            state.hashes.extend(
                block_hashes(
                    tokens[: num_full * bs],
                    root=state.root,
                    block_size=bs,
                    hash_fn=self.hash_fn,
                    start=have,
                    parent=parent,
                )
            )
        done = self.pool.cache_full_blocks(
            state.blocks,
            state.hashes,
            tokens,
            root=state.root,
            start=state.num_registered,
            stop=num_full,
        )
        state.num_registered = num_full
        return [(i, state.blocks[i]) for i in done]

    def free(self, request_id: str) -> None:
        """Release a request's blocks in reverse order (its tail is evicted before its parents).

        Raises:
            KeyError: unknown request.
        """
        state = self._requests.pop(request_id)
        self.pool.free_blocks(reversed(state.blocks))

    # -- stats ------------------------------------------------------------------------------------

    @property
    def num_requests(self) -> int:
        """Live (allocated, not freed) requests."""
        return len(self._requests)

    def reset_stats(self) -> None:
        """Zero the query/hit counters (pool counters are cumulative)."""
        self._queries = 0
        self._query_tokens = 0
        self._hits = 0
        self._hit_tokens = 0

    @property
    def stats(self) -> CacheStats:
        """A snapshot of the counters and pool use."""
        pool = self.pool
        per_block = None if self.bytes_per_token is None else self.bytes_per_token * self.block_size
        return CacheStats(
            queries=self._queries,
            query_tokens=self._query_tokens,
            hits=self._hits,
            hit_tokens=self._hit_tokens,
            evictions=pool.evictions,
            collisions=pool.collisions,
            blocks_used=pool.num_blocks - pool.get_num_free_blocks(),
            blocks_cached=pool.num_cached_blocks,
            blocks_total=pool.num_blocks,
            block_size=self.block_size,
            bytes_per_block=per_block,
            pool_bytes=None if per_block is None else per_block * pool.num_blocks,
        )


PrefixCache = KVCacheManager
"""Alias: the prefix-cache manager under the name the backend notes use."""
