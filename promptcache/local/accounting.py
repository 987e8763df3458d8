"""Usage accounting of the local backend: the hosted APIs' cache semantics on a real block cache.

The block cache (:mod:`promptcache.local.engine`) decides what is physically reused; this module
decides what the emulated API *reports*, with the hosted APIs' rules, and never reports a cache
read that the block cache did not physically provide.

Anthropic (../shared/reference/hosted-api-rules.md 1.1-1.8; sources
https://platform.claude.com/docs/en/build-with-claude/prompt-caching and
https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/prompt-caching.md):

* Entries are written **only at breakpoints** (explicit ``cache_control`` and the top-level
  automatic one), keyed by a chained SHA-256 over (tenant salt, token ids up to the breakpoint).
* For each breakpoint the server looks back through at most ``policy.lookback_positions`` (20)
  lookback positions (a run of ``tool_use`` / ``tool_result`` blocks is one position,
  :attr:`Segment.position`) for the longest entry an earlier request wrote: a breakpoint at
  position Q finds an entry ending at position P iff ``Q - P <= 20``.
* A breakpoint whose prefix is shorter than ``policy.min_cacheable_tokens`` writes nothing.
* TTL ``5m`` / ``1h`` from the **start** of the writing request, refreshed (from the start of the
  reading request) on every read; time comes from an injectable :class:`Clock`.
* Availability (hosted-api-rules.md 1.9 and 4 item 7, case BR-21): "a cache entry becomes available
  only after the first response **begins**"; parallel cold requests sent before that "pay N
  writes". An entry records when its writer's response began (:attr:`CacheEntry.available_at`,
  an :class:`Instant` of the backend's :class:`Timeline`), a request its arrival, and a request
  that arrived before the entry became available does not see it: it writes the prefix itself
  (:func:`plan_reads_and_writes` ``arrived=``). The block cache may still reuse the KV
  physically (that is only speed); the *reported* usage follows the hosted rule.
* At most ``policy.max_breakpoints`` (4) breakpoints, automatic included; a ``1h`` breakpoint
  after a ``5m`` one, or an explicit marker on the automatic target with another TTL: HTTP 400.
* ``input_tokens`` excludes reads and writes; ``cache_creation`` splits writes by TTL (the
  tokens between two written breakpoints take the TTL of the later one).
* Token counts are the local model's tokens for every model: the catalog's ``token_ratio``
  (1.3 on Claude 4.7+, hosted-api-rules.md 1.10) is not applied, so minimums are checked
  against local counts (see :mod:`promptcache.local.api_anthropic` for why and the effect).

OpenAI (hosted-api-rules.md 2.1-2.4; https://developers.openai.com/api/docs/guides/prompt-caching):

* Before GPT-5.6: automatic; ``cached_tokens = 1024 + 128 * floor((M - 1024) / 128)`` of the
  engine's physically reused prefix M (0 below 1,024 tokens), no writes reported.
* GPT-5.6+ (``policy.explicit_breakpoints``): entries at breakpoints (one implicit breakpoint on
  the newest message plus the latest 3 explicit ones; in ``mode: "explicit"`` only the latest 4
  explicit ones), no lookback limit, TTL 30m; ``cache_write_tokens`` reports the tokens written.
  Reads look at the **latest** ``policy.read_breakpoint_window`` (80) breakpoints of the
  request (explicit markers, read-only ones included, plus the implicit one): an entry that
  ends before the oldest of them is not read (hosted-api-rules.md 2.3 [O3]; the Azure doc
  says 50 [O4], a CONFLICT the catalog records, choosing OpenAI's own SDK).
* ``prompt_tokens`` includes ``cached_tokens`` (and ``cache_write_tokens``).

OpenAI's guide documents routing (a hash of the prompt's start plus ``prompt_cache_key``, spill
past ~15 requests/min per prefix and key) but no availability rule for concurrent requests
(hosted-api-rules.md 2.1), so the OpenAI routes pass no arrival and every committed entry is
readable at once.

OpenAI automatic caching (before GPT-5.6) has no TTL but an idle lifetime (hosted-api-rules.md
2.1-2.2; catalog ``idle_lifetime``, :meth:`promptcache.catalog.CachePolicy.idle_bounds`):
in-memory entries are "usually cleared after 5-10 min of inactivity", "always removed within
1 h of last use"; ``prompt_cache_retention: "24h"`` keeps them up to 24 h. Every request records
its prefixes on the 128-token grid (:func:`automatic_prefix_keys`) in a ledger with that
lifetime, restarted by each use; a read is reported only up to the longest prefix still live
there (:func:`automatic_live_prefix`), so a prefix idle for longer than its lifetime is not
read even while the block cache still holds its KV. The lifetime is the certain bound (1 h in
memory, 24 h with ``"24h"``); with no retention sent on a model that accepts both (a CONFLICT
in the sources: openai-python says non-ZDR organisations default to ``24h``), 24 h.
``ServerOptions.openai_in_memory_idle_s`` sets a shorter in-memory lifetime (e.g. 300, the
usual clearing) to test early eviction. The ledger forgets expired entries in its sweep, and
follows the block cache for the rest: after each request the prefixes whose KV the cache holds
are anchored to the block holding their last token (:func:`anchor_automatic_prefixes`), and
the cache's eviction of that block forgets them (:meth:`CacheLedger.forget_block`, a
:meth:`~promptcache.local.blocks.BlockPool.add_eviction_listener`); only unanchored prefixes
(KV never cached, e.g. past a full pool) are bounded by count (``CacheLedger(max_entries=...)``,
:func:`promptcache.local.app.idle_ledger_capacity`), least recently used first. A count bound
alone dropped prefixes whose KV was still cached when many prefixes shared their KV (prompts
diverging within the last 128 tokens), so a read the cache served was reported as a miss.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from promptcache._errors import UnknownModelError
from promptcache.catalog import cache_grid_tokens, get_policy
from promptcache.local.errors import BackendAPIError
from promptcache.local.template import TemplatedPrompt

__all__ = [
    "AnthropicUsageCounts",
    "CacheEntry",
    "CacheLedger",
    "CachePlan",
    "Clock",
    "Instant",
    "ManualClock",
    "PlannedBreakpoint",
    "PolicyLike",
    "SystemClock",
    "Timeline",
    "anchor_automatic_prefixes",
    "anthropic_breakpoints",
    "automatic_live_prefix",
    "automatic_prefix_keys",
    "block_floor_reuse",
    "boundary_keys",
    "classify_block_reuse",
    "openai_automatic_cached_tokens",
    "openai_breakpoints",
    "plan_reads_and_writes",
    "read_window_start",
    "ttl_seconds",
]


# ------------------------------------------------------------------------------------ clock
class Clock(Protocol):
    """Source of time for TTLs (seconds, monotonic)."""

    def now(self) -> float:
        """Current time in seconds."""
        ...


class SystemClock:
    """Wall clock (``time.monotonic``)."""

    def now(self) -> float:
        """Current monotonic time in seconds."""
        return time.monotonic()


class ManualClock:
    """A clock that only moves when told to (tests, simulations).

    Args:
        start: initial time in seconds.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        """Current time in seconds."""
        return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (>= 0) and return the new time.

        Raises:
            ValueError: ``seconds`` is negative.
        """
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        with self._lock:
            self._now += seconds
            return self._now


@dataclass(frozen=True, slots=True, order=True)
class Instant:
    """A point on the backend's timeline (:class:`Timeline`).

    Ordered by ``time`` and then by ``seq``, a number that grows with every stamp: it orders
    events the clock cannot tell apart (a :class:`ManualClock` that does not move, or equal
    readings of a coarse clock).

    Attributes:
        time: clock seconds when it was stamped.
        seq: its sequence number (strictly increasing per :class:`Timeline`).
    """

    time: float
    seq: int


class Timeline:
    """Stamps events (request arrivals, response starts) with :class:`Instant` values.

    Stamps are taken under a lock, so their ``seq`` order is the order the events happened in
    and their times never go down along it (for a monotonic clock).

    Args:
        clock: the time source.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._seq = 0
        self._lock = threading.Lock()

    def stamp(self) -> Instant:
        """A new instant, later than every earlier stamp of this timeline."""
        with self._lock:
            self._seq += 1
            return Instant(self.clock.now(), self._seq)

    @property
    def stamps_issued(self) -> int:
        """How many stamps were taken so far."""
        with self._lock:
            return self._seq


