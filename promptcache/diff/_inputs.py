"""Reading the observed side: usage objects, provider diagnostics, timestamps, prices.

Usage goes through :func:`promptcache.usage.parse.parse_usage` (the usage tracker's parser) behind
one private function, :func:`read_usage`, so the diff does not depend on the parser's
internals. Diagnostics follow the providers' documented shapes:

* Anthropic (beta ``cache-diagnosis-2026-04-07``): ``diagnostics.cache_miss_reason`` is
  ``null`` while pending, else ``{"type": model_changed | system_changed | tools_changed |
  messages_changed | previous_message_not_found | unavailable, "cache_missed_input_tokens": N}``
  (https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics).
* OpenAI (Responses API, GPT-5.6+): ``prompt_cache_diagnostics`` is ``{"type": cache_hit |
  cache_miss | comparison_response_not_found | unavailable, "reason": ..., "cache_missed_tokens":
  N, "comparison_reusable_tokens": M}`` with reasons model_changed, prompt_cache_key_changed,
  tools_changed, text_format_changed, reasoning_effort_changed, verbosity_changed,
  context_compacted, input_changed, service_tier_changed
  (https://developers.openai.com/api/docs/guides/prompt-caching/diagnostics).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from promptcache._errors import PromptCacheError
from promptcache._times import _EPOCH_FLOOR, _MAX_SECONDS, parse_timestamp

__all__ = [
    "Prices",
    "RawDiagnostics",
    "parse_diagnostics",
    "parse_timestamp",
    "read_prices",
    "read_usage",
    "writes_known",
]


@dataclass(frozen=True, slots=True)
class Usage:
    """Observed input buckets (tokens; None = not reported)."""

    cache_read: int | None
    cache_write: int | None
    uncached_input: int | None
    total_input: int | None
    #: False when ``cache_write`` is 0 only because the usage carried no write count (an
    #: OpenAI usage read without knowing whether the model has a write category).
    write_reported: bool = True


def read_usage(obj: Any, family: str, *, write_category: bool | None = None) -> Usage | None:
    """Parse a usage object (or a whole response) into read / write / uncached tokens.

    Args:
        obj: an Anthropic or OpenAI usage dict, response dict (a mapping holding a ``usage``
            mapping, e.g. ``response.model_dump()``), SDK object, or an existing
            ``UsageRecord``; None gives None.
        family: ``"anthropic"`` or ``"openai"`` (the request's provider family).
        write_category: OpenAI only: whether the model bills cache writes (GPT-5.6+, catalog
            ``explicit_breakpoints``; ``cache_write_tokens`` is optional there, absent off the
            Standard tier, hosted-api-rules.md 2.4). True: a missing write count stays None
            (unknown; the uncached input, which then holds the writes, is None too). False:
            it is 0 (no write category before GPT-5.6: writes are billed as input). None
            (not known): 0, with :attr:`Usage.write_reported` False so a caller that learns
            the model can undo it (:func:`writes_known`).

    Returns:
        The observed buckets, or None when ``obj`` is None.

    Raises:
        PromptCacheError: ``obj`` carries no recognisable usage.
    """
    if obj is None:
        return None
    try:
        from promptcache.usage.parse import parse_usage
        from promptcache.usage.record import UsageRecord
    except ImportError:  # the usage package is optional here: fall back to the two shapes
        return _fallback_usage(obj)

    if isinstance(obj, UsageRecord):
        rec = obj
    else:
        provider = "anthropic" if family == "anthropic" else None
        if isinstance(obj, Mapping) and family != "anthropic":
            # a whole response (a dict, e.g. model_dump()) holds its usage under "usage"
            inner = obj.get("usage")
            shape = inner if isinstance(inner, Mapping) else obj
            provider = "openai-responses" if "input_tokens" in shape else "openai"
        try:
            rec = parse_usage(obj, provider=provider)
        except PromptCacheError:
            raise
        except (ValueError, TypeError, KeyError) as exc:
            raise PromptCacheError(f"usage: {exc}") from None
    writes = rec.writes
    if writes is None and family != "anthropic" and rec.cache_read is not None:
        if write_category:  # GPT-5.6+: the count is optional; missing is unknown, not 0
            return Usage(rec.cache_read, None, None, rec.total_input, write_reported=False)
        # OpenAI before GPT-5.6 has no write category: writes are billed as input
        return Usage(rec.cache_read, 0, rec.uncached_input, rec.total_input,
                     write_reported=write_category is not None)
    return Usage(rec.cache_read, writes, rec.uncached_input, rec.total_input)


def writes_known(usage: Usage | None, write_category: bool) -> Usage | None:
    """``usage`` with a write count that was 0 only for want of a field set back to None
    (with the uncached input, which holds the writes) when the model has a write category
    (``write_category``: OpenAI GPT-5.6+); else ``usage`` unchanged."""
    if usage is None or usage.write_reported or not write_category:
        return usage
    return Usage(usage.cache_read, None, None, usage.total_input, write_reported=False)


def _fallback_usage(obj: Any) -> Usage:
    """Anthropic / OpenAI usage dicts, used only when promptcache.usage cannot be imported."""
    if isinstance(obj, Mapping) and isinstance(obj.get("usage"), Mapping):
        obj = obj["usage"]
    if not isinstance(obj, Mapping):
        raise PromptCacheError("usage: not an object")
    if "cache_read_input_tokens" in obj or "cache_creation_input_tokens" in obj:
        read = _int_or_none(obj.get("cache_read_input_tokens"))
        write = _int_or_none(obj.get("cache_creation_input_tokens"))
        uncached = _int_or_none(obj.get("input_tokens"))
        total = None if None in (read, write, uncached) else \
            (read or 0) + (write or 0) + (uncached or 0)
        return Usage(read, write, uncached, total)
    details = obj.get("prompt_tokens_details") or obj.get("input_tokens_details")
    total = _int_or_none(obj.get("prompt_tokens", obj.get("input_tokens")))
    if total is None:
        raise PromptCacheError("usage: no recognisable input token counts")
    read = _int_or_none(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    write = _int_or_none(details.get("cache_write_tokens")) if isinstance(details, Mapping) \
        else None
    if read is None:
        return Usage(None, None, None, total)
    write = write or 0
    return Usage(read, write, max(0, total - read - write), total)


@dataclass(frozen=True, slots=True)
class RawDiagnostics:
    """A provider's own cache diagnosis of one response.

    Attributes:
        provider: ``"anthropic"`` or ``"openai"``.
        reason: the reason type (``"tools_changed"``, ``"cache_hit"``, ``"pending"``...).
        missed_tokens: tokens the provider says missed (None when not given).
        reusable_tokens: OpenAI's ``comparison_reusable_tokens``.
    """

    provider: str
    reason: str
    missed_tokens: int | None = None
    reusable_tokens: int | None = None


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def parse_diagnostics(obj: Any) -> RawDiagnostics | None:
    """Find and parse provider diagnostics in a response, log line or diagnostics object.

    Accepts ``{"diagnostics": {...}}`` (Anthropic), ``{"prompt_cache_diagnostics": {...}}``
    (OpenAI), a ``{"response": {...}}`` wrapper around either, or the inner objects
    themselves. Returns None when nothing is found.
    """
    if not isinstance(obj, Mapping):
        return None
    for key in ("response",):
        inner = obj.get(key)
        if isinstance(inner, Mapping):
            found = parse_diagnostics(inner)
            if found is not None:
                return found
    oa = obj.get("prompt_cache_diagnostics")
    if isinstance(oa, Mapping):
        return _openai_diag(oa)
    an = obj.get("diagnostics")
    if isinstance(an, Mapping):
        if "cache_miss_reason" in an:
            return _anthropic_diag(an)
        if "type" in an:
            return _openai_diag(an) if "cache" in str(an.get("type")) else None
    if "cache_miss_reason" in obj:
        return _anthropic_diag(obj)
    if obj.get("type") in ("cache_hit", "cache_miss", "comparison_response_not_found"):
        return _openai_diag(obj)
    return None


def _anthropic_diag(d: Mapping[str, Any]) -> RawDiagnostics:
    reason = d.get("cache_miss_reason")
    if not isinstance(reason, Mapping):
        return RawDiagnostics("anthropic", "pending")
    return RawDiagnostics("anthropic", str(reason.get("type", "unknown")),
                          _int_or_none(reason.get("cache_missed_input_tokens")))


def _openai_diag(d: Mapping[str, Any]) -> RawDiagnostics:
    kind = str(d.get("type", "unknown"))
    reason = str(d.get("reason")) if kind == "cache_miss" and d.get("reason") else kind
    return RawDiagnostics("openai", reason, _int_or_none(d.get("cache_missed_tokens")),
                          _int_or_none(d.get("comparison_reusable_tokens")))


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per million tokens (None = unknown); ``source`` keeps the catalog's
    ``ModelPrices`` so prompt-length tiers (Haiku 5.5 above 100K, OpenAI above 272K) apply."""

    input: float | None
    cache_read: float | None
    cache_write_5m: float | None
    cache_write_1h: float | None
    cache_write: float | None
    source: Any = None

    def for_prompt(self, prompt_tokens: int) -> Prices:
        """The flat prices of one request of ``prompt_tokens`` tokens (tiers applied)."""
        tiers = getattr(self.source, "tiers", None) if self.source is not None else None
        if not tiers or all(prompt_tokens <= getattr(t, "above_tokens", 0) for t in tiers):
            return self  # below every tier: the base prices (no model rebuilt per request)
        try:
            flat = self.source.for_prompt(max(0, prompt_tokens))
        except (ValueError, AttributeError):
            return self
        return _prices_from(flat) or self

    def write_rate(self, ttl: str | None) -> float | None:
        """USD/MTok of a cache write with ``ttl`` (Anthropic 5m/1h; OpenAI one rate)."""
        if ttl == "1h" and self.cache_write_1h is not None:
            return self.cache_write_1h
        if ttl in ("5m", None) and self.cache_write_5m is not None:
            return self.cache_write_5m
        if self.cache_write is not None:
            return self.cache_write
        return self.cache_write_5m


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float, Decimal)):
        return float(value)
    return None


