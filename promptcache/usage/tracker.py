"""UsageTracker: hit rate, cost and savings by label, model and session, plus cache alarms.

Aggregation rules (the ones peers get wrong, reference/peer-tools.md section 3):

* **Hit rate is a ratio of sums**: ``sum(cache_read) / sum(total_input)`` over a group, never a
  mean of per-request rates, always in [0, 1]. It is ``None`` when any record in the group has
  an unknown read or input count (e.g. vLLM without ``--enable-prompt-tokens-details``): a
  partial number would be silently wrong. ``requests_unknown`` says how many records were
  unknown. The request-level hit rate (share of requests that read anything, case BR-24) is
  reported next to it.
* **Cost** is Decimal USD from :func:`promptcache.usage.billing.price_record`, with prices from
  ``promptcache.catalog.get_prices`` (at the record's start time), per-model ``prices`` overrides
  or one ``default_prices`` table for everything, and the catalog's prompt-length tier rules.
  A group's cost is ``None`` when any record's cost is unknown.

Diagnostics, each emitted as a :class:`UsageEvent` (returned by :meth:`UsageTracker.add`, kept in
:attr:`UsageTracker.events`, passed to ``on_event``):

* ``zero_hit_alarm``: after ``warmup`` requests of one (model, label) whose prefix is cacheable
  (``record.cacheable``, or inferred: a cache write was reported, or the model caches
  automatically and the prompt reaches the catalog minimum), no token was read. Also calls
  ``on_alarm`` and ``warnings.warn(ZeroHitWarning)``; once per (model, label). The message's
  advice is the provider's (Anthropic: a volatile prefix, a breakpoint after per-request
  content, parallel cold writes; OpenAI: a missing or unstable ``prompt_cache_key``, a shared
  prefix under the model's minimum, content that changes early in the prompt).
* ``collapse``: within a session, a request reads 0 after the previous one to its model (or,
  for a model new to the session, the session's previous request: a model switch) read or
  wrote a prefix (a side request to another model under that model's minimum, and a request
  whose reads are unknown, are skipped); ``data["cause"]`` is ``ttl_expired`` / ``prefix_changed`` / ``unknown``
  (:func:`promptcache.usage.classify.classify_collapse`: ``prefix_changed`` only when the
  request dropped the previous request's prefix, ``UsageRecord.kept_prefix``, never because a
  growing conversation's last breakpoint moved). For an idle lifetime (OpenAI before GPT-5.6,
  below) a gap between the usual clearing and the certain bound gives ``ttl_expired`` as the
  *likely* cause only: ``data["level"] == "warning"``, ``data["ttl_is"] == "usual idle
  clearing"``, ``data["max_idle_seconds"]`` the certain bound, and the message says the read
  was possible (the same rule as ``promptcache diff``).
* ``prefix_regression`` (case BR-18): within a session and the TTL, ``read[n] <
  read[n-1] + creation[n-1]``. With an idle lifetime the check runs within the usual clearing
  (``usual_s``; the certain bound when there is none) and is skipped past it: a shortfall
  there is explained by the usual idle clearing as well as by a regression, so it is no
  evidence of one (a zero read there is still a ``collapse``).
* ``concurrent_cold_writes`` (case BR-21): two or more requests wrote the same prefix and read
  nothing, each sent before the previous write became readable (its ``first_token``, else
  ``end``). The same prefix: the longest breakpoint digest the requests share
  (``breakpoint_hashes``: fan-out requests that share a system prompt and differ after it, with
  a breakpoint on each tail, share the system prompt's digest), else the same ``prefix_hash``,
  else the same model and write size. The wasted USD counts the shared prefix's tokens written
  again (``breakpoint_tokens``), not each request's own tail. The event is raised when the
  group reaches 2, 4, 8... writes, its message counting the group so far (a fan-out of 100 logs
  7 lines, not 99); the final groups with their redundant writes and wasted USD are in
  :meth:`UsageTracker.cold_write_groups`.
* ``usage_anomaly``: the record carries parse flags (a streamed counter decreased, parts exceed
  the total...). A record whose parts exceeded its inclusive ``input_total`` arrives clamped to
  it (flag ``input_parts_exceed_total``; :class:`~promptcache.usage.record.UsageRecord`), so hit
  rate, cost and savings are computed from consistent counts and the hit rate stays in [0, 1].

TTL used by the session checks: ``ttl=`` when given; else 1 h when the previous request wrote
1 h entries; else the record's ``cache_write_ttl``; else, for a model with an idle lifetime
(OpenAI before GPT-5.6: catalog ``idle_lifetime``), its
:meth:`~promptcache.catalog.CachePolicy.idle_bounds` for the record's
``prompt_cache_retention`` (the SDK wrapper sets it from the request, a request log's line
carries it in its request); when the record does not say, the model's default is assumed
(in-memory: usually cleared after 5 min idle, always within 1 h; a model accepting both
values: 5 min usual, 24 h certain, the default depending on the organisation; ``24h`` only:
24 h), hosted-api-rules.md 2.1-2.2; else the
model's catalog ``default_ttl``; else ``default_ttl_seconds`` (300 s).

Thread- and asyncio-safe: state changes happen under one ``threading.Lock`` with no awaits
inside; :meth:`UsageTracker.aadd` runs sink I/O in a worker thread.
"""

from __future__ import annotations

import asyncio
import os
import threading
import warnings
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from promptcache._errors import PromptCacheError
from promptcache.usage.billing import (
    WRITE_TTLS,
    Cost,
    PriceTable,
    TierLike,
    price_record,
    utc,
)
from promptcache.usage.classify import (
    check_append_only,
    classify_collapse,
    minimum_cacheable_tokens,
    ttl_seconds,
)
from promptcache.usage.parse import parse_usage
from promptcache.usage.record import UsageRecord
from promptcache.usage.sinks import Sink

__all__ = [
    "COLD_PREFIXES_KEPT",
    "EVENTS_KEPT",
    "ColdWriteGroup",
    "EventKind",
    "UsageEvent",
    "UsageSummary",
    "UsageTracker",
    "ZeroHitWarning",
]

#: Times below this (seconds since the epoch, 2001-09-09) are relative (a log starting at 0),
#: not dates: they do not choose a dated price (promptcache._times uses the same floor).
_EPOCH_FLOOR = 1e9

#: Distinct model ids whose catalog lookups a tracker keeps (beyond them: looked up each time).
_MODELS_CACHED = 1024
#: Markers of UsageTracker._static_prices: not looked up yet; priced from the dated catalog.
_UNSET, _DATED = object(), object()

#: Events kept in :attr:`UsageTracker.events` with ``keep_records=False`` (the newest).
EVENTS_KEPT = 10_000
#: Distinct cold-written prefixes tracked for concurrent-write detection with
#: ``keep_records=False`` (the most recently written): a write overlaps only recent ones.
COLD_PREFIXES_KEPT = 4_096

