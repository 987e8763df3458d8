"""Block hashing for the local prefix cache: a pure, chained, content-addressed hash.

A prompt of ``n`` tokens is cut into ``n // block_size`` *full* blocks (a partial last block
is never hashed, so never shared). Block ``i`` is identified by::

    root      = H(b"promptcache-kv/1" | len+tenant_salt | len+model_id | len+adapter_id | block_size)
    hash[0]   = H(root      | uint32le(tokens[0 : B]))
    hash[i]   = H(hash[i-1] | uint32le(tokens[i*B : (i+1)*B]))

so a block hash names the *whole prefix* up to and including that block, under one tenant,
model, adapter and block size. ``H`` is SHA-256 (default) or BLAKE2b-256 from :mod:`hashlib`;
never Python's ``hash()`` or pickle, which are process-random (vLLM had to seed its root from
``PYTHONHASHSEED`` for that reason: ``vllm/v1/core/kv_cache_utils.py`` ``init_none_hash``).

Deviation from vLLM: the tenant salt (vLLM's ``cache_salt``) seeds the *root* instead of being
an extra key of the first block. Every chain therefore starts from a per-tenant root and the
same tokens under another salt share nothing, which is what the isolation test asserts.

NOTE #1 (speed): a prompt is packed to little-endian uint32 bytes once (one ``array`` call) and
each block is one ``hashlib`` call over ``parent + bytes[a:b]``: no per-token Python work. See
``bench/block_hash.py`` for the measured ns/token.

NOTE #2 (tests): ``hash_fn`` may also be a callable ``bytes -> bytes``; tests inject one that
collides on purpose to exercise the pool's collision guard (stored tokens + parent hash).
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from collections.abc import Callable, Sequence
from functools import partial
from typing import Literal, NewType, Protocol, cast

from promptcache._errors import InvalidRequestError

__all__ = [
    "BlockHash",
    "HashFn",
    "HashFnName",
    "block_hashes",
    "hash_block_tokens",
    "hasher",
    "pack_tokens",
    "resolve_hash_fn",
    "root_hash",
]

BlockHash = NewType("BlockHash", bytes)
"""A block hash: the digest naming a full block and every token before it."""

HashFnName = Literal["sha256", "blake2b"]
HashFn = HashFnName | Callable[[bytes], bytes]
"""A hash function: a name, or a callable ``bytes -> digest bytes`` (tests only)."""

_DOMAIN = b"promptcache-kv/1"
_UINT32_MAX = 2**32 - 1


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _blake2b(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=32).digest()


_NAMED: dict[str, Callable[[bytes], bytes]] = {"sha256": _sha256, "blake2b": _blake2b}


class _HashObject(Protocol):
    def digest(self) -> bytes: ...


class _CustomDigest:
    """Adapts a test callable ``bytes -> bytes`` to the hashlib object interface."""

    __slots__ = ("_digest",)

    def __init__(self, fn: Callable[[bytes], bytes], data: bytes) -> None:
        self._digest = fn(data)

    def digest(self) -> bytes:
        return self._digest


def hasher(hash_fn: HashFn) -> Callable[[bytes], _HashObject]:
    """A hashlib-style constructor: ``hasher(fn)(data).digest()`` is the block digest.

    For the named functions this is the C constructor itself (``hashlib.sha256``, or
    ``blake2b`` with a 32-byte digest through :func:`functools.partial`), so hot loops pay no
    Python frame per block (NOTE #1).

    Raises:
        ValueError: an unknown name.
    """
    if callable(hash_fn):
        fn = hash_fn
        return lambda data: _CustomDigest(fn, data)
    if hash_fn == "sha256":
        return hashlib.sha256
    if hash_fn == "blake2b":
        return partial(hashlib.blake2b, digest_size=32)
    raise ValueError(f"unknown hash_fn {hash_fn!r}; expected 'sha256' or 'blake2b'")


def resolve_hash_fn(hash_fn: HashFn) -> Callable[[bytes], bytes]:
    """Return the digest function for a name (``"sha256"``/``"blake2b"``) or a callable.

    Raises:
        ValueError: an unknown name.
    """
    if callable(hash_fn):
        return hash_fn
    try:
        return _NAMED[hash_fn]
    except KeyError:
        raise ValueError(f"unknown hash_fn {hash_fn!r}; expected 'sha256' or 'blake2b'") from None


def pack_tokens(tokens: Sequence[int]) -> bytes:
    """Pack token ids as little-endian uint32 bytes (4 bytes per token).

    Raises:
        InvalidRequestError: a token id is negative or does not fit in 32 bits.
    """
    try:
        packed = array("I", tokens)
    except (OverflowError, TypeError) as exc:
        bad = next(
            (
                i
                for i, t in enumerate(tokens)
                if not isinstance(t, int) or not 0 <= t <= _UINT32_MAX
            ),
            0,
        )
        raise InvalidRequestError(
            f"tokens[{bad}]", f"token ids must be integers in [0, 2**32): {exc}"
        ) from None
    if sys.byteorder != "little":  # pragma: no cover - every supported platform is little-endian
        packed.byteswap()
    return packed.tobytes()


def _field(value: bytes) -> bytes:
    return len(value).to_bytes(4, "little") + value


def root_hash(
    *,
    tenant_salt: bytes | str = b"",
    model_id: str,
    adapter_id: str = "",
    block_size: int,
    hash_fn: HashFn = "sha256",
) -> BlockHash:
    """The root of every block-hash chain for one tenant, model, adapter and block size.

    Each field is length-prefixed, so ``("ab", "c")`` and ``("a", "bc")`` differ.

    Args:
        tenant_salt: per-tenant secret (bytes, or str encoded as UTF-8); ``b""`` = shared.
        model_id: the model the KV was computed by.
        adapter_id: LoRA/adapter id (``""`` for none).
        block_size: tokens per block (the same tokens at another block size share nothing).
        hash_fn: ``"sha256"``, ``"blake2b"`` or a test callable.

    Raises:
        ValueError: ``block_size < 1`` or an unknown ``hash_fn``.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    salt = tenant_salt.encode("utf-8") if isinstance(tenant_salt, str) else bytes(tenant_salt)
    data = (
        _DOMAIN
        + _field(salt)
        + _field(model_id.encode("utf-8"))
        + _field(adapter_id.encode("utf-8"))
        + block_size.to_bytes(4, "little")
    )
    return BlockHash(resolve_hash_fn(hash_fn)(data))


def hash_block_tokens(
    parent: BlockHash, tokens: Sequence[int], hash_fn: HashFn = "sha256"
) -> BlockHash:
    """Hash one block: ``H(parent | uint32le(tokens))``.

    Args:
        parent: the previous block's hash, or the chain's :func:`root_hash`.
        tokens: the block's token ids (normally exactly ``block_size`` of them).

    Raises:
        InvalidRequestError: a token id outside uint32.
    """
    return BlockHash(resolve_hash_fn(hash_fn)(parent + pack_tokens(tokens)))


def block_hashes(
    tokens: Sequence[int],
    *,
    root: BlockHash,
    block_size: int,
    hash_fn: HashFn = "sha256",
    start: int = 0,
    parent: BlockHash | None = None,
) -> list[BlockHash]:
    """Chained hashes of the full blocks of ``tokens`` (a partial last block is skipped).

    Args:
        tokens: the token ids of the whole sequence.
        root: the chain's root (:func:`root_hash`).
        block_size: tokens per block.
        start: first block index to hash (``parent`` must then be the hash of block
            ``start - 1``); lets a caller extend a chain without rehashing it.
        parent: the hash before block ``start`` (defaults to ``root``; required if ``start > 0``).

    Returns:
        ``len(tokens) // block_size - start`` hashes, block ``start`` first.

    Raises:
        InvalidRequestError: a token id outside uint32.
        ValueError: ``start > 0`` without ``parent``.
    """
    if start > 0 and parent is None:
        raise ValueError("block_hashes(start > 0) needs the parent hash of block start - 1")
    new = hasher(hash_fn)
    n_full = len(tokens) // block_size
    if n_full <= start:
        return []
    packed = pack_tokens(tokens[start * block_size : n_full * block_size])
    step = 4 * block_size
    prev: bytes = root if parent is None else parent
    out: list[bytes] = []
    append = out.append
    for off in range(0, len(packed), step):
        prev = new(prev + packed[off : off + step]).digest()
        append(prev)
    return cast(list[BlockHash], out)  # NewType: no per-block wrapper call