def read_prices(model: str | None, override: Any = None, *,
                at: float | None = None) -> Prices | None:
    """Prices for ``model``: ``override`` (a mapping or an object with the same fields) wins,
    else ``promptcache.catalog.get_prices`` at the request time ``at``; None when unknown.

    Args:
        model: the model id.
        override: USD per MTok for every model (ignores ``at``).
        at: the request's send time in seconds since the epoch; the price row in force then
            is used (the catalog has dated rows, e.g. Claude Sonnet 5.5's read price change on
            2026-10-07). None, or a relative time (under 1e9 s: a log that starts at 0), prices
            at today's rows.
    """
    src: Any = override
    if src is None:
        if not model:
            return None
        try:
            from promptcache.catalog import get_prices
        except ImportError:
            return None
        when = None
        if at is not None and _EPOCH_FLOOR <= at < _MAX_SECONDS:
            when = datetime.fromtimestamp(at, tz=UTC)
        try:
            src = get_prices(model, at=when)
        except (PromptCacheError, KeyError, ValueError, LookupError):
            return None

    return _prices_from(src)


def _prices_from(src: Any) -> Prices | None:
    def field(name: str) -> float | None:
        if isinstance(src, Mapping):
            return _num(src.get(name))
        return _num(getattr(src, name, None))

    prices = Prices(field("input"), field("cache_read"), field("cache_write_5m"),
                    field("cache_write_1h"), field("cache_write"),
                    None if isinstance(src, Mapping) else src)
    if prices.input is None:
        return None
    return prices