EventKind = Literal[
    "zero_hit_alarm", "collapse", "prefix_regression", "concurrent_cold_writes",
    "usage_anomaly", "unpriced",
]


_VERSION_FN: Callable[[], Any] | None = None

#: Called (no arguments, never raising) before a tracker's results are read, outside its lock:
#: the SDK wrapper registers the recording of streams dropped unread since its last call
#: (``promptcache.sdk._observe.drain_dropped_streams``), so ``tracker.summary()`` after a
#: dropped stream counts it, as ``tracker_of(client)`` does (review 26).
BEFORE_READ: list[Callable[[], None]] = []


def _before_read() -> None:
    for hook in BEFORE_READ:
        hook()


def _overrides_version() -> Any:
    """``promptcache.catalog.overrides_version()`` (imported on first use)."""
    global _VERSION_FN
    if _VERSION_FN is None:
        from promptcache.catalog import overrides_version

        _VERSION_FN = overrides_version
    return _VERSION_FN()


class ZeroHitWarning(UserWarning):
    """Warned when cacheable traffic reads nothing from the cache after the warm-up."""


@dataclass(frozen=True)
class UsageEvent:
    """One diagnostic from the tracker.

    Attributes:
        kind: see the module docstring.
        message: one human sentence.
        record: the record that triggered it.
        data: numbers behind it (``cause``, ``gap_seconds``, ``expected_min_read``...).
    """

    kind: EventKind
    message: str
    record: UsageRecord
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UsageSummary:
    """Aggregate of a group of records (tokens, USD).

    Token sums add the known values; ``requests_unknown`` counts records whose read or total
    input is unknown (an OpenAI stream sent without ``include_usage``, a stream left before its
    usage arrived), and makes ``hit_rate`` ``None``: a ratio over part of the traffic is not the
    traffic's hit rate. ``known_hit_rate`` is the same ratio over the records whose usage is
    known, to read beside ``requests_unknown``. Costs are ``None`` when any record's cost is
    unknown; ``known_cost`` is the cost of the records whose cost is known (USD), to read
    beside them (new-user trial 16: one stream left early hid every later cost).
    """

    key: tuple[str | None, ...]
    requests: int
    requests_unknown: int
    requests_with_read: int
    uncached_input: int
    cache_read: int
    cache_write: int
    cache_write_5m: int
    cache_write_1h: int
    output: int
    reasoning: int
    total_input: int
    cost: Decimal | None
    input_cost: Decimal | None
    uncached_input_cost: Decimal | None
    first_start: float | None
    last_end: float | None
    #: cache-read tokens of the records whose usage is known (tokens)
    known_cache_read: int
    #: cost of the records whose cost is known (USD); equal to ``cost`` when every one is
    known_cost: Decimal = Decimal(0)

    @property
    def hit_rate(self) -> float | None:
        """``sum(cache_read) / sum(total_input)`` in [0, 1]; ``None`` when unknown or empty."""
        if self.requests_unknown or self.total_input == 0:
            return None
        return self.cache_read / self.total_input

    @property
    def known_hit_rate(self) -> float | None:
        """``hit_rate`` over the records whose usage is known (``requests -
        requests_unknown`` of them), in [0, 1]; ``None`` when none is known or their input is
        0. Equal to ``hit_rate`` when every record is known."""
        if self.total_input == 0:
            return None
        return self.known_cache_read / self.total_input

    @property
    def request_hit_rate(self) -> float | None:
        """Share of requests (with known usage) that read at least one cached token."""
        known = self.requests - self.requests_unknown
        return None if known == 0 else self.requests_with_read / known

    @property
    def savings(self) -> Decimal | None:
        """Input cost without caching minus actual input cost (USD); negative = caching lost."""
        if self.uncached_input_cost is None or self.input_cost is None:
            return None
        return self.uncached_input_cost - self.input_cost

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (Decimals as strings, derived rates included)."""
        def dec(x: Decimal | None) -> str | None:
            return None if x is None else str(x)

        return {
            "key": list(self.key),
            "requests": self.requests,
            "requests_unknown": self.requests_unknown,
            "hit_rate": self.hit_rate,
            "known_hit_rate": self.known_hit_rate,
            "request_hit_rate": self.request_hit_rate,
            "uncached_input": self.uncached_input,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "cache_write_5m": self.cache_write_5m,
            "cache_write_1h": self.cache_write_1h,
            "output": self.output,
            "reasoning": self.reasoning,
            "total_input": self.total_input,
            "cost_usd": dec(self.cost),
            "input_cost_usd": dec(self.input_cost),
            "uncached_input_cost_usd": dec(self.uncached_input_cost),
            "savings_usd": dec(self.savings),
            "known_cost_usd": dec(self.known_cost),
        }


class _Acc:
    """Mutable accumulator behind a :class:`UsageSummary`."""

    __slots__ = (
        "cache_read", "cache_write", "cache_write_1h", "cache_write_5m", "cost", "first_start",
        "input_cost", "known_cache_read", "known_cost", "last_end", "output", "reasoning",
        "requests",
        "requests_unknown",
        "requests_with_read", "total_input", "uncached_input", "uncached_input_cost",
    )

    def __init__(self) -> None:
        self.requests = self.requests_unknown = self.requests_with_read = 0
        self.uncached_input = self.cache_read = self.cache_write = 0
        self.cache_write_5m = self.cache_write_1h = self.output = self.reasoning = 0
        self.total_input = self.known_cache_read = 0
        self.cost: Decimal | None = Decimal(0)
        self.known_cost = Decimal(0)
        self.input_cost: Decimal | None = Decimal(0)
        self.uncached_input_cost: Decimal | None = Decimal(0)
        self.first_start: float | None = None
        self.last_end: float | None = None

    def snapshot(self, key: tuple[str | None, ...]) -> UsageSummary:
        return UsageSummary(
            key=key, requests=self.requests, requests_unknown=self.requests_unknown,
            requests_with_read=self.requests_with_read, uncached_input=self.uncached_input,
            cache_read=self.cache_read, cache_write=self.cache_write,
            cache_write_5m=self.cache_write_5m, cache_write_1h=self.cache_write_1h,
            output=self.output, reasoning=self.reasoning, total_input=self.total_input,
            cost=self.cost, input_cost=self.input_cost,
            uncached_input_cost=self.uncached_input_cost, first_start=self.first_start,
            last_end=self.last_end, known_cache_read=self.known_cache_read,
            known_cost=self.known_cost,
        )


def _record_numbers(rec: UsageRecord, cost: Cost | None) -> tuple[Any, ...]:
    """One record's numbers as every accumulator adds them (:func:`_add_counts`), computed
    once per record (the record's derived fields are properties; five accumulators would
    compute them five times). Unknown counts are 0 here; ``known`` says whether the prompt
    split is known."""
    total = rec.total_input
    read = rec.cache_read
    known = total is not None and read is not None
    numbers = (known, total or 0, read or 0, rec.uncached_input or 0, rec.writes or 0,
               rec.cache_write_5m or 0, rec.cache_write_1h or 0, rec.output or 0,
               rec.reasoning or 0)
    if cost is None:
        costs: tuple[Decimal | None, ...] = (None, None, None)
    else:  # Cost.total and Cost.input, the input side summed once
        inp = cost.input
        costs = (None if inp is None or cost.output is None else inp + cost.output, inp,
                 cost.uncached_input_cost)
    return (*numbers, *costs, rec.start, rec.end if rec.end is not None else rec.start)


def _add_counts(accs: tuple[_Acc, ...], numbers: tuple[Any, ...]) -> None:
    """Add one record's numbers (:func:`_record_numbers`) to each accumulator of ``accs``
    (its groups): the numbers are computed once, not once per group."""
    (known, total_input, read, uncached, writes, w5, w1, output, reasoning, cost, input_cost,
     base, start, end) = numbers
    for acc in accs:
        acc.requests += 1
        if known:
            acc.total_input += total_input
            acc.known_cache_read += read
            if read:
                acc.requests_with_read += 1
        else:
            acc.requests_unknown += 1
        acc.uncached_input += uncached
        acc.cache_read += read
        acc.cache_write += writes
        acc.cache_write_5m += w5
        acc.cache_write_1h += w1
        acc.output += output
        acc.reasoning += reasoning
        # a sum is None (unknown) once one of its records' costs is
        total = acc.cost
        if total is not None:
            acc.cost = None if cost is None else total + cost
        if cost is not None:
            acc.known_cost += cost
        total = acc.input_cost
        if total is not None:
            acc.input_cost = None if input_cost is None else total + input_cost
        total = acc.uncached_input_cost
        if total is not None:
            acc.uncached_input_cost = None if base is None else total + base
        if start is not None:
            first = acc.first_start
            if first is None or start < first:
                acc.first_start = start
        if end is not None:
            last = acc.last_end
            if last is None or end > last:
                acc.last_end = end


def _plus(a: Decimal | None, b: Decimal | None) -> Decimal | None:
    return None if a is None or b is None else a + b


@dataclass
class ColdWriteGroup:
    """Requests that each wrote the same cold prefix concurrently (case BR-21).

    Attributes:
        model: model id.
        key: the shared prefix's fingerprint: the longest breakpoint digest every record of the
            group shares (``UsageRecord.breakpoint_hashes``), else their ``prefix_hash``, or
            ``"writes=<N>"`` when neither was given.
        records: the cold writes, in arrival order.
        wasted_usd: what the redundant writes of the shared prefix cost beyond reading the same
            tokens (USD; ``None`` when unpriced). Only the shared prefix's tokens count
            (``UsageRecord.breakpoint_tokens`` at ``key``), not each request's own tail.
        shared_hashes: the breakpoint digests every record of the group shares, in render
            order (``key`` is the last).
    """

    model: str | None
    key: str
    records: list[UsageRecord]
    wasted_usd: Decimal | None = Decimal(0)
    shared_hashes: tuple[str, ...] = ()

    @property
    def writes(self) -> int:
        """How many requests wrote the prefix."""
        return len(self.records)

    @property
    def redundant_writes(self) -> int:
        """Writes beyond the first one."""
        return len(self.records) - 1

    @property
    def redundant_write_tokens(self) -> int:
        """Tokens of the shared prefix written again by the redundant writes (a record's whole
        write when its tokens per breakpoint are unknown)."""
        return sum(_shared_tokens(r, self.key) for r in self.records[1:])

    def message(self, *, so_far: bool = False) -> str:
        """One sentence: how many requests wrote the prefix, the tokens written again, the
        wasted USD and the fix (``so_far``: the group may still grow)."""
        wasted = "" if self.wasted_usd is None else f", ${self.wasted_usd:.6f} wasted"
        return (f"{self.writes} requests{' so far' if so_far else ''} wrote the same cold "
                f"prefix concurrently ({self.redundant_write_tokens:,} tokens written "
                f"again{wasted}; send one, wait for its first token, then the rest)")


def _cold_keys(rec: UsageRecord) -> tuple[str, ...]:
    """The prefix digests a cold write can share with another one, shortest prefix first:
    its breakpoint digests, else its ``prefix_hash``, else ``"writes=<N>"``."""
    if rec.breakpoint_hashes:
        return rec.breakpoint_hashes
    if rec.prefix_hash is not None:
        return (rec.prefix_hash,)
    return (f"writes={rec.writes}",)


def _shared_tokens(rec: UsageRecord, key: str) -> int:
    """Tokens of ``rec``'s write that belong to the prefix ``key`` (its breakpoint tokens at
    that digest, at most the write); the whole write when unknown."""
    writes = rec.writes or 0
    if rec.breakpoint_tokens and key in rec.breakpoint_hashes:
        return min(writes, rec.breakpoint_tokens[rec.breakpoint_hashes.index(key)])
    return writes


@dataclass
class _Session:
    last: UsageRecord
    ttl: float
    #: seconds past which the entry is certainly gone (== ttl unless an idle lifetime)
    max_ttl: float
    #: the idle bounds behind ttl / max_ttl (OpenAI before GPT-5.6), else None
    idle: Any = None
    #: the baseline before ``last``: a request sent before ``last`` but recorded after it
    #: (concurrent calls finishing out of order) is checked against it
    before: UsageRecord | None = None


def _zero_hit_advice(rec: UsageRecord) -> str:
    """What to check when a (model, label) never reads the cache, for the record's provider:
    Anthropic caches at breakpoints the request places; OpenAI caches the longest identical
    prefix automatically, from a minimum length, routed by ``prompt_cache_key``."""
    pol = _policy(rec.model)
    provider = pol.provider if pol is not None else {
        "anthropic": "anthropic", "openai": "openai", "openai-responses": "openai",
    }.get(rec.provider)
    if provider == "anthropic":
        return ("check for a volatile prefix, a breakpoint after per-request content, or "
                "parallel cold writes")
    if provider == "openai":
        minimum = pol.min_cacheable_tokens if pol is not None else 1024
        marker = (", a breakpoint after per-request content"
                  if pol is not None and pol.explicit_breakpoints else "")
        return (f"check for a missing or unstable prompt_cache_key, a shared prefix under "
                f"{minimum:,} tokens{marker}, or content that changes early in the prompt")
    return ("check for a volatile prefix (content that changes early in the prompt), or "
            "parallel cold writes")


def _policy(model: str | None) -> Any:
    """The catalog's policy for ``model`` or None (:func:`promptcache.catalog.find_policy`,
    cached per model there); imported on first use: the catalog loads TOML."""
    from promptcache.catalog import find_policy

    return find_policy(model)


def _short_prompt_writes(record: UsageRecord,
                         minimums: dict[str, int | None] | None = None) -> UsageRecord:
    """``record`` with its unreported cache writes set to 0 when its prompt is under the
    model's minimum cacheable length (nothing can be written there, hosted-api-rules.md 2.1 /
    2.3) and it read nothing: GPT-5.6+ Chat Completions usage off the Standard tier omits
    ``cache_write_tokens`` (2.4), which left such a record's cost and uncached part unknown
    although both are known (review 13). Any other record is returned as is.

    ``minimums``: the minimum of each model id seen so far (it depends on the id only), kept
    by the caller."""
    # a read that is unknown (cached_tokens left out) keeps the record unknown: filling only
    # the writes and the uncached part would give uncached = total beside an unknown read
    # (new-user trial 23)
    if record.writes is not None or record.cache_read is None or record.cache_read or \
            record.input_total is None or \
            record.model is None:  # without a model, no price: nothing to make known
        return record
    model = record.model
    if minimums is not None and model.__class__ is str and model in minimums:
        minimum = minimums[model]
    else:
        minimum = minimum_cacheable_tokens(record)
        if minimums is not None and model.__class__ is str and len(minimums) < _MODELS_CACHED:
            minimums[model] = minimum
    if minimum is None or record.input_total >= minimum:
        return record
    return record.model_copy(update={
        "cache_write": 0, "uncached_input": record.input_total - (record.cache_read or 0)})


def _check_record(record: Any, method: str) -> None:
    """TypeError unless ``record`` is a :class:`UsageRecord` (the commonest mistake is the SDK
    response itself, which :meth:`UsageTracker.add_response` parses)."""
    if not isinstance(record, UsageRecord):
        raise TypeError(f"{method}() takes a UsageRecord, got {type(record).__name__}; use "
                        "add_response(obj) or parse_usage(obj)")


def _check_sinks(sinks: Any) -> list[Sink]:
    """``sinks`` as a list, each with a callable ``write``; TypeError naming the mistake
    otherwise (at construction, not on the first record)."""
    wrap = "wrap it in JsonlSink(...): sinks=[JsonlSink(path)]"
    if sinks is None:
        return []
    if isinstance(sinks, (str, bytes, os.PathLike)):
        raise TypeError(f"sinks takes sink objects, not a path ({sinks!r}); {wrap}")
    if callable(getattr(sinks, "write", None)):
        raise TypeError(f"sinks takes a list of sinks, got one {type(sinks).__name__}; pass "
                        "sinks=[sink]")
    try:
        items = list(sinks)
    except TypeError:
        raise TypeError(f"sinks takes a list of sinks (objects with a write(record) method), "
                        f"got {type(sinks).__name__}") from None
    for item in items:
        if isinstance(item, (str, bytes, os.PathLike)):
            raise TypeError(f"sinks: {item!r} is a path, not a sink; {wrap}")
        if not callable(getattr(item, "write", None)):
            raise TypeError(f"sinks: {type(item).__name__} has no write(record) method (use "
                            "JsonlSink, MemorySink or an object with write)")
    return items


class UsageTracker:
    """Aggregates usage records by label, model and session; prices them; raises alarms.

    Args:
        prices: per-model price overrides (model id -> ``ModelPrices``), checked before the
            catalog.
        default_prices: one price table for every record without an override (cases, private
            deployments); when absent, ``promptcache.catalog.get_prices`` is used.
        batch: force the batch discount on/off; ``None``: per record (``service_tier``).
        sinks: where every added record is written (``JsonlSink``, ``MemorySink``).
        keep_records: keep the records and every event in memory (:attr:`records`,
            :attr:`events`); with False, memory stays bounded in a long-running process (the
            newest :data:`EVENTS_KEPT` events, per-group totals only).
        warmup: cacheable requests per (model, label) before the zero-hit alarm may fire.
        on_alarm: called with the ``zero_hit_alarm`` event.
        on_event: called with every event.
        ttl: TTL in seconds for the session checks (default: per record, see module doc).
        default_ttl_seconds: fallback TTL when neither the record nor the catalog has one.
        default_write_ttl: TTL assumed when writes are not split by TTL ("5m" or "1h"); the
            cost of such a record carries the note "write TTL not reported: priced at the
            ... rate" (``Cost.assumptions``).
        warn: issue ``warnings.warn(ZeroHitWarning)`` with the zero-hit alarm (the event and
            ``on_alarm`` happen either way).

    Raises:
        ValueError: ``warmup`` < 1, or ``default_write_ttl`` is not "5m" / "1h".
        TypeError: ``sinks`` is not a sequence of sinks (objects with a ``write(record)``
            method): a path (``sinks="u.jsonl"``: wrap it, ``sinks=[JsonlSink("u.jsonl")]``),
            a single sink not in a list, or an element without ``write``.
    """

    def __init__(
        self,
        *,
        prices: Mapping[str, PriceTable] | None = None,
        default_prices: PriceTable | None = None,
        batch: bool | None = None,
        sinks: Sequence[Sink] = (),
        keep_records: bool = True,
        warmup: int = 5,
        on_alarm: Callable[[UsageEvent], None] | None = None,
        on_event: Callable[[UsageEvent], None] | None = None,
        ttl: float | None = None,
        default_ttl_seconds: float = 300.0,
        default_write_ttl: str = "5m",
        warn: bool = True,
    ) -> None:
        if warmup < 1:
            raise ValueError("warmup must be >= 1")
        if default_write_ttl not in WRITE_TTLS:
            raise ValueError(f"default_write_ttl must be one of {', '.join(WRITE_TTLS)}, "
                             f"got {default_write_ttl!r}")
        self._overrides = dict(prices or {})
        self._default_prices = default_prices
        self._batch = batch
        self._sinks = _check_sinks(sinks)
        self._keep = keep_records
        self._warmup = warmup
        self._on_alarm = on_alarm
        self._on_event = on_event
        self._ttl = ttl
        self._default_ttl = default_ttl_seconds
        self._default_write_ttl = default_write_ttl
        self._warn = warn
        self._lock = threading.Lock()
        self._records: list[UsageRecord] = []
        self._costs: list[Cost | None] = []
        # with keep_records=False nothing may grow with the number of requests: the newest
        # events only (each holds its record)
        self._events: deque[UsageEvent] = deque(maxlen=None if keep_records else EVENTS_KEPT)
        self._total = _Acc()
        self._groups: dict[str, defaultdict[tuple[str | None, ...], _Acc]] = {
            name: defaultdict(_Acc) for name in ("label", "model", "session", "label_model")
        }
        #: each session's state per model (caches are per model), and the model of its latest
        #: request (a model new to the session is compared with that one: a model switch)
        self._sessions: dict[tuple[str, str | None], _Session] = {}
        self._session_model: dict[str, str | None] = {}
        self._warm: dict[tuple[str | None, str | None], list[int]] = {}
        self._alarmed: set[tuple[str | None, str | None]] = set()
        self._cold: dict[tuple[str | None, str], list[ColdWriteGroup]] = {}
        self._price_cache: dict[tuple[str, int, int], PriceTable | None] = {}
        #: the catalog's overrides_version() the cached prices were looked up under
        self._prices_version: Any = None
        # per model id (the catalog is read once per process; the dated prices above are
        # cached per tracker too): its policy, tier rules, the price table that does not
        # depend on the date (an override or default_prices; _DATED: the catalog's), the
        # policy's default TTL in seconds
        self._policies: dict[str, Any] = {}
        self._tier_rules: dict[str, tuple[TierLike, ...]] = {}
        self._static_prices: dict[str, Any] = {}
        self._policy_ttls: dict[tuple[str, str | None], _Lifetime | None] = {}
        self._minimums: dict[str, int | None] = {}
        #: models whose prices may change within a day (see prices_for)
        self._half_hour_priced: set[str] = set()

    # ------------------------------------------------------------------ pricing

    def prices_for(self, record: UsageRecord) -> PriceTable | None:
        """The price table used for ``record`` (override, default, catalog) or ``None``.

        Catalog prices are those in force at ``record.start`` (dated rows, e.g. a price
        change); a ``start`` under 1e9 s (before 2001-09-09: a relative time, as in a log that
        starts at 0) is no date, and today's prices apply, as for a record without one."""
        model = record.model
        if model.__class__ is str:
            static = self._static_prices.get(model, _UNSET)
            if static is _UNSET:
                static = self._undated_prices(model)
                if len(self._static_prices) < _MODELS_CACHED:
                    self._static_prices[model] = static
        else:
            static = self._undated_prices(model)
        if static is not _DATED:
            return static  # type: ignore[no-any-return]
        assert model is not None
        version = _overrides_version()
        if version != self._prices_version:
            # the catalog's price overrides changed (load_overrides, $PROMPTCACHE_PRICES):
            # prices looked up before are stale (review 16)
            self._price_cache.clear()
            self._half_hour_priced.clear()
            self._prices_version = version
        start = record.start
        if start is not None and start < _EPOCH_FLOOR:
            start = None  # a relative time (a log that starts at 0) is no date: today's prices
        # prices change by date: one lookup per model and UTC day (day number: no datetime
        # built per record); another provider's model from genai-prices may change with the
        # time of day (DeepSeek's off-peak hours, on the half hour): one per half hour
        span = 1800 if model in self._half_hour_priced else 86400
        key = (model, span, -1 if start is None else int(start // span))
        cache = self._price_cache
        if key not in cache:
            try:
                from promptcache.catalog import get_prices

                found = get_prices(model, at=utc(start))
            except (ImportError, PromptCacheError):
                found = None
            except (ValueError, OverflowError, OSError):
                # a start no date can hold (a record built with model_construct skips the
                # record's own check): no dated price, so the cost is unknown, never a traceback
                found = None
            if (span == 86400 and found is not None and found.provider is None
                    and found.source.kind == "genai-prices"):
                self._half_hour_priced.add(model)
                return self.prices_for(record)
            cache[key] = found
        return cache[key]

    def _undated_prices(self, model: str | None) -> Any:
        """The price table of ``model`` that does not depend on the record's date (an
        override, else ``default_prices``), None without a model, else :data:`_DATED`."""
        from promptcache.catalog import is_fine_tuned

        if model is not None and model in self._overrides:
            return self._overrides[model]
        if model is not None and not is_fine_tuned(model):
            # a fine-tuned id (ft:gpt-4o-...:org::id) is not priced as its base model
            pol = self._policy(model)
            if pol is not None and pol.model_id in self._overrides:
                return self._overrides[pol.model_id]
        if self._default_prices is not None:
            return self._default_prices
        if model is None:
            return None
        return _DATED

    def _policy(self, model: str | None) -> Any:
        """:func:`_policy`, kept per model id."""
        if model.__class__ is not str:
            return _policy(model)
        assert model is not None
        try:
            return self._policies[model]
        except KeyError:
            pol = _policy(model)
            if len(self._policies) < _MODELS_CACHED:
                self._policies[model] = pol
            return pol

    def cost_of(self, record: UsageRecord) -> Cost | None:
        """Price one record (without adding it); ``None`` when no price table is known."""
        table = self.prices_for(record)
        if table is None:
            return None
        model = record.model
        rules = self._tier_rules.get(model) if model.__class__ is str else None  # type: ignore[arg-type]
        if rules is None:
            pol = self._policy(model)
            rules = tuple(pol.tier_rules) if pol is not None else ()
            if model.__class__ is str and len(self._tier_rules) < _MODELS_CACHED:
                self._tier_rules[model] = rules  # type: ignore[index]
        return price_record(record, table, tier_rules=rules, batch=self._batch,
                            default_write_ttl=self._default_write_ttl)

    # ------------------------------------------------------------------ adding

    def add(self, record: UsageRecord) -> tuple[UsageEvent, ...]:
        """Add one record: aggregate, price, check, write to the sinks.

        Returns:
            the events this record raised (also kept in :attr:`events`).

        Raises:
            TypeError: ``record`` is not a :class:`UsageRecord` (an SDK response, a dict,
                None): :meth:`add_response` parses a response, or pass
                ``parse_usage(obj)``.
            Exception: the first failing sink's exception (``OSError`` of a full disk...),
                raised after the record was counted, every other sink written and the events
                dispatched (:meth:`add_collecting` returns them all instead).
        """
        events, errors = self.add_collecting(record)
        if errors:
            raise errors[0]
        return events

    def add_collecting(self, record: UsageRecord
                       ) -> tuple[tuple[UsageEvent, ...], list[Exception]]:
        """:meth:`add`, returning the sinks' exceptions instead of raising the first.

        Every sink is written even when an earlier one fails (a full disk under a
        :class:`~promptcache.usage.sinks.JsonlSink` must not starve the sinks after it), and
        the events are dispatched (``on_alarm``, ``on_event``, the zero-hit warning) either way.

        Returns:
            (the events this record raised, the exceptions the failing sinks raised in sink
            order; empty when every write succeeded).

        Raises:
            TypeError: ``record`` is not a :class:`UsageRecord`.
        """
        if not isinstance(record, UsageRecord):
            _check_record(record, "add")
        events = self._ingest(record)
        errors: list[Exception] = []
        for sink in self._sinks:
            try:
                sink.write(record)
            except Exception as exc:
                errors.append(exc)
        if events:
            self._dispatch(events)
        return events, errors

    async def aadd(self, record: UsageRecord) -> tuple[UsageEvent, ...]:
        """:meth:`add` for asyncio code: sink writes run in a worker thread.

        Raises:
            TypeError: as :meth:`add`.
            Exception: as :meth:`add`, the first failing sink's, after every sink was written
                and the events dispatched."""
        events, errors = await self.aadd_collecting(record)
        if errors:
            raise errors[0]
        return events

    async def aadd_collecting(self, record: UsageRecord
                              ) -> tuple[tuple[UsageEvent, ...], list[Exception]]:
        """:meth:`add_collecting` for asyncio code: sink writes run in a worker thread."""
        _check_record(record, "aadd")
        events = self._ingest(record)
        errors: list[Exception] = []
        for sink in self._sinks:
            try:
                await asyncio.to_thread(sink.write, record)
            except Exception as exc:
                errors.append(exc)
        if events:
            self._dispatch(events)
        return events, errors

    def add_response(self, obj: Any, *, provider: str | None = None,
                     **fields: Any) -> UsageRecord:
        """Parse a response with :func:`promptcache.usage.parse.parse_usage` and add it."""
        record = parse_usage(obj, provider=provider, **fields)
        self.add(record)
        return record

    def _ingest(self, record: UsageRecord) -> tuple[UsageEvent, ...]:
        record = _short_prompt_writes(record, self._minimums)
        cost = self.cost_of(record)
        cacheable = self._is_cacheable(record)
        with self._lock:
            events: list[UsageEvent] = []
            if self._keep:
                self._records.append(record)
                self._costs.append(cost)
            numbers = _record_numbers(record, cost)
            g = self._groups
            label, model, session = record.label, record.model, record.session
            accs: tuple[_Acc, ...] = (self._total, g["label"][(label,)], g["model"][(model,)],
                                      g["label_model"][(label, model)])
            if session is not None:
                accs = (*accs, g["session"][(session,)])
            _add_counts(accs, numbers)
            if cost is None:
                events.append(UsageEvent("unpriced", f"no prices for model {record.model!r}",
                                         record))
            if record.flags:
                events.append(UsageEvent("usage_anomaly", "usage flags: " + ", ".join(
                    record.flags), record, {"flags": record.flags}))
            events.extend(self._check_session(record))
            events.extend(self._check_cold_write(record, cost))
            alarm = self._check_zero_hits(record, cacheable)
            if alarm is not None:
                events.append(alarm)
            self._events.extend(events)
        return tuple(events)

    def _dispatch(self, events: tuple[UsageEvent, ...]) -> None:
        for event in events:
            if event.kind == "zero_hit_alarm":
                if self._warn:
                    warnings.warn(event.message, ZeroHitWarning, stacklevel=3)
                if self._on_alarm is not None:
                    self._on_alarm(event)
            if self._on_event is not None:
                self._on_event(event)

    # ------------------------------------------------------------------ checks

    def _is_cacheable(self, rec: UsageRecord) -> bool:
        if rec.cacheable is not None:
            return rec.cacheable
        if rec.writes or rec.cache_read:
            return True
        pol = self._policy(rec.model)
        total = rec.total_input
        if pol is not None and pol.automatic_caching and total is not None:
            return bool(total >= pol.min_cacheable_tokens)
        return False

    def _under_minimum(self, rec: UsageRecord) -> bool:
        """Whether ``rec`` read and wrote nothing with a prompt under its model's minimum
        cacheable length (catalog ``min_cacheable_tokens``; unknown model or total: False)."""
        if rec.cache_read or rec.writes:
            return False
        total = rec.total_input
        if total is None:
            return False
        model = rec.model
        if model.__class__ is str and model in self._minimums:
            minimum = self._minimums[model]  # type: ignore[index]
        else:
            minimum = minimum_cacheable_tokens(rec)
        return minimum is not None and total < minimum

    def _check_zero_hits(self, rec: UsageRecord, cacheable: bool) -> UsageEvent | None:
        if not cacheable or rec.cache_read is None:
            return None
        key = (rec.model, rec.label)
        if key in self._alarmed:
            return None
        state = self._warm.setdefault(key, [0, 0])
        state[0] += 1
        state[1] += rec.cache_read
        if state[0] >= self._warmup and state[1] == 0:
            self._alarmed.add(key)
            return UsageEvent(
                "zero_hit_alarm",
                f"zero cache hits after {state[0]} cacheable requests "
                f"(model {rec.model!r}, label {rec.label!r}): {_zero_hit_advice(rec)}",
                rec, {"requests": state[0], "model": rec.model, "label": rec.label},
            )
        return None

    def _ttl_for(self, rec: UsageRecord) -> _Lifetime:
        """The lifetime of ``rec``'s cache entries for the session checks (module docstring):
        ``(ttl, max_ttl, idle)`` in seconds; ``max_ttl == ttl`` and ``idle`` None for a TTL,
        ``ttl`` the usual clearing and ``max_ttl`` the certain bound for an idle lifetime
        (``idle_bounds(rec.prompt_cache_retention)``: None when the record does not say which
        retention was sent, the model's default then)."""
        if self._ttl is not None:
            return (self._ttl, self._ttl, None)
        if rec.cache_write_1h:
            return (3600.0, 3600.0, None)
        if rec.cache_write_ttl is not None:
            ttl = ttl_seconds(rec.cache_write_ttl)
            return (ttl, ttl, None)
        model = rec.model
        key = (model, rec.prompt_cache_retention)
        if model.__class__ is str and key in self._policy_ttls:
            life = self._policy_ttls[key]  # type: ignore[index]
        else:
            life = _policy_lifetime(self._policy(model), rec.prompt_cache_retention)
            if model.__class__ is str and len(self._policy_ttls) < _MODELS_CACHED:
                self._policy_ttls[key] = life  # type: ignore[index]
        if life is None:
            return (self._default_ttl, self._default_ttl, None)
        return life

    def _check_session(self, rec: UsageRecord) -> list[UsageEvent]:
        """The session checks (module docstring) of ``rec`` against the session's last request
        to ``rec``'s model (caches are per model: a side request to another model, such as a
        title generator on a cheaper one, is no baseline of the chat's next turn), or, for a
        model new to the session, against the session's last request (a model switch drops
        the cache). A request to another model than the session's latest one, with a prompt
        under that model's minimum, reads and writes nothing: a side request, neither checked
        nor a baseline (new-user trial 26). A model new to the session is checked for a
        collapse only (``data["previous_model"]``), never for a ``prefix_regression`` against
        another model's counts. A record whose reads are unknown (``cache_read`` None), or
        sent before the session's last request to its model (recorded out of order), is
        neither checked nor a baseline (review 26)."""
        session = rec.session
        if session is None or rec.cache_read is None:
            # usage unknown (a stream left or dropped before its usage arrived, an OpenAI chat
            # stream without include_usage): nothing to check, and no baseline: the next
            # request is compared with the last one whose reads are known (review 26: a stream
            # dropped unread, recorded as unknown, hid the next request's collapse)
            return []
        last_model = self._session_model.get(session, rec.model)
        if last_model != rec.model and self._under_minimum(rec):
            return []
        key = (session, rec.model)
        prev_state = self._sessions.get(key)
        late = (prev_state is not None and rec.start is not None
                and prev_state.last.start is not None and rec.start < prev_state.last.start)
        if late:
            # sent before the session's last request but recorded after it (concurrent calls
            # finishing out of order, a stream dropped unread and recorded at the next call):
            # checked against the baseline before that request when it was sent earlier
            # still, and no baseline for the requests sent after it (reviews 26, 27)
            assert prev_state is not None and rec.start is not None
            earlier = prev_state.before
            if earlier is None or earlier.start is None or earlier.start > rec.start:
                return []
        # once a session wrote 1h entries, they outlive 5m gaps
        ttl_rec, max_rec, idle_rec = self._ttl_for(rec)
        switched = prev_state is None
        if late:
            assert prev_state is not None and prev_state.before is not None
            prev, prev_ttl, prev_max = prev_state.before, prev_state.ttl, prev_state.max_ttl
            idle = prev_state.idle
        elif prev_state is None:
            self._session_model[session] = rec.model
            self._sessions[key] = _Session(rec, ttl_rec, max_rec, idle_rec)
            other = self._sessions.get((session, last_model)) if last_model != rec.model \
                else None
            if other is None:
                return []
            prev, prev_ttl, prev_max, idle = other.last, other.ttl, other.max_ttl, other.idle
        else:
            self._session_model[session] = rec.model
            prev, prev_ttl, prev_max = prev_state.last, prev_state.ttl, prev_state.max_ttl
            idle = prev_state.idle
            # the state now holds this record (updated in place: no new object per record)
            prev_state.before = prev
            prev_state.last, prev_state.ttl = rec, max(prev_ttl, ttl_rec)
            prev_state.max_ttl = max(prev_max, max_rec)
            if idle_rec is not None:
                prev_state.idle = idle_rec
        if _overlaps(prev, rec):
            # sent before the baseline's entry was readable (its first token, else its end):
            # no collapse or regression to judge against it; concurrent cold writes are
            # reported on their own (review 28)
            return []
        gap = None if prev.start is None or rec.start is None else rec.start - prev.start
        if rec.cache_read == 0 and ((prev.cache_read or 0) > 0 or (prev.writes or 0) > 0):
            cause = classify_collapse(prev, rec, prev_ttl, max_ttl=prev_max)
            data: dict[str, Any] = {"session": rec.session, "gap_seconds": gap,
                                    "ttl_seconds": prev_ttl, "cause": cause,
                                    "previous_read": prev.cache_read}
            if prev_max > prev_ttl:
                data["max_idle_seconds"] = prev_max
            why: str = cause
            if (cause == "ttl_expired" and gap is not None and prev_max > prev_ttl
                    and gap <= prev_max):
                data.update(level="warning", ttl_is="usual idle clearing")
                why = _likely_expiry(gap, prev_ttl, prev_max, idle)
            if idle is not None:
                data["retention"] = idle.retention
            if switched:
                data["previous_model"] = prev.model
            return [UsageEvent(
                "collapse", f"session {rec.session!r}{_rid(rec)}: cache reads dropped to 0 "
                f"({why})", rec, data,
            )]
        if switched:
            # a model new to the session reads only what requests to that model wrote (caches
            # are per model): another model's read and write set no expected read (review 26:
            # a summariser on Haiku reading a shared prompt was a prefix_regression against
            # the Sonnet chat's read)
            return []
        if gap is not None and gap > prev_ttl:
            # past the TTL, or past the usual idle clearing (OpenAI before GPT-5.6): a
            # shortfall there may be the clearing, so it is no evidence of a regression
            return []
        reg = check_append_only(prev, rec)
        if reg is None:
            return []
        data = {"session": rec.session, "gap_seconds": gap, "ttl_seconds": prev_ttl}
        return [UsageEvent(
            "prefix_regression",
            f"session {rec.session!r}{_rid(rec)}: read {reg.observed_read} tokens, expected at least "
            f"{reg.expected_min_read} (read[n-1] + creation[n-1]); shortfall {reg.shortfall}",
            rec, {**data, "expected_min_read": reg.expected_min_read,
                  "observed_read": reg.observed_read, "shortfall": reg.shortfall},
        )]

    def _check_cold_write(self, rec: UsageRecord, cost: Cost | None) -> list[UsageEvent]:
        writes = rec.writes
        if not writes or rec.cache_read != 0:
            return []
        keys = _cold_keys(rec)
        mine = set(keys)
        # the group, among those this write overlaps in time, with the longest shared prefix
        best: tuple[int, ColdWriteGroup, tuple[str, ...]] | None = None
        seen: set[int] = set()
        for h in keys:
            for group in self._cold.get((rec.model, h), ()):
                if id(group) in seen:
                    continue
                seen.add(id(group))
                shared = tuple(x for x in group.shared_hashes if x in mine)
                if not shared or not any(_overlaps(o, rec) for o in group.records):
                    continue
                rank = keys.index(shared[-1])
                if best is None or rank > best[0]:
                    best = (rank, group, shared)
        # least recently written last: the bound below drops the prefix written longest ago
        lists = []
        for h in keys:
            groups = self._cold.pop((rec.model, h), None) or []
            self._cold[(rec.model, h)] = groups
            lists.append(groups)
        if best is not None:
            _, group, shared = best
            group.records.append(rec)
            if shared != group.shared_hashes:  # a shorter shared prefix: recount the waste
                group.shared_hashes, group.key = shared, shared[-1]
                group.wasted_usd = Decimal(0)
                for other in group.records[1:]:
                    other_cost = cost if other is rec else self.cost_of(other)
                    group.wasted_usd = _plus(group.wasted_usd,
                                             self._wasted(other, other_cost, group.key))
            else:
                group.wasted_usd = _plus(group.wasted_usd, self._wasted(rec, cost, group.key))
            n = group.writes
            if n & (n - 1):  # reported at 2, 4, 8...: the count as it grows, not n-1 lines
                return []
            return [UsageEvent(
                "concurrent_cold_writes", group.message(so_far=n > 2), rec,
                {"key": group.key, "group": group, "writes": n,
                 "redundant_write_tokens": group.redundant_write_tokens,
                 "wasted_usd": group.wasted_usd},
            )]
        new = ColdWriteGroup(rec.model, keys[-1], [rec], shared_hashes=keys)
        for groups in lists:
            groups.append(new)
            if len(groups) > 64:
                del groups[0]
        if not self._keep:
            while len(self._cold) > COLD_PREFIXES_KEPT:  # only recent writes can overlap a new one
                del self._cold[next(iter(self._cold))]
        return []

    def _wasted(self, rec: UsageRecord, cost: Cost | None, key: str) -> Decimal | None:
        """What writing the tokens of prefix ``key`` again cost ``rec`` beyond reading them
        (USD): the write cost of those tokens minus their read cost, both priced on a copy
        with the same input total (so the same prompt-length tier). 1-hour writes are taken
        first (an Anthropic request's 1 h entries come before its 5 min ones)."""
        if cost is None or cost.cache_write is None:
            return None
        writes = rec.writes or 0
        tokens = _shared_tokens(rec, key)
        rest = writes - tokens
        uncached = None if rec.uncached_input is None else rec.uncached_input + rest
        w5, w1 = rec.cache_write_5m, rec.cache_write_1h
        split: dict[str, int | None] = {"cache_write_5m": None, "cache_write_1h": None}
        if w5 is not None and w1 is not None:
            split["cache_write_1h"] = min(tokens, w1)
            split["cache_write_5m"] = tokens - min(tokens, w1)
        if rest:
            as_write = rec.model_copy(update={"cache_write": tokens, "uncached_input": uncached,
                                              **split})
            write_cost = self.cost_of(as_write)
            if write_cost is None or write_cost.cache_write is None:
                return None
            written = write_cost.cache_write
        else:
            written = cost.cache_write
        as_read = rec.model_copy(update={
            "cache_read": tokens, "cache_write": 0, "cache_write_5m": None,
            "cache_write_1h": None, "uncached_input": uncached,
        })
        read_cost = self.cost_of(as_read)
        if read_cost is None or read_cost.cache_read is None:
            return None
        return written - read_cost.cache_read

    # ------------------------------------------------------------------ results

    def summary(self) -> UsageSummary:
        """Totals over every record."""
        if BEFORE_READ:
            _before_read()
        with self._lock:
            return self._total.snapshot(("total",))

    def _by(self, name: str) -> dict[tuple[str | None, ...], UsageSummary]:
        if BEFORE_READ:
            _before_read()
        with self._lock:
            return {key: acc.snapshot(key) for key, acc in self._groups[name].items()}

    def by_label(self) -> dict[str | None, UsageSummary]:
        """Summaries keyed by label."""
        return {k[0]: v for k, v in self._by("label").items()}

    def by_model(self) -> dict[str | None, UsageSummary]:
        """Summaries keyed by model."""
        return {k[0]: v for k, v in self._by("model").items()}

    def by_session(self) -> dict[str | None, UsageSummary]:
        """Summaries keyed by session (records without a session are left out)."""
        return {k[0]: v for k, v in self._by("session").items()}

    def by_label_model(self) -> dict[tuple[str | None, str | None], UsageSummary]:
        """Summaries keyed by (label, model)."""
        return {(k[0], k[1]): v for k, v in self._by("label_model").items()}

    @property
    def records(self) -> list[UsageRecord]:
        """Every record added (empty with ``keep_records=False``)."""
        if BEFORE_READ:
            _before_read()
        with self._lock:
            return list(self._records)

    @property
    def costs(self) -> list[Cost | None]:
        """The cost of each record in :attr:`records` (same order)."""
        if BEFORE_READ:
            _before_read()
        with self._lock:
            return list(self._costs)

    @property
    def events(self) -> list[UsageEvent]:
        """Every event raised so far, in order (the newest :data:`EVENTS_KEPT` with
        ``keep_records=False``)."""
        if BEFORE_READ:
            _before_read()
        with self._lock:
            return list(self._events)

    def cold_write_groups(self) -> list[ColdWriteGroup]:
        """Groups of concurrent cold writes with at least two writes, each once, by the start
        of their first write."""
        if BEFORE_READ:
            _before_read()
        with self._lock:
            found = {id(g): g for groups in self._cold.values() for g in groups if g.writes >= 2}
        return sorted(found.values(), key=lambda g: g.records[0].start or 0.0)


#: A record's cache lifetime for the session checks: (ttl, max_ttl, idle bounds or None), s.
_Lifetime = tuple[float, float, Any]


def _policy_lifetime(pol: Any, retention: str | None = None) -> _Lifetime | None:
    """The lifetime a catalog policy gives an entry whose request sent ``retention`` (its
    ``prompt_cache_retention``; None: not sent or unknown, the model's default): its idle
    bounds for that retention (``idle_bounds(retention)``: usual clearing, certain bound; the
    usual one is the certain one when there is none, ``24h``), else its ``default_ttl``
    (certain); None when it has neither (or no policy)."""
    if pol is None:
        return None
    idle_bounds = getattr(pol, "idle_bounds", None)
    idle = idle_bounds(retention) if idle_bounds is not None else None
    if idle is not None:
        usual = idle.usual_s if idle.usual_s is not None else idle.max_s
        return (float(usual), float(idle.max_s), idle)
    if pol.default_ttl:
        try:
            ttl = ttl_seconds(pol.default_ttl)
        except ValueError:
            return None
        return (ttl, ttl, None)
    return None


def _likely_expiry(gap: float, usual: float, max_s: float, idle: Any) -> str:
    """The collapse message's cause for a gap between the usual idle clearing and the certain
    bound: an expiry is likely, not certain (hosted-api-rules.md 2.1-2.2)."""
    text = (f"ttl_expired, likely but not certain: the gap ({gap:,.0f} s) is past the usual "
            f"idle clearing ({usual:,.0f} s) but within the {max_s:,.0f} s bound, so a read "
            "was possible")
    if idle is not None and idle.default_unknown:
        text += ("; no prompt_cache_retention is known and this model's default depends on "
                 "the organisation (24h for non-ZDR organisations: a read was likely)")
    return text


def _rid(rec: UsageRecord) -> str:
    return "" if rec.request_id is None else f", request {rec.request_id}"


def _overlaps(one: UsageRecord, other: UsageRecord) -> bool:
    """Whether the later-started of two requests was sent before the earlier one's write was
    readable (its first token, else its end; with neither, only equal start times overlap)."""
    if one.start is None or other.start is None:
        return False
    first, second = (one, other) if one.start <= other.start else (other, one)
    assert first.start is not None and second.start is not None
    ready = first.first_token if first.first_token is not None else first.end
    if ready is None:
        return second.start == first.start
    return second.start < ready
