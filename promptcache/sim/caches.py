"""The two prefix caches the simulator compares, behind one small server-side interface.

A simulated server uses a cache through four verbs (one KV pool of ``capacity_tokens`` per
replica; running requests' KV lives in the same pool as the cache)::

    peek(req)    tokens start() would reuse now; changes nothing (schedulers, routers)
    start(req)   admit: pin the matched prefix, reserve KV for the rest of the prompt and
                 for the output; returns the cached token count, or None when the pinned
                 KV of running requests leaves no room (the request keeps waiting)
    finish(req)  insert prompt + reply into the cache, unpin, release the reservation

Both caches reuse at most ``prompt_len - 1`` tokens (the last prompt token is computed for
its logits: vLLM ``kv_cache_manager.py``, SGLang ``Req.init_next_round_input``).

:class:`BlockSimCache` is the local backend's own :class:`promptcache.local.blocks.KVCacheManager`
made with ``create_simulated`` (the same class the backend serves with, not a copy), plus:

NOTE #1 (adapter, the API gap): the manager keeps one adapter id per instance, but a replica
serving N LoRA adapters needs one chain root per adapter; roots come from
:func:`promptcache.local.hashing.root_hash` with ``adapter_id`` and are passed to ``allocate``.

NOTE #2 (speed, the second API gap): block hashes of each conversation's token stream are
computed once per (stream, root) in a :class:`BlockHashMemo` shared by all simulations of one
workload (a turn's prompt is a prefix of its conversation's stream, so its block hashes are a
prefix of the stream's). ``peek`` looks them up in the pool's hash map. The manager's
``match_prefix`` (called by ``allocate``) rehashes the prompt on every call and has no
parameter for precomputed hashes (vLLM keeps ``request.block_hashes`` for this), which made
the block cache about 1.3-2x slower than it needs to be (``bench/simulate.py`` prints the
ratio). :class:`_PrehashedManager` is a subclass that only overrides ``match_prefix`` to walk
the memo's hashes instead, verifying each hit with the pool's own ``get_cached_block``
(stored tokens + parent hash). Everything else (pool, free
queue, eviction, allocate, commit, free) is the backend's code. ``commit`` still hashes the
newly filled blocks once, as the backend does.

NOTE #3 (decode KV): the manager's ``allocate`` pins blocks for the tokens it is given;
``start`` passes prompt + output tokens (output positions padded when the reply's ids are
unknown) with ``max_cached_tokens = prompt_len - 1``, so decode KV is reserved at admission,
as in the radix model. ``commit`` then registers the full blocks of prompt + known reply.

:class:`RadixSimCache` wraps :class:`promptcache.sim.radix.RadixCache` with SGLang's pool
accounting: ``tree tokens + in-flight reserved tokens <= capacity``; when a request needs room,
unreferenced leaves are evicted.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from promptcache._errors import PoolExhaustedError
from promptcache.local.blocks import KVBlock, KVCacheManager, MatchResult
from promptcache.local.hashing import BlockHash, block_hashes, root_hash
from promptcache.sim.costs import ModelShape
from promptcache.sim.radix import RadixCache, RadixKey, TreeNode
from promptcache.sim.workload import Request

__all__ = [
    "BlockHashMemo",
    "BlockSimCache",
    "RadixSimCache",
    "SimCache",
    "make_cache",
]

_MODEL_ID = "promptcache-sim"


class SimCache(ABC):
    """A replica's KV pool with a prefix cache in it (see the module docstring)."""

    kind: str
    capacity_tokens: int

    @abstractmethod
    def peek(self, req: Request) -> int:
        """Prompt tokens that :meth:`start` would reuse now (no state change)."""

    @abstractmethod
    def start(self, req: Request) -> int | None:
        """Admit ``req``: pin its cached prefix and reserve KV; cached tokens or ``None``."""

    @abstractmethod
    def finish(self, req: Request) -> None:
        """Insert prompt + reply of ``req``, unpin it, release its reservation."""

    @property
    @abstractmethod
    def evicted_tokens(self) -> int:
        """Cached tokens evicted so far."""


