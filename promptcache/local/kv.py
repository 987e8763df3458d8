"""Paged KV storage for the block cache, and the side table of kept partial tails.

:class:`KVStorage` preallocates two tensors (K and V), each::

    [layers, kv_heads, num_blocks, block_size, head_dim]      (block_id indexes dim 2)

so the K/V of a run of blocks is one ``index_select`` on dim 2 followed by a reshape to the
``[1, kv_heads, n_blocks * block_size, head_dim]`` layout a ``DynamicCache`` layer holds. The
bookkeeping (which block ids hold which tokens) lives in :mod:`promptcache.local.blocks`; this
module only moves tensors.

:class:`TailStore` keeps the K/V of *partial* last blocks at chosen prompt lengths (Anthropic
breakpoint ends, ``keep_tail_at``), keyed by ``(hash of the last full block, tail tokens)``.
Full blocks stay the unit of sharing; a tail only extends a full-block match by ``1..B-1``
tokens. It is LRU-bounded by a token budget (counted in the engine's pool bytes).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import torch

from promptcache.local.hashing import BlockHash

__all__ = ["KVPairs", "KVStorage", "TailStore"]

KVPairs = list[tuple[torch.Tensor, torch.Tensor]]


class KVStorage:
    """Preallocated K/V tensors for ``num_blocks`` blocks of ``block_size`` tokens.

    Args:
        num_blocks, block_size: pool geometry (matches the :class:`~promptcache.local.blocks.
            BlockPool`).
        layers, kv_heads, head_dim: model shape.
        dtype, device: tensor type and placement (the model's).
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        *,
        layers: int,
        kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.layers = layers
        self.kv_heads = kv_heads
        self.head_dim = head_dim
        size = (layers, kv_heads, num_blocks, block_size, head_dim)
        self.k = torch.zeros(size, dtype=dtype, device=device)
        self.v = torch.zeros(size, dtype=dtype, device=device)

    @property
    def nbytes(self) -> int:
        """Bytes held by the K and V tensors."""
        return int(self.k.element_size() * self.k.numel() * 2)

    def write(self, block_ids: Sequence[int], first_token: Sequence[int], kv: KVPairs) -> None:
        """Copy K/V of whole blocks from a cache into storage.

        Args:
            block_ids: destination blocks.
            first_token: for each block, the position in ``kv`` of its first token (a multiple
                of ``block_size`` in practice).
            kv: per-layer ``(K, V)``, each ``[1, kv_heads, seq, head_dim]`` with
                ``seq >= first_token[i] + block_size``.
        """
        if not block_ids:
            return
        bs = self.block_size
        dst = torch.tensor(list(block_ids), dtype=torch.long, device=self.k.device)
        contiguous = all(
            first_token[i + 1] == first_token[i] + bs for i in range(len(first_token) - 1)
        )
        n = len(block_ids)
        for layer, (k, v) in enumerate(kv):
            if contiguous:
                a = first_token[0]
                ks = k[0, :, a : a + n * bs].reshape(self.kv_heads, n, bs, self.head_dim)
                vs = v[0, :, a : a + n * bs].reshape(self.kv_heads, n, bs, self.head_dim)
            else:
                ks = torch.stack([k[0, :, a : a + bs] for a in first_token], dim=1)
                vs = torch.stack([v[0, :, a : a + bs] for a in first_token], dim=1)
            self.k[layer].index_copy_(1, dst, ks.to(self.k.dtype))
            self.v[layer].index_copy_(1, dst, vs.to(self.v.dtype))

    def gather(self, block_ids: Sequence[int]) -> KVPairs:
        """Per-layer ``(K, V)`` of ``block_ids`` in order, each ``[1, kv_heads, n*B, head_dim]``
        (fresh tensors, safe to grow)."""
        n = len(block_ids)
        idx = torch.tensor(list(block_ids), dtype=torch.long, device=self.k.device)
        shape = (self.layers, self.kv_heads, n * self.block_size, self.head_dim)
        ks = self.k.index_select(2, idx).reshape(shape)
        vs = self.v.index_select(2, idx).reshape(shape)
        return [(ks[i].unsqueeze(0), vs[i].unsqueeze(0)) for i in range(self.layers)]


class TailStore:
    """LRU side table of partial-block K/V: ``(parent block hash, tail tokens) -> (K, V)``.

    Args:
        capacity_tokens: total tail tokens kept (``0`` disables the table).

    Counters: ``hits`` (tails reused), ``stored``, ``evicted``.
    """

    def __init__(self, capacity_tokens: int) -> None:
        self.capacity_tokens = capacity_tokens
        self._entries: OrderedDict[tuple[BlockHash, tuple[int, ...]], KVPairs] = OrderedDict()
        self._by_parent: dict[BlockHash, set[tuple[int, ...]]] = {}
        self.tokens_used = 0
        self.hits = 0
        self.stored = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, parent: BlockHash, tail: Sequence[int], kv: KVPairs) -> None:
        """Keep the K/V (``[1, H, len(tail), D]`` per layer) of ``tail`` after ``parent``."""
        key = (parent, tuple(tail))
        if not tail or len(tail) > self.capacity_tokens:
            return
        if key in self._entries:
            self._entries.move_to_end(key)
            return
        while self.tokens_used + len(tail) > self.capacity_tokens:
            self._evict_oldest()
        self._entries[key] = [(k.clone(), v.clone()) for k, v in kv]
        self._by_parent.setdefault(parent, set()).add(key[1])
        self.tokens_used += len(tail)
        self.stored += 1

    def _evict_oldest(self) -> None:
        (parent, tail), _ = self._entries.popitem(last=False)
        tails = self._by_parent[parent]
        tails.discard(tail)
        if not tails:
            del self._by_parent[parent]
        self.tokens_used -= len(tail)
        self.evicted += 1

    def longest(self, parent: BlockHash, following: Sequence[int], limit: int) -> int:
        """Length of the longest kept tail after ``parent`` that ``following`` starts with,
        at most ``limit`` tokens (``0`` if none). Does not count a hit."""
        best = 0
        for tail in self._by_parent.get(parent, ()):
            n = len(tail)
            if best < n <= limit and tuple(following[:n]) == tail:
                best = n
        return best

    def take(self, parent: BlockHash, tail: Sequence[int]) -> KVPairs:
        """The K/V of a tail found by :meth:`longest` (marks it recently used, counts a hit).

        Raises:
            KeyError: no such tail.
        """
        key = (parent, tuple(tail))
        kv = self._entries[key]
        self._entries.move_to_end(key)
        self.hits += 1
        return kv