_TTL_RE = re.compile(r"^(\d+)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def ttl_seconds(ttl: str) -> float:
    """``"5m"`` -> 300.0, ``"1h"`` -> 3600.0, ``"30m"`` -> 1800.0.

    Raises:
        ValueError: not ``<int><s|m|h|d>``.
    """
    match = _TTL_RE.match(ttl)
    if match is None:
        raise ValueError(f"bad TTL {ttl!r}")
    return float(int(match.group(1)) * _UNIT_S[match.group(2)])


# ------------------------------------------------------------------------------------ policy
class PolicyLike(Protocol):
    """The fields of :class:`promptcache.catalog.CachePolicy` the accounting reads."""

    @property
    def provider(self) -> str: ...
    @property
    def min_cacheable_tokens(self) -> int: ...
    @property
    def max_breakpoints(self) -> int: ...
    @property
    def lookback_positions(self) -> int | None: ...
    @property
    def cache_step_tokens(self) -> int | None: ...
    @property
    def explicit_breakpoints(self) -> bool: ...


# ------------------------------------------------------------------------------------ ledger
@dataclass(slots=True)
class CacheEntry:
    """One cache entry written at a breakpoint.

    Attributes:
        key: chained SHA-256 of (tenant salt, token ids of the prefix).
        tokens: prefix length in tokens.
        ttl: ``"5m"``, ``"1h"`` or ``"30m"``.
        written_at: start time of the request that wrote it (seconds).
        expires_at: when it stops being readable (seconds).
        available_at: when the response of its first writer began; only requests that arrived
            after it may read the entry ("a cache entry becomes available only after the first
            response begins", hosted-api-rules.md 1.9). None: readable by every request.
    """

    key: bytes
    tokens: int
    ttl: str
    written_at: float
    expires_at: float
    available_at: Instant | None = None

    def available_to(self, arrived: Instant | None) -> bool:
        """Whether a request that arrived at ``arrived`` may read this entry: its writer's
        response began strictly before (``arrived=None``: a request after everything)."""
        return arrived is None or self.available_at is None or self.available_at < arrived


class CacheLedger:
    """The set of entries written at breakpoints (thread-safe). Expired entries vanish on read
    and in a sweep on write (at most once a minute of ledger clock); ``len()`` counts the live
    ones.

    Args:
        max_entries: at most this many *unanchored* entries are kept (None: no bound beyond
            the sweep); past it the least recently written or refreshed unanchored entry is
            dropped. An entry anchored to a block of the block cache (:meth:`anchor`) is never
            dropped by this bound: it stays until it expires or until the block cache evicts
            that block (:meth:`forget_block`, an eviction listener of
            :class:`~promptcache.local.blocks.BlockPool`), so the ledger and the KV cache
            forget a prefix at the same moment. Anchored entries are bounded by the pool (one
            block hash anchors the entries whose prefix ends in that block); the bound holds
            the rest (prefixes whose KV was never cached, or whose anchoring has not happened
            yet). :class:`~promptcache.local.app.BackendService` bounds its OpenAI idle
            ledger so (:func:`automatic_live_prefix`, :func:`anchor_automatic_prefixes`).

    Raises:
        ValueError: ``max_entries`` < 1.

    An entry is visible to a request only once it is available at the request's arrival
    (:meth:`CacheEntry.available_to`); to an earlier request it is absent, so that request writes
    the prefix again (:meth:`put`), as N parallel cold requests pay N writes on the hosted API.
    """

    #: seconds of ledger clock between sweeps of expired entries (each sweep is one pass)
    SWEEP_EVERY = 60.0

    def __init__(self, max_entries: int | None = None) -> None:
        if max_entries is not None and max_entries < 1:
            raise ValueError(f"max_entries must be >= 1 or None, got {max_entries}")
        self.max_entries = max_entries
        self._entries: dict[bytes, CacheEntry] = {}
        #: unanchored keys, least recently written or refreshed first (only with max_entries)
        self._lru: dict[bytes, None] = {}
        self._anchor_of: dict[bytes, bytes] = {}  # key -> block hash
        self._keys_at: dict[bytes, set[bytes]] = {}  # block hash -> keys anchored to it
        self._lock = threading.Lock()
        self._now = float("-inf")  # the latest clock time an operation gave
        self._next_sweep = float("-inf")

    def _remove(self, key: bytes) -> None:
        """Forget ``key`` everywhere (lock held)."""
        self._entries.pop(key, None)
        self._lru.pop(key, None)
        block = self._anchor_of.get(key)
        if block is not None:
            self._remove_anchor(key, block)

    def _touch(self, key: bytes) -> None:
        """Make an unanchored ``key`` the most recent (lock held; only with a bound)."""
        if self.max_entries is not None and key not in self._anchor_of:
            self._lru.pop(key, None)
            self._lru[key] = None

    def _sweep(self, now: float) -> None:
        """Forget every entry expired at ``now`` (lock held), at most once per
        :attr:`SWEEP_EVERY`: without it, each distinct prefix ever written stayed in memory
        for the life of the server and the entries gauge counted dead ones (review 14)."""
        self._now = max(self._now, now)
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.SWEEP_EVERY
        dead = [k for k, e in self._entries.items() if e.expires_at <= now]
        for k in dead:
            self._remove(k)

    def get(
        self, key: bytes, now: float, *, arrived: Instant | None = None
    ) -> CacheEntry | None:
        """The live entry for ``key`` at time ``now``, or None (an expired one is removed).

        ``arrived``: the arrival of the request asking; an entry that was not yet available
        then (its writer's response began later) is reported as None and left in place.
        """
        with self._lock:
            self._now = max(self._now, now)
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry.expires_at <= now:
                self._remove(key)
                return None
            return entry if entry.available_to(arrived) else None

    def put(
        self,
        key: bytes,
        tokens: int,
        ttl: str,
        now: float,
        *,
        available_at: Instant | None = None,
    ) -> CacheEntry:
        """Write (or extend) the entry for ``key``; lifetime ``ttl`` from ``now``.

        ``available_at``: when the writer's response began (None: available to every request).
        Writing a live entry again (a request that arrived before the entry was available
        writes it too) keeps the later of the two expiries, with that write's TTL, and the
        earlier of the two availabilities: requests that could read the first write still can.
        A new key past ``max_entries`` drops the least recent unanchored entry; an anchored
        key stays anchored.
        """
        with self._lock:
            self._sweep(now)
            expires = now + ttl_seconds(ttl)
            old = self._entries.get(key)
            if old is None and self.max_entries is not None and key not in self._anchor_of:
                while self._lru and len(self._lru) >= self.max_entries:
                    self._remove(next(iter(self._lru)))  # the least recent first
            self._touch(key)
            if old is not None and old.expires_at > now:
                if old.available_at is None or (
                    available_at is not None and available_at > old.available_at
                ):
                    available_at = old.available_at
                if old.expires_at > expires:
                    old.available_at = available_at
                    return old
            entry = CacheEntry(key, tokens, ttl, now, expires, available_at)
            self._entries[key] = entry
            return entry

    def refresh(self, key: bytes, now: float) -> None:
        """Restart the lifetime of ``key`` at ``now`` (a read); no-op if absent."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry.expires_at = max(entry.expires_at, now + ttl_seconds(entry.ttl))
                self._touch(key)  # a use: now the most recent

    def drop(self, key: bytes) -> None:
        """Forget ``key`` (its KV is physically gone from the block cache)."""
        with self._lock:
            self._remove(key)

    def anchor(self, key: bytes, block_hash: bytes) -> bool:
        """Tie the entry for ``key`` to the block-cache block holding the end of its prefix
        (``block_hash``: :attr:`~promptcache.local.blocks.KVBlock.block_hash`), which the
        caller saw cached: from now on ``max_entries`` does not drop it, and
        :meth:`forget_block` of that hash does. Re-anchoring moves it. Returns False (nothing
        done) when the ledger has no entry for ``key``."""
        with self._lock:
            if key not in self._entries:
                return False
            old = self._anchor_of.get(key)
            if old == block_hash:
                return True
            if old is not None:
                self._remove_anchor(key, old)
            self._lru.pop(key, None)
            self._anchor_of[key] = block_hash
            self._keys_at.setdefault(block_hash, set()).add(key)
            return True

    def _remove_anchor(self, key: bytes, block_hash: bytes) -> None:
        """Untie ``key`` from ``block_hash`` (lock held; the entry stays)."""
        keys = self._keys_at.get(block_hash)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._keys_at[block_hash]
        del self._anchor_of[key]

    def forget_block(self, block_hash: bytes) -> None:
        """The block cache evicted ``block_hash``: forget the entries anchored to it (their
        prefix's KV is gone). An eviction listener
        (:meth:`promptcache.local.blocks.BlockPool.add_eviction_listener`); never raises."""
        with self._lock:
            keys = self._keys_at.pop(block_hash, None)
            if not keys:
                return
            for key in keys:
                self._anchor_of.pop(key, None)
                self._entries.pop(key, None)

    @property
    def anchored(self) -> int:
        """How many entries are anchored to a cached block now (expired ones not yet swept
        included)."""
        with self._lock:
            return len(self._anchor_of)

    def __len__(self) -> int:
        """Live entries at the latest clock time the ledger was given."""
        with self._lock:
            return sum(1 for e in self._entries.values() if e.expires_at > self._now)


def boundary_keys(prompt: TemplatedPrompt, tenant_salt: bytes) -> list[bytes]:
    """Chained SHA-256 per span: ``keys[i]`` identifies ``token_ids[:spans[i].end]`` under
    ``tenant_salt`` (tokens packed as little-endian uint32)."""
    h = hashlib.sha256(b"promptcache-local-ledger\x00" + tenant_salt)
    keys: list[bytes] = []
    ids = prompt.token_ids
    for span in prompt.spans:
        h = h.copy()
        h.update(b"".join(t.to_bytes(4, "little") for t in ids[span.start : span.end]))
        keys.append(h.digest())
    return keys


def automatic_prefix_keys(
    token_ids: Sequence[int], tenant_salt: bytes, *, min_tokens: int, step_tokens: int | None
) -> tuple[tuple[int, bytes], ...]:
    """OpenAI automatic caching (before GPT-5.6): ``(end, key)`` for every prefix a read can
    report, ``min_tokens + n * step_tokens`` tokens long (1,024 + 128n), shortest first; the
    key is a chained SHA-256 of (tenant salt, token ids up to ``end``). Empty below the
    minimum."""
    n = len(token_ids)
    if n < min_tokens or min_tokens < 1:
        return ()
    step = step_tokens or 1
    h = hashlib.sha256(b"promptcache-local-idle\x00" + tenant_salt)
    out: list[tuple[int, bytes]] = []
    prev = 0
    for end in range(min_tokens, n + 1, step):
        h.update(array("I", token_ids[prev:end]).tobytes())
        out.append((end, h.copy().digest()))
        prev = end
    return tuple(out)


def automatic_live_prefix(
    ledger: CacheLedger, keys: Sequence[tuple[int, bytes]], now: float, lifetime_s: float
) -> int:
    """The longest prefix of ``keys`` (:func:`automatic_prefix_keys`) that an earlier request
    used less than its idle lifetime ago (0: none), then record this request's use of every
    prefix: each lives ``lifetime_s`` seconds from ``now`` (a use restarts it; a longer
    lifetime an earlier request gave is kept).

    Memory: expired entries go in the ledger's sweep; a ledger with ``max_entries`` drops the
    least recently used unanchored ones past that bound (anchored ones, whose KV the block
    cache holds, go when it evicts them: :func:`anchor_automatic_prefixes`). The uses are
    recorded longest prefix first, so a request's shorter prefixes are the more recent: a
    bound drops the long tails first and keeps the readable start, as the block cache evicts
    tail blocks first."""
    live = 0
    for end, key in keys:
        if ledger.get(key, now) is None:
            break
        live = end
    ttl = f"{max(1, round(lifetime_s))}s"
    for end, key in reversed(keys):
        ledger.put(key, end, ttl, now)
    return live


def anchor_automatic_prefixes(
    ledger: CacheLedger,
    keys: Sequence[tuple[int, bytes]],
    block_hashes: Sequence[bytes],
    block_size: int,
) -> int:
    """Anchor each prefix of ``keys`` (:func:`automatic_prefix_keys`) whose KV the block cache
    holds to the block holding its last token (:meth:`CacheLedger.anchor`), so that the
    ledger's bound never drops a prefix the cache can still serve and the cache's eviction of
    that block forgets it (:meth:`CacheLedger.forget_block`).

    Args:
        ledger: the idle ledger the keys were recorded in (:func:`automatic_live_prefix`).
        keys: ``(end, key)`` pairs, shortest first (``end`` in tokens).
        block_hashes: the hashes of the prompt's leading cached full blocks, block 0 first
            (:meth:`promptcache.local.blocks.KVCacheManager.cached_prefix_hashes`), taken
            after the request's prefill committed its blocks.
        block_size: tokens per block (>= 1).

    Returns:
        how many entries were anchored (a prefix ending past the cached blocks is not: its KV
        is not all cached, so the ledger's bound may drop it).

    Raises:
        ValueError: ``block_size`` < 1.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    done = 0
    for end, key in keys:
        index = (end - 1) // block_size
        if index >= len(block_hashes):
            break
        done += ledger.anchor(key, block_hashes[index])
    return done


# ------------------------------------------------------------------------------------ breakpoints
@dataclass(frozen=True, slots=True)
class PlannedBreakpoint:
    """A breakpoint of a request.

    Attributes:
        span_index: index into ``prompt.spans``.
        end: prefix length in tokens (``spans[span_index].end``).
        ttl: its TTL (``"5m"``, ``"1h"``, ``"30m"``).
        path: the block it sits on (``"messages[2].content[0]"``).
    """

    span_index: int
    end: int
    ttl: str
    path: str


def _dotted(path: str) -> str:
    """``messages[2].content[0]`` -> ``messages.2.content.0`` (the API's error paths)."""
    return re.sub(r"\[(\d+)\]", r".\1", path)


def anthropic_breakpoints(prompt: TemplatedPrompt, policy: PolicyLike) -> list[PlannedBreakpoint]:
    """The request's breakpoints (explicit plus automatic), validated as the API does.

    Raises:
        BackendAPIError: 400 ``invalid_request_error`` when there are more than
            ``policy.max_breakpoints``, when a ``1h`` breakpoint follows a ``5m`` one in render
            order, or when the automatic breakpoint's TTL differs from an explicit marker on the
            same (last cacheable) block. Messages follow the API's wording.
    """
    view = prompt.view
    auto = view.automatic
    if auto is not None and view.automatic_index is not None:
        target = view.segments[view.automatic_index]
        if target.breakpoint is not None and (target.breakpoint.ttl or "5m") != (auto.ttl or "5m"):
            raise BackendAPIError(
                400,
                "invalid_request_error",
                f"cache_control: the top-level cache_control ttl='{auto.ttl or '5m'}' differs "
                f"from ttl='{target.breakpoint.ttl or '5m'}' on the last cacheable block "
                f"{_dotted(target.path)}; use the same TTL or remove one of them.",
            )
    segments = view.breakpoints()
    if len(segments) > policy.max_breakpoints:
        raise BackendAPIError(
            400,
            "invalid_request_error",
            f"A maximum of {policy.max_breakpoints} blocks with cache_control may be provided. "
            f"Found {len(segments)}.",
        )
    out: list[PlannedBreakpoint] = []
    seen_5m = False
    for seg in segments:
        bp = view.breakpoint_of(seg)
        ttl = (bp.ttl if bp is not None else None) or "5m"
        if ttl == "5m":
            seen_5m = True
        elif seen_5m and ttl == "1h":
            where = (
                "cache_control"
                if bp is not None and bp.source == "automatic"
                else (f"{_dotted(seg.path)}.cache_control")
            )
            raise BackendAPIError(
                400,
                "invalid_request_error",
                f"{where}.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
                "cache_control block. Note that blocks are processed in the following order: "
                "`tools`, `system`, `messages`.",
            )
        span = prompt.span_of(seg.index)
        out.append(PlannedBreakpoint(seg.index, span.end, ttl, seg.path))
    return out


def openai_breakpoints(
    prompt: TemplatedPrompt, params: Mapping[str, Any]
) -> list[PlannedBreakpoint]:
    """GPT-5.6+ breakpoints that write: the implicit one on the newest message plus the latest 3
    explicit ones (``prompt_cache_options.mode`` ``"implicit"``, the default), or the latest 4
    explicit ones (``"explicit"``; none -> no caching). Each writes with its own
    ``prompt_cache_breakpoint.ttl`` where it has one, else the request's
    ``prompt_cache_options.ttl`` (default ``"30m"``). Source: hosted-api-rules.md 2.3."""
    opts = params.get("prompt_cache_options")
    mode = opts.get("mode", "implicit") if isinstance(opts, Mapping) else "implicit"
    ttl = opts.get("ttl", "30m") if isinstance(opts, Mapping) else "30m"
    ttl = ttl if isinstance(ttl, str) and _TTL_RE.match(ttl) else "30m"
    explicit = [
        i
        for i, span in enumerate(prompt.spans)
        if span.segment.breakpoint is not None
        and span.segment.breakpoint.source == "openai-explicit"
    ]
    chosen: list[int]
    if mode == "explicit":
        chosen = explicit[-4:]
    else:
        chosen = explicit[-3:]
        last_message = [i for i, span in enumerate(prompt.spans) if span.segment.tier == "messages"]
        implicit = last_message[-1] if last_message else len(prompt.spans) - 1
        if implicit >= 0 and implicit not in chosen:
            chosen.append(implicit)

    def ttl_of(i: int) -> str:
        # an explicit breakpoint's own ttl (openai-python 3.57.0 PromptCacheBreakpoint.ttl),
        # which the renderer resolves to the request's ttl when the marker has none
        bp = prompt.spans[i].segment.breakpoint
        own = bp.ttl if bp is not None and bp.source == "openai-explicit" else None
        return own if isinstance(own, str) and _TTL_RE.match(own) else ttl

    return [
        PlannedBreakpoint(i, prompt.spans[i].end, ttl_of(i), prompt.spans[i].segment.path)
        for i in sorted(set(chosen))
    ]


# ------------------------------------------------------------------------------------ planning
@dataclass(frozen=True, slots=True)
class CachePlan:
    """What one request reads and writes, decided before generation.

    Attributes:
        total_tokens: prompt length.
        read_tokens: tokens reported as a cache read (a prefix length; 0 if none).
        read_key: the entry read (None if none).
        writes: breakpoints that write, in render order (all with ``end > read_tokens``).
        refresh: keys of entries whose lifetime the read restarts.
        keep_tail_at: prefix lengths whose partial last block the engine must keep.
        request_start: clock time of the request start (TTLs count from it).
        keys: the boundary keys of the prompt (``boundary_keys``).
        arrived: when the request arrived (None: it sees every committed entry).
    """

    total_tokens: int
    read_tokens: int
    read_key: bytes | None
    writes: tuple[PlannedBreakpoint, ...]
    refresh: tuple[bytes, ...]
    keep_tail_at: tuple[int, ...]
    request_start: float
    keys: tuple[bytes, ...] = field(repr=False)
    arrived: Instant | None = None

    @property
    def write_tokens(self) -> int:
        """Tokens written (``cache_creation_input_tokens``)."""
        return self.writes[-1].end - self.read_tokens if self.writes else 0

    def write_tokens_by_ttl(self) -> dict[str, int]:
        """Written tokens split by TTL: each range between consecutive written breakpoints takes
        the TTL of the breakpoint closing it (e.g. ``{"5m": 1200, "1h": 0}``)."""
        out: dict[str, int] = {}
        prev = self.read_tokens
        for bp in self.writes:
            out[bp.ttl] = out.get(bp.ttl, 0) + bp.end - prev
            prev = bp.end
        return out

    @property
    def uncached_tokens(self) -> int:
        """Tokens neither read nor written (Anthropic ``input_tokens``)."""
        return self.total_tokens - self.read_tokens - self.write_tokens


class _FromPolicy:
    """Sentinel type: take the value from the catalog policy of the prompt's model."""


_FROM_POLICY = _FromPolicy()


def _policy_read_window(model: str | None) -> int | None:
    """The catalog's ``read_breakpoint_window`` of ``model`` (None when the model is unknown
    or the policy has none)."""
    if model is None:
        return None
    try:
        return get_policy(model).read_breakpoint_window
    except UnknownModelError:
        return None


def read_window_start(prompt: TemplatedPrompt, window: int | None) -> int:
    """Index of the first span whose cache entry a read may use under a window of the latest
    ``window`` breakpoints (OpenAI GPT-5.6+, hosted-api-rules.md 2.3 [O3]: "for reads, OpenAI
    looks at the latest 80 breakpoints").

    The request's breakpoints are its explicit ``prompt_cache_breakpoint`` markers (the
    read-only ones beyond the 4 that write included) plus, in ``prompt_cache_options.mode``
    ``"implicit"`` (the default), the implicit one on the newest message. With more than
    ``window`` of them, an entry ending before the oldest of the latest ``window`` is not looked
    at; entries from there on are (no content-block lookback limit). 0 (no floor) when
    ``window`` is None or not exceeded.
    """
    if window is None:
        return 0
    spans = prompt.spans
    marked = [
        i
        for i, span in enumerate(spans)
        if span.segment.breakpoint is not None
        and span.segment.breakpoint.source == "openai-explicit"
    ]
    opts = prompt.view.params.get("prompt_cache_options")
    mode = opts.get("mode", "implicit") if isinstance(opts, Mapping) else "implicit"
    if mode != "explicit":
        messages = [i for i, span in enumerate(spans) if span.segment.tier == "messages"]
        implicit = messages[-1] if messages else len(spans) - 1
        if implicit >= 0 and implicit not in marked:
            marked = sorted([*marked, implicit])
    if len(marked) <= window:
        return 0
    return marked[-window] if window > 0 else len(spans)


def plan_reads_and_writes(
    prompt: TemplatedPrompt,
    breakpoints: Sequence[PlannedBreakpoint],
    ledger: CacheLedger,
    *,
    tenant_salt: bytes,
    now: float,
    min_tokens: int,
    lookback_positions: int | None,
    available_tokens: int,
    arrived: Instant | None = None,
    read_breakpoint_window: int | _FromPolicy | None = _FROM_POLICY,
) -> CachePlan:
    """Decide the read and the writes of one request.

    Args:
        prompt: the templated request.
        breakpoints: its breakpoints in render order (validated).
        ledger: entries earlier requests wrote.
        tenant_salt: isolates tenants (and models) from each other.
        now: request start (clock seconds).
        min_tokens: the model's minimum cacheable prefix; shorter breakpoints write nothing.
        lookback_positions: how far back from each breakpoint (in lookback positions) an entry
            is looked for; None = no limit.
        available_tokens: the prefix length whose KV the block cache holds now
            (``engine.available_prefix``). An entry longer than that is physically gone: it is
            dropped from the ledger and the lookback continues with shorter ones, so a reported
            read is never recomputed.
        arrived: when the request arrived (:meth:`Timeline.stamp`). An entry whose writer's
            response began at or after it is treated as absent: the request reports writing
            that prefix itself (Anthropic: "a cache entry becomes available only after the first
            response begins", hosted-api-rules.md 1.9; case BR-21). None: every entry is visible
            (the OpenAI routes, whose reference documents no such rule).
        read_breakpoint_window: reads look at the latest N breakpoints of the request only
            (:func:`read_window_start`); None = every breakpoint. Default: the catalog's
            ``read_breakpoint_window`` for ``prompt.view.model`` (OpenAI GPT-5.6+: 80; None
            for Anthropic, whose reads are bounded by ``lookback_positions``, and for a model
            the catalog does not know).

    Returns:
        the :class:`CachePlan`.
    """
    keys = boundary_keys(prompt, tenant_salt)
    spans = prompt.spans
    if isinstance(read_breakpoint_window, _FromPolicy):
        read_breakpoint_window = _policy_read_window(prompt.view.model)
    floor = read_window_start(prompt, read_breakpoint_window)
    best_end = 0
    best_key: bytes | None = None
    for bp in breakpoints:
        pos = spans[bp.span_index].segment.position
        for j in range(bp.span_index, floor - 1, -1):
            if spans[j].end <= best_end:
                break
            if (
                lookback_positions is not None
                and spans[j].segment.position < pos - lookback_positions
            ):
                break
            entry = ledger.get(keys[j], now, arrived=arrived)
            if entry is None:
                continue
            if spans[j].end > available_tokens:
                ledger.drop(keys[j])
                continue
            best_end, best_key = spans[j].end, keys[j]
            break
    writes = tuple(bp for bp in breakpoints if bp.end >= min_tokens and bp.end > best_end)
    refresh: list[bytes] = [] if best_key is None else [best_key]
    for bp in breakpoints:
        key = keys[bp.span_index]
        if (
            bp.end <= best_end
            and key != best_key
            and ledger.get(key, now, arrived=arrived) is not None
        ):
            refresh.append(key)
    keep = sorted(
        {bp.end for bp in breakpoints if bp.end >= min_tokens} | ({best_end} if best_end else set())
    )
    return CachePlan(
        prompt.total_tokens,
        best_end,
        best_key,
        writes,
        tuple(refresh),
        tuple(keep),
        now,
        tuple(keys),
        arrived,
    )


def commit_plan(
    plan: CachePlan, ledger: CacheLedger, *, available_at: Instant | None = None
) -> None:
    """Record a plan's writes (lifetime from the request start) and refresh its reads.

    Call once the prefill has run (the entries exist from then on).

    Args:
        plan: the request's plan.
        ledger: where its entries go.
        available_at: when the request's response began (its first token: end of prefill);
            requests that arrived before it do not see the entries it writes (hosted-api-rules.md
            1.9). None: the entries are visible to every later plan.
    """
    for key in plan.refresh:
        ledger.refresh(key, plan.request_start)
    for bp in plan.writes:
        ledger.put(
            plan.keys[bp.span_index], bp.end, bp.ttl, plan.request_start, available_at=available_at
        )


# ------------------------------------------------------------------------------------ usage
@dataclass(frozen=True, slots=True)
class AnthropicUsageCounts:
    """Input-side usage of one Anthropic request (tokens).

    ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` is the prompt length,
    and ``ephemeral_5m_input_tokens + ephemeral_1h_input_tokens == cache_creation_input_tokens``.
    """

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    ephemeral_5m_input_tokens: int
    ephemeral_1h_input_tokens: int

    @classmethod
    def from_plan(cls, plan: CachePlan) -> AnthropicUsageCounts:
        """The usage a plan reports."""
        split = plan.write_tokens_by_ttl()
        return cls(
            plan.uncached_tokens,
            plan.write_tokens,
            plan.read_tokens,
            split.get("5m", 0),
            split.get("1h", 0),
        )


def openai_automatic_cached_tokens(
    reused_tokens: int, prompt_tokens: int, *, min_tokens: int = 1024, step_tokens: int | None = 128
) -> int:
    """``cached_tokens`` of OpenAI's automatic caching for a physically reused prefix.

    ``0`` when the prompt or the reused prefix is below ``min_tokens``; otherwise
    ``min_tokens + step * floor((reused - min_tokens) / step)``, never more than ``reused``.
    Source: https://developers.openai.com/api/docs/guides/prompt-caching ("cache hits occur in
    increments of 128 tokens" from 1,024).
    """
    if prompt_tokens < min_tokens:
        return 0
    return cache_grid_tokens(reused_tokens, min_tokens, step_tokens)


def block_floor_reuse(shared_prefix_tokens: int, block_size: int) -> int:
    """Tokens a block-hash prefix cache can reuse of a shared prefix: only full blocks are
    shared, so ``floor(shared / block_size) * block_size``.

    Source: vLLM automatic prefix caching (https://docs.vllm.ai/en/latest/design/prefix_caching.html);
    the failure it explains: https://github.com/vllm-project/vllm/issues/54607 (a 240-token system
    prompt under 784-token blocks reuses nothing).

    Raises:
        ValueError: negative ``shared_prefix_tokens`` or ``block_size < 1``.
    """
    if shared_prefix_tokens < 0 or block_size < 1:
        raise ValueError("need shared_prefix_tokens >= 0 and block_size >= 1")
    return shared_prefix_tokens // block_size * block_size


def classify_block_reuse(
    shared_prefix_tokens: int, block_size: int
) -> Literal["no_shared_prefix", "below_block_floor", "reusable"]:
    """Why a shared prefix is (not) reused: ``"no_shared_prefix"`` (nothing shared),
    ``"below_block_floor"`` (shared, but shorter than one block: 0 reusable tokens) or
    ``"reusable"``.

    Raises:
        ValueError: as :func:`block_floor_reuse`.
    """
    if block_floor_reuse(shared_prefix_tokens, block_size) > 0:
        return "reusable"
    return "below_block_floor" if shared_prefix_tokens > 0 else "no_shared_prefix"