class BlockHashMemo:
    """Block hashes of token streams, computed once per ``(stream, root)`` (NOTE #2).

    Args:
        block_size: tokens per block.
    """

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self._roots: dict[str, BlockHash] = {}
        self._hashes: dict[tuple[int, BlockHash], tuple[list[int], list[BlockHash]]] = {}

    def root(self, adapter: str) -> BlockHash:
        """The chain root for an adapter (model id ``promptcache-sim``, no tenant salt)."""
        r = self._roots.get(adapter)
        if r is None:
            r = root_hash(model_id=_MODEL_ID, adapter_id=adapter, block_size=self.block_size)
            self._roots[adapter] = r
        return r

    def hashes(self, req: Request) -> list[BlockHash]:
        """Hashes of the full blocks of ``req.stream`` under the request's adapter root."""
        root = self.root(req.adapter)
        key = (id(req.stream), root)
        entry = self._hashes.get(key)
        # The stream object is kept in the entry, so its id() cannot be reused meanwhile.
        if entry is None or entry[0] is not req.stream:
            entry = (req.stream, block_hashes(req.stream, root=root, block_size=self.block_size))
            self._hashes[key] = entry
        return entry[1]


class _PrehashedManager(KVCacheManager):
    """The backend's :class:`KVCacheManager`, matching with precomputed block hashes (NOTE #2).

    Set :attr:`prehashed` to the hashes of the full blocks of the tokens about to be matched
    (at least ``max_tokens // block_size`` of them) before ``allocate``; ``None`` falls back
    to the backend's own hashing.
    """

    prehashed: Sequence[BlockHash] | None = None

    def match_prefix(
        self,
        tokens: Sequence[int],
        *,
        root: BlockHash | None = None,
        tenant_salt: bytes | str = b"",
        max_tokens: int | None = None,
    ) -> MatchResult:
        hashes = self.prehashed
        if hashes is None or root is None:
            return super().match_prefix(tokens, root=root, tenant_salt=tenant_salt,
                                        max_tokens=max_tokens)
        limit = len(tokens) - 1 if max_tokens is None else min(len(tokens) - 1, max_tokens)
        bs = self.block_size
        max_blocks = min(max(limit, 0) // bs, len(hashes))
        if not self.pool.enable_caching:
            return MatchResult([], 0, [])
        table = self.pool.cached_block_hash_to_block
        get_cached = self.pool.get_cached_block
        blocks: list[KVBlock] = []
        parent = root
        for i in range(max_blocks):
            h = hashes[i]
            if h not in table:
                break
            block = get_cached(h, tokens[i * bs : (i + 1) * bs], parent)
            if block is None:
                break
            blocks.append(block)
            parent = h
        return MatchResult(blocks, len(blocks) * bs, list(hashes[: len(blocks)]))


class BlockSimCache(SimCache):
    """The backend's block-hash LRU cache (:class:`KVCacheManager`) as a simulated pool.

    Args:
        capacity_tokens: pool size in tokens (rounded down to whole blocks).
        block_size: tokens per block.
        memo: shared block-hash memo (one per workload and block size; made if ``None``).
        shape: model shape, so the manager's ``stats.pool_bytes`` is in that model's bytes
            (the manager's Llama-3-8B-like default otherwise).
    """

    kind = "block"

    def __init__(self, capacity_tokens: int, block_size: int = 16,
                 memo: BlockHashMemo | None = None, shape: ModelShape | None = None) -> None:
        if shape is None:
            manager = _PrehashedManager.create_simulated(
                capacity_tokens=capacity_tokens, block_size=block_size, model_id=_MODEL_ID
            )
        else:
            manager = _PrehashedManager.create_simulated(
                capacity_tokens=capacity_tokens, block_size=block_size, model_id=_MODEL_ID,
                layers=shape.layers, kv_heads=shape.kv_heads, head_dim=shape.head_dim,
                dtype_bytes=shape.dtype_bytes,
            )
        assert isinstance(manager, _PrehashedManager)
        self.manager: _PrehashedManager = manager
        self.block_size = block_size
        self.capacity_tokens = self.manager.pool.num_blocks * block_size
        if memo is not None and memo.block_size != block_size:
            raise ValueError("the hash memo was made for another block size")
        self.memo = memo or BlockHashMemo(block_size)
        self._table = self.manager.pool.cached_block_hash_to_block

    def peek(self, req: Request) -> int:
        max_blocks = (req.prompt_len - 1) // self.block_size
        hashes = self.memo.hashes(req)
        table = self._table
        i = 0
        while i < max_blocks and hashes[i] in table:
            i += 1
        return i * self.block_size

    def start(self, req: Request) -> int | None:
        need = req.prompt_len + req.output_tokens
        tokens = req.stream[:need] if need <= req.insert_len else (
            req.stream[: req.insert_len] + [0] * (need - req.insert_len)
        )
        manager = self.manager
        manager.prehashed = self.memo.hashes(req)
        try:
            alloc = manager.allocate(
                str(req.index), tokens, root=self.memo.root(req.adapter),
                max_cached_tokens=req.prompt_len - 1,
            )
        except PoolExhaustedError:
            return None
        finally:
            manager.prehashed = None
        return alloc.num_cached_tokens

    def finish(self, req: Request) -> None:
        rid = str(req.index)
        self.manager.commit(rid, req.stream[: req.insert_len])
        self.manager.free(rid)

    @property
    def evicted_tokens(self) -> int:
        return self.manager.pool.evictions * self.block_size


@dataclass(slots=True)
class _Running:
    node: TreeNode
    reserved: int


class RadixSimCache(SimCache):
    """A :class:`RadixCache` inside a KV pool of ``capacity_tokens`` (SGLang accounting).

    Args:
        capacity_tokens: pool size in tokens.
    """

    kind = "radix"

    def __init__(self, capacity_tokens: int) -> None:
        if capacity_tokens < 1:
            raise ValueError("capacity must be at least one token")
        self.capacity_tokens = capacity_tokens
        self.tree = RadixCache()
        self._reserved = 0
        self._running: dict[int, _Running] = {}

    @staticmethod
    def _key(req: Request, length: int) -> RadixKey:
        return RadixKey(req.stream[:length], req.adapter or None)

    def peek(self, req: Request) -> int:
        return self.tree.peek_prefix(self._key(req, req.prompt_len - 1))

    def start(self, req: Request) -> int | None:
        tree = self.tree
        match = tree.match_prefix(self._key(req, req.prompt_len - 1))
        reserve = req.prompt_len + req.output_tokens - match.num_tokens
        tree.inc_lock_ref(match.last_node)
        free = self.capacity_tokens - tree.total_size() - self._reserved
        if reserve > free:
            tree.evict(reserve - free)
            free = self.capacity_tokens - tree.total_size() - self._reserved
            if reserve > free:
                tree.dec_lock_ref(match.last_node)
                return None
        self._reserved += reserve
        self._running[req.index] = _Running(match.last_node, reserve)
        return match.num_tokens

    def finish(self, req: Request) -> None:
        run = self._running.pop(req.index)
        tree = self.tree
        # Tokens the tree gains come out of the reservation; duplicates are dropped.
        before = tree.total_size()
        tree.insert(self._key(req, req.insert_len))
        grown = tree.total_size() - before
        tree.dec_lock_ref(run.node)
        self._reserved -= run.reserved
        if grown > run.reserved:
            # Only a replayed reply longer than its output_tokens gets here: make room.
            over = tree.total_size() + self._reserved - self.capacity_tokens
            if over > 0:
                tree.evict(over)

    @property
    def evicted_tokens(self) -> int:
        return self.tree.evicted_tokens


def make_cache(kind: str, capacity_tokens: int, *, block_size: int = 16,
               memo: BlockHashMemo | None = None, shape: ModelShape | None = None) -> SimCache:
    """A fresh cache of ``kind`` (``"block"`` or ``"radix"``) holding ``capacity_tokens``.

    Raises:
        ValueError: an unknown kind or a capacity below one block.
    """
    if kind == "block":
        return BlockSimCache(capacity_tokens, block_size, memo, shape)
    if kind == "radix":
        return RadixSimCache(capacity_tokens)
    raise ValueError(f"unknown cache kind {kind!r}; use 'block' or 'radix'")
