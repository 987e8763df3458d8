"""Local reference backend: a real model behind a paged block-hash KV prefix cache.

Import-light on purpose: importing ``promptcache.local`` (or its ``hashing``/``blocks``
modules) does not import torch, so ``promptcache.sim`` can run the block cache without a model.
The torch parts (:mod:`promptcache.local.model`, :mod:`promptcache.local.kv`,
:mod:`promptcache.local.engine`) are imported lazily through attribute access::

    from promptcache.local import Engine, ModelRunner   # imports torch here, on first use
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from promptcache.local.blocks import (
    Allocation,
    BlockPool,
    CacheStats,
    FreeBlockQueue,
    KVBlock,
    KVCacheManager,
    MatchResult,
    PrefixCache,
    kv_bytes_per_token,
)
from promptcache.local.hashing import BlockHash, block_hashes, hash_block_tokens, root_hash

if TYPE_CHECKING:
    from promptcache.local.engine import Engine, GenerationResult
    from promptcache.local.model import ModelRunner

__all__ = [
    "Allocation",
    "BlockHash",
    "BlockPool",
    "CacheStats",
    "Engine",
    "FreeBlockQueue",
    "GenerationResult",
    "KVBlock",
    "KVCacheManager",
    "MatchResult",
    "ModelRunner",
    "PrefixCache",
    "block_hashes",
    "hash_block_tokens",
    "kv_bytes_per_token",
    "root_hash",
]

_LAZY = {
    "Engine": "promptcache.local.engine",
    "GenerationResult": "promptcache.local.engine",
    "ModelRunner": "promptcache.local.model",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'promptcache.local' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
