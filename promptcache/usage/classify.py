"""Diagnoses over usage records: OpenAI hit classes, append-only checks, collapse causes.

Pure functions; :class:`promptcache.usage.tracker.UsageTracker` calls them as records arrive.

* :func:`classify_openai` (case BR-15): OpenAI caches automatically from
  ``min_cacheable_tokens`` (1,024) in ``cache_step_tokens`` (128) steps, so a request whose
  identical prefix is ``p`` tokens can read at most ``1024 + 128*floor((p-1024)/128)``. Anything
  within that rounding is a full hit; a ``cached_tokens`` that is neither 0 nor on that grid is
  *anomalous* for first-party models (flagged, not an error: compatible servers use other
  granularities). https://developers.openai.com/api/docs/guides/prompt-caching
* :func:`classify_anthropic` (case BR-14): Anthropic writes only at a breakpoint whose prefix
  (tools + system + messages up to it) reaches the model's ``min_cacheable_tokens``; below it
  the request is silently uncached (``cache_read_input_tokens`` and
  ``cache_creation_input_tokens`` both 0, no error). A response with neither a read nor a write
  whose prefix at the breakpoint (or, when that is unknown, whose whole prompt) is below the
  minimum is ``not_cacheable_below_minimum``: a model limit, not a prefix break.
  https://platform.claude.com/docs/en/build-with-claude/prompt-caching
* :func:`diagnose_hit_pattern` (case BR-24): over requests that share one prefix, hits that are
  either near-full or zero, with zeros *after* the prefix was first cached, are **bimodal**:
  the content is byte-stable and the cache holds it, but only some requests reach a machine
  that holds it. The diagnosis is ``routing`` (cache affinity), not a content change: send a
  stable ``prompt_cache_key`` (OpenAI) or route by prefix.
* :func:`check_append_only` (case BR-18): in an append-only conversation within the TTL, each
  request reads at least what the previous one read plus what it wrote:
  ``read[n] >= read[n-1] + creation[n-1]``. Applies to providers that report writes (Anthropic,
  Bedrock, OpenAI GPT-5.6+); a shortfall is a ``prefix_regression`` (history edited, lookback
  exceeded...).
* :func:`classify_collapse`: a session whose reads drop to 0 is ``ttl_expired`` when the gap
  between request starts exceeds the TTL (Anthropic measures the TTL from request start; for
  OpenAI's idle lifetime, past the certain bound, or past the usual clearing as the likely
  cause when nothing else explains it),
  ``prefix_changed`` when the request no longer holds the prefix the previous one cached (the
  wrapper's ``kept_prefix``; without it, different prefix fingerprints), else ``unknown``
  (eviction, routing). A growing conversation that keeps its history is never
  ``prefix_changed``, although its last breakpoint (and so its ``prefix_hash``) moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from promptcache.usage.record import UsageRecord

__all__ = [
    "AnthropicHit",
    "CollapseCause",
    "HitPattern",
    "OpenAIHit",
    "Regression",
    "check_append_only",
    "classify_anthropic",
    "classify_collapse",
    "classify_openai",
    "diagnose_hit_pattern",
    "minimum_cacheable_tokens",
    "predicted_openai_cached",
    "ttl_seconds",
]

CollapseCause = Literal["ttl_expired", "prefix_changed", "unknown"]
OpenAIClass = Literal[
    "not_cacheable_below_minimum", "full_hit", "partial_hit", "miss", "anomalous", "unknown"
]

AnthropicClass = Literal[
    "not_cacheable_below_minimum", "hit", "hit_and_write", "write", "no_cache_activity",
    "unknown",
]

PatternName = Literal["bimodal", "steady", "partial", "never", "unknown"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def ttl_seconds(ttl: str) -> float:
    """``"5m"`` -> 300.0, ``"1h"`` -> 3600.0, ``"30m"``, ``"24h"``... (seconds).

    Raises:
        ValueError: not a number followed by s/m/h/d.
    """
    ttl = ttl.strip()
    if len(ttl) < 2 or ttl[-1] not in _UNITS:
        raise ValueError(f"not a TTL: {ttl!r} (expected e.g. '5m', '1h')")
    try:
        return float(ttl[:-1]) * _UNITS[ttl[-1]]
    except ValueError:
        raise ValueError(f"not a TTL: {ttl!r} (expected e.g. '5m', '1h')") from None


def minimum_cacheable_tokens(record: UsageRecord) -> int | None:
    """The shortest prompt (tokens) ``record``'s model caches: the catalog's
    ``min_cacheable_tokens``; for an OpenAI-format record without a model, OpenAI's 1,024
    (the default :func:`classify_openai` uses; source: ../shared/reference/hosted-api-rules.md
    2.1); None for a model the catalog does not know. Never raises for an unknown model
    (``promptcache.catalog.find_policy``)."""
    from promptcache.catalog import find_policy  # local: the catalog loads TOML on first use

    pol = find_policy(record.model)
    if pol is not None:
        return int(pol.min_cacheable_tokens or 0) or None
    if record.model is None and record.provider in ("openai", "openai-responses"):
        return 1024
    return None


def predicted_openai_cached(identical_prefix_tokens: int, *, minimum: int = 1024,
                            step: int = 128) -> int:
    """Most tokens OpenAI can read for a prefix of ``identical_prefix_tokens`` tokens (tokens)."""
    if identical_prefix_tokens < minimum:
        return 0
    return minimum + step * ((identical_prefix_tokens - minimum) // step)


@dataclass(frozen=True)
class OpenAIHit:
    """Result of :func:`classify_openai`.

    Attributes:
        classification: ``not_cacheable_below_minimum`` | ``full_hit`` | ``partial_hit`` |
            ``miss`` | ``anomalous`` | ``unknown``.
        cached: the reported ``cached_tokens`` (tokens).
        predicted: most cacheable tokens given the identical prefix (tokens), if known.
        hit_rate: ``cached / prompt tokens`` of this response.
        detail: one sentence.
    """

    classification: OpenAIClass
    cached: int | None
    predicted: int | None
    hit_rate: float | None
    detail: str


def classify_openai(
    record: UsageRecord,
    identical_prefix_tokens: int | None = None,
    *,
    minimum: int = 1024,
    step: int = 128,
) -> OpenAIHit:
    """Classify one OpenAI response's cache outcome (case BR-15).

    Args:
        record: the parsed response.
        identical_prefix_tokens: tokens this request shares with the previous one (from a diff),
            when known.
        minimum: ``CachePolicy.min_cacheable_tokens`` (1,024 for OpenAI).
        step: ``CachePolicy.cache_step_tokens`` (128 for OpenAI).
    """
    cached, total, rate = record.cache_read, record.total_input, record.hit_rate
    if cached is None or total is None:
        return OpenAIHit("unknown", cached, None, rate, "cached_tokens not reported")
    if cached != 0 and (cached < minimum or (cached - minimum) % step != 0):
        return OpenAIHit(
            "anomalous", cached, None, rate,
            f"cached_tokens {cached} is neither 0 nor {minimum} + a multiple of {step}: "
            "unexpected for first-party OpenAI models (compatible servers may use other steps)",
        )
    bound = total if identical_prefix_tokens is None else min(identical_prefix_tokens, total)
    if bound < minimum:
        return OpenAIHit(
            "not_cacheable_below_minimum", cached, 0, rate,
            f"shared prefix {bound} tokens < minimum {minimum}: nothing can be cached",
        )
    if identical_prefix_tokens is None:
        cls: OpenAIClass = "miss" if cached == 0 else "unknown"
        return OpenAIHit(cls, cached, None, rate, "identical prefix length unknown")
    predicted = predicted_openai_cached(bound, minimum=minimum, step=step)
    if cached >= predicted:
        return OpenAIHit(
            "full_hit", cached, predicted, rate,
            f"{bound} identical tokens round down to {predicted}: the uncached rest is granularity",
        )
    if cached == 0:
        return OpenAIHit("miss", cached, predicted, rate,
                         f"expected up to {predicted} cached tokens, got 0 (routing or eviction)")
    return OpenAIHit("partial_hit", cached, predicted, rate,
                     f"expected {predicted} cached tokens, got {cached}")


@dataclass(frozen=True)
class AnthropicHit:
    """Result of :func:`classify_anthropic`.

    Attributes:
        classification: ``not_cacheable_below_minimum`` (no read, no write, prefix below the
            model's minimum) | ``hit`` (read, no write) | ``hit_and_write`` (read and wrote the
            new tail) | ``write`` (wrote, read nothing: cold start or a prefix break) |
            ``no_cache_activity`` (no read, no write, prefix long enough: no breakpoint, or
            the lookback found no entry) | ``unknown`` (a count not reported).
        cache_read: ``cache_read_input_tokens`` (tokens).
        cache_write: ``cache_creation_input_tokens`` (tokens).
        prefix_tokens: tokens up to the last breakpoint if given, else the whole prompt.
        minimum: the model's ``min_cacheable_tokens`` (tokens).
        hit_rate: ``cache_read / total input`` of this response.
        detail: one sentence.
    """

    classification: AnthropicClass
    cache_read: int | None
    cache_write: int | None
    prefix_tokens: int | None
    minimum: int
    hit_rate: float | None
    detail: str


def classify_anthropic(
    record: UsageRecord,
    breakpoint_prefix_tokens: int | None = None,
    *,
    minimum: int,
) -> AnthropicHit:
    """Classify one Anthropic (or Bedrock Claude) response's cache outcome (case BR-14).

    Args:
        record: the parsed response.
        breakpoint_prefix_tokens: tokens of the prefix up to the request's last breakpoint
            (tools + system + messages; e.g. from the linter or the planner), when known; else
            the whole prompt (``record.total_input``) bounds it.
        minimum: ``CachePolicy.min_cacheable_tokens`` of the model (e.g. 2,048 for
            claude-3-5-haiku, 4,096 for claude-haiku-4-5, 1,024 for claude-sonnet-4-5).

    Returns:
        An :class:`AnthropicHit` (counts in tokens). Raises nothing: a count the response
        does not report gives ``unknown``.

    Source of the rule (a prefix under the model's minimum is neither read nor written, and
    the response reports no error): https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """
    read, write, rate = record.cache_read, record.writes, record.hit_rate
    total = record.total_input
    prefix = breakpoint_prefix_tokens if breakpoint_prefix_tokens is not None else total

    def hit(cls: AnthropicClass, detail: str) -> AnthropicHit:
        return AnthropicHit(cls, read, write, prefix, minimum, rate, detail)

    if read is None or write is None:
        return hit("unknown", "cache_read_input_tokens or cache_creation_input_tokens missing")
    if read and write:
        return hit("hit_and_write", f"read {read} cached tokens and wrote {write} new ones")
    if read:
        return hit("hit", f"read {read} cached tokens")
    if write:
        return hit("write", f"wrote {write} tokens and read none: a cold start or a prefix break")
    if prefix is not None and prefix < minimum:
        return hit(
            "not_cacheable_below_minimum",
            f"prefix of {prefix} tokens < the model's minimum of {minimum}: nothing is written "
            "or read, and no error is returned (not a prefix break)",
        )
    return hit("no_cache_activity",
               "neither read nor wrote although the prompt reaches the minimum: no breakpoint, "
               "or none of its prefix was cached")


@dataclass(frozen=True)
class HitPattern:
    """Result of :func:`diagnose_hit_pattern` over requests that share one prefix.

    Attributes:
        pattern: ``bimodal`` (every hit near-full or zero, zeros after the first hit) |
            ``steady`` (every request after the first hit hits) | ``partial`` (partial hits:
            the prefix changes part-way, or eviction) | ``never`` (no hit at all) |
            ``unknown`` (fewer than ``min_requests`` with known counts).
        diagnosis: ``"routing"`` for a bimodal pattern (cache affinity, not content), else
            ``None``.
        requests: requests with known read and input counts.
        hits: requests that read anything.
        misses_after_first_hit: requests that read (almost) nothing after one had read.
        request_hit_fraction: ``hits / requests``.
        token_hit_rate: cached tokens / input tokens (a ratio of sums).
        detail: one sentence.
    """

    pattern: PatternName
    diagnosis: str | None
    requests: int
    hits: int
    misses_after_first_hit: int
    request_hit_fraction: float | None
    token_hit_rate: float | None
    detail: str


def diagnose_hit_pattern(
    records: Sequence[UsageRecord],
    *,
    low: float = 0.05,
    high: float = 0.75,
    min_requests: int = 4,
) -> HitPattern:
    """Tell routing misses from content misses over requests that share one prefix (BR-24).

    Args:
        records: responses to requests whose cacheable prefix is identical (the caller groups
            them: same ``prefix_hash``, or the linter's prefix group), in send order.
        low: a request whose hit rate is at most this read "nothing".
        high: a request whose hit rate is at least this read "(nearly) everything" (OpenAI
            rounds reads down to 128-token steps, so a full hit can be below 1.0).
        min_requests: fewer requests with known counts give ``unknown``.

    Returns:
        A :class:`HitPattern` (counts in requests and tokens; rates are ratios of sums).
        Raises nothing: too few known counts give ``unknown``.

    Why bimodal means routing: OpenAI routes a request by a hash of its prefix (plus
    ``prompt_cache_key``) to a machine that may hold the cache, and overflows to other
    machines above about 15 requests/min per prefix + key, so identical prefixes that read
    all or nothing landed on different machines
    (https://developers.openai.com/api/docs/guides/prompt-caching).
    """
    known = [r for r in records if r.hit_rate is not None and r.cache_read is not None]
    n = len(known)
    reads = sum(r.cache_read or 0 for r in known)
    total = sum(r.total_input or 0 for r in known)
    hits = sum(1 for r in known if r.cache_read)
    fraction = hits / n if n else None
    rate = reads / total if total else None

    def result(pattern: PatternName, diagnosis: str | None, after: int,
               detail: str) -> HitPattern:
        return HitPattern(pattern, diagnosis, n, hits, after, fraction, rate, detail)

    if n < min_requests:
        return result("unknown", None, 0, f"{n} requests with known counts: too few to judge")
    rates = [r.hit_rate or 0.0 for r in known]
    first = next((i for i, x in enumerate(rates) if x > low), None)
    if first is None:
        return result("never", None, 0, "no request read anything from the cache")
    after = sum(1 for x in rates[first + 1:] if x <= low)
    two_modes = all(x <= low or x >= high for x in rates)
    if after == 0 and all(x >= high for x in rates[first:]):
        return result("steady", None, 0, "every request after the first hit read the prefix")
    if two_modes and hits >= 2 and after >= 2:
        return result(
            "bimodal", "routing", after,
            f"bimodal hits with identical prefixes ({hits} of {n} requests near-full, the rest "
            f"zero, {after} zeros after the prefix was cached) -> routing (cache affinity), not "
            "content: requests reach machines that do not hold the prefix",
        )
    return result("partial", None, after,
                  "partial or isolated misses: the prefix changes part-way, or eviction")


@dataclass(frozen=True)
class Regression:
    """A ``prefix_regression`` found by :func:`check_append_only` (tokens)."""

    expected_min_read: int
    observed_read: int

    @property
    def shortfall(self) -> int:
        """``expected_min_read - observed_read`` (tokens)."""
        return self.expected_min_read - self.observed_read


def check_append_only(prev: UsageRecord, cur: UsageRecord) -> Regression | None:
    """``read[n] >= read[n-1] + creation[n-1]`` for consecutive requests of one session.

    Returns ``None`` when it holds or when a count is unknown (the check needs reported writes).
    The caller is responsible for "within the TTL".
    """
    if prev.cache_read is None or prev.writes is None or cur.cache_read is None:
        return None
    expected = prev.cache_read + prev.writes
    if cur.cache_read >= expected:
        return None
    return Regression(expected_min_read=expected, observed_read=cur.cache_read)


def classify_collapse(prev: UsageRecord, cur: UsageRecord, ttl: float, *,
                      max_ttl: float | None = None) -> CollapseCause:
    """Why ``cur`` read nothing although ``prev`` (same session) read or wrote a prefix.

    Args:
        prev: the session's previous record.
        cur: the record whose reads dropped to 0.
        ttl: lifetime of the previous entry in seconds, measured from request start. For an
            entry with an idle lifetime (OpenAI before GPT-5.6,
            :meth:`promptcache.catalog.CachePolicy.idle_bounds`): the *usual* idle clearing
            (``usual_s``), past which a read is possible but no longer likely.
        max_ttl: seconds past which the entry is certainly gone (``max_s`` of the idle
            bounds); None (the default) or a value not above ``ttl``: ``ttl`` is certain.

    Returns:
        ``ttl_expired`` when the gap between the two starts exceeds ``max_ttl`` (certain); else
        ``prefix_changed`` when ``cur`` no longer holds the prefix ``prev`` cached; else
        ``ttl_expired`` when the gap exceeds ``ttl`` (the likely cause, not a certain one:
        the caller says so, see :class:`promptcache.usage.tracker.UsageTracker`); else
        ``unknown`` (eviction, routing, propagation: nothing in the payload explains it).
        Between ``ttl`` and ``max_ttl`` a prefix change (certain: the previous prefix is not
        in the request) is preferred to an uncertain expiry.

    Whether ``cur`` holds ``prev``'s prefix: ``cur.kept_prefix`` when the wrapper set it
    (``True`` never gives ``prefix_changed``). When it is ``None``, a ``prev.prefix_hash`` found
    among ``cur.breakpoint_hashes`` means kept; otherwise two different ``prefix_hash`` values
    mean changed. That last fallback is only right for records whose last breakpoint does not
    move (a growing conversation moves it every turn, so it is used only without the other
    two). Raises nothing.
    """
    certain = ttl if max_ttl is None or max_ttl < ttl else max_ttl
    gap = None if prev.start is None or cur.start is None else cur.start - prev.start
    if gap is not None and gap > certain:
        return "ttl_expired"
    changed = _prefix_changed(prev, cur)
    if changed:
        return "prefix_changed"
    if gap is not None and gap > ttl:
        return "ttl_expired"  # past the usual clearing: likely, not certain
    return "unknown"


def _prefix_changed(prev: UsageRecord, cur: UsageRecord) -> bool:
    """Whether ``cur`` is known to no longer hold the prefix ``prev`` cached
    (:func:`classify_collapse`)."""
    if cur.kept_prefix is not None:
        return cur.kept_prefix is False
    if prev.prefix_hash is not None and prev.prefix_hash in cur.breakpoint_hashes:
        return False  # cur has a breakpoint exactly where prev's prefix ended: kept
    return prev.prefix_hash is not None and cur.prefix_hash is not None and (
        prev.prefix_hash != cur.prefix_hash)
