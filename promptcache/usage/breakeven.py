"""When does caching pay, and which TTL policy is cheapest for a given traffic pattern?

:func:`breakeven` answers "how many requests sharing this prefix within one TTL make caching
cheaper than not caching": the first request writes the prefix (``w`` x input price), the others
read it (``r`` x input price), so ``n`` requests cost ``w + (n-1) r`` prefixes against ``n``
uncached; caching is cheaper from the smallest ``n > (w - r) / (1 - r)``. With Anthropic's 5m
write (1.25x) and 0.1x reads that is 2 requests (one read), with the 1h write (2x) 3 requests
(two reads), as the pricing page states (https://platform.claude.com/docs/en/about-claude/pricing).
Multipliers are the ratios of the prices used (the catalog's dated prices at ``at``, or explicit
``prices=``), so they follow a dated price change as :func:`ttl_policy` does; the catalog's
``CachePolicy.read_multiplier`` / ``write_multiplier(ttl)`` where the catalog's prices lack one.

:func:`ttl_policy` prices ``requests`` requests that arrive every ``inter_arrival_seconds``
under each policy the model offers and returns the cheapest:

* ``none``: no cache markers, every prefix token at the input rate (Anthropic; for OpenAI the
  no-caching baseline);
* one option per TTL in the catalog (``5m``, ``1h``; OpenAI GPT-5.6+ ``30m``): the first request
  writes, the following ones read while the gap is within the TTL (a read refreshes the entry;
  the TTL runs from request start), otherwise every request writes again;
* ``<TTL>+keepalive`` (Aider's approach), one per TTL: when the gap exceeds the TTL, ping every
  ``keepalive_interval`` seconds (default 90 % of that TTL); each ping is priced as one request
  that reads the prefix, sends ``ping_input_tokens`` uncached tokens and gets
  ``ping_output_tokens`` back. ``keepalive_cap_usd`` / ``keepalive_max_pings`` cap the ping
  spend of each option: gaps the budget cannot cover pay a write again. The shortest TTL's
  option is always listed (``5m+keepalive``); a longer TTL's (``1h+keepalive``) when the gap
  exceeds it (within it the option is the plain TTL option, no pings). A gap longer than every
  TTL is cheapest kept alive on the longest TTL: fewer pings per gap;
* OpenAI before GPT-5.6 (automatic caching, no write fee): ``in_memory`` (entries usually cleared
  after 5-10 minutes idle: ``in_memory_seconds``, by default the catalog's usual in-memory idle
  clearing, ``CachePolicy.idle_bounds("in_memory").usual_s``: 300 s, the lower bound of 5-10
  min, source O2 https://developers.openai.com/api/docs/guides/prompt-caching; a planning
  assumption: reads after it are possible, not counted on) and ``24h`` where the catalog lists
  extended retention.

Every request is priced through :func:`promptcache.usage.billing.price_record`, so prompt-length
tiers (Haiku 5.5 above 100K, OpenAI above 272K) and batch pricing apply as in real bills.
A prefix below the model's minimum cacheable length makes every caching option unavailable.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from typing import Any

from promptcache._times import _MAX_SECONDS
from promptcache.usage.billing import PriceTable, price_record
from promptcache.usage.classify import ttl_seconds
from promptcache.usage.record import MAX_TOKENS, UsageRecord

__all__ = ["MAX_REQUESTS", "MAX_SPAN_SECONDS", "BreakEven", "PolicyOption", "TtlPolicy",
           "breakeven", "ttl_policy"]

#: The longest time :func:`ttl_policy` takes (seconds): an interval, a lifetime, or the whole
#: horizon (``(requests - 1) x inter_arrival_seconds``). It is the range of send times a usage
#: record holds (the epoch to the end of the year 9999, ``promptcache._times``), so no two
#: requests are further apart. A plausibility bound, not a provider fact.
MAX_SPAN_SECONDS = _MAX_SECONDS

#: The most requests one :func:`ttl_policy` comparison prices (``requests``, and the keepalive
#: pings of one option): the bound :data:`promptcache.usage.record.MAX_TOKENS` (10**9) puts on
#: any count. Every cost is linear in the request count, so a longer horizon is a multiple of a
#: shorter one. A plausibility bound, not a provider fact.
MAX_REQUESTS = MAX_TOKENS


def _in_memory_lifetime(pol: Any) -> float | None:
    """The usual idle clearing of ``pol``'s in-memory cache entries (seconds; catalog
    ``idle_lifetime``, :meth:`promptcache.catalog.CachePolicy.idle_bounds`), or None when the
    policy gives none (a caller's policy without ``idle_lifetime``)."""
    idle_bounds = getattr(pol, "idle_bounds", None)
    bounds = idle_bounds("in_memory") if callable(idle_bounds) else None
    if bounds is not None and bounds.retention == "in_memory" and bounds.usual_s is not None:
        return float(bounds.usual_s)
    # a model that does not accept in_memory (24h only): the catalog's in-memory row still
    # gives the in-memory lifetime the option is priced for
    table = getattr(pol, "idle_lifetime", None) or {}
    entry = table.get("in_memory") if isinstance(table, dict) else None
    usual = getattr(entry, "usual_seconds", None)
    return None if usual is None else float(usual)


def _catalog() -> tuple[Any, Any]:
    from promptcache.catalog import get_policy, get_prices
    return get_policy, get_prices


def _frac(x: float | Decimal) -> Fraction:
    return Fraction(Decimal(str(x)))


#: Why a token count over :data:`~promptcache.usage.record.MAX_TOKENS` is refused (as
#: ``promptcache report`` refuses such a count in a log).
_TOKENS_WHY = "tokens (MAX_TOKENS: an implausible count, far beyond any model's context window)"
#: Why a request count over :data:`MAX_REQUESTS` is refused.
_REQUESTS_WHY = ("requests (MAX_REQUESTS: every cost is linear in the count, so price a "
                 "shorter horizon and scale it)")


def _count(name: str, value: Any, minimum: int = 0, maximum: int | None = MAX_TOKENS,
           why: str = _TOKENS_WHY) -> int:
    """``value`` as an int count in [``minimum``, ``maximum``] (an integral float such as
    ``5000.0`` is accepted; ``maximum`` defaults to
    :data:`~promptcache.usage.record.MAX_TOKENS`, the bound a usage record puts on a token
    count; None: no upper bound); TypeError naming ``name`` for a non-number (``"5000"``,
    None, bool), ValueError naming it for a fractional, non-finite, too small or too large
    one (``why``: the unit and the reason for ``maximum``)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Decimal)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if isinstance(value, numbers.Integral):
        n = int(value)
    else:
        try:
            exact = Fraction(value if isinstance(value, Decimal) else float(value))
        except (ValueError, OverflowError, TypeError):
            raise ValueError(f"{name} must be a whole number, got {value!r}") from None
        if exact.denominator != 1:
            raise ValueError(f"{name} must be a whole number, got {value!r}")
        n = int(exact)
    if n < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    if maximum is not None and n > maximum:
        raise ValueError(f"{name} must be in [{minimum}, {maximum:,}] {why}, got {value!r}")
    return n


def _seconds(name: str, value: Any) -> float:
    """``value`` as a finite number of seconds in (0, :data:`MAX_SPAN_SECONDS`] (TypeError /
    ValueError naming ``name``)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Decimal)):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__} "
                        f"{value!r}")
    try:
        x = float(value)
    except OverflowError:  # an int or Decimal beyond a float's range
        x = math.inf
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    if x > MAX_SPAN_SECONDS:
        raise ValueError(f"{name} must be in (0, {MAX_SPAN_SECONDS:.0f}] seconds (no two "
                         f"send times are further apart: the epoch to the year 9999), got "
                         f"{value!r}")
    return x


def _usd(name: str, value: Any) -> Decimal:
    """``value`` as a finite USD amount >= 0 (TypeError / ValueError naming ``name``)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Decimal, str)):
        raise TypeError(f"{name} must be a USD amount, got {type(value).__name__} {value!r}")
    try:
        d = Decimal(str(value).strip())
    except ArithmeticError:
        raise ValueError(f"{name} must be a USD amount, got {value!r}") from None
    if not d.is_finite() or d < 0:
        raise ValueError(f"{name} must be a finite USD amount >= 0, got {value!r}")
    return d


@dataclass(frozen=True)
class BreakEven:
    """Result of :func:`breakeven` (money in USD as ``Decimal``, sizes in tokens).

    Attributes:
        model: model id asked for.
        ttl: the TTL priced (``"5m"``, ``"1h"``, ``"30m"``); ``None`` for automatic caching
            without a TTL parameter (OpenAI before GPT-5.6: no write fee, entries kept for an
            unspecified time, usually cleared after 5-10 minutes idle, source O2).
        prefix_tokens: the shared prefix (tokens), as passed.
        requests: smallest number ``n`` of requests sharing the prefix for which caching is
            strictly cheaper than not caching, the first one writing and the ``n - 1`` others
            reading (count). With a TTL they must fall within the TTL (a read refreshes it);
            without one, the others must find the prefix still cached. ``None`` when caching
            never pays (``reason`` says why).
        read_multiplier: price of a cached read relative to the input price (e.g. 0.1): the
            ratio ``cache_read / input`` of the prices used (the catalog's at ``at``, or
            explicit ``prices=``); the catalog's ``CachePolicy.read_multiplier``
            (``promptcache/catalog``) when the catalog's prices give no read price.
        write_multiplier: price of a cache write relative to the input price for ``ttl``
            (Anthropic 1.25 for 5m, 2 for 1h; 1 when writes carry no fee): the write price
            for ``ttl`` / input price, or ``CachePolicy.write_multiplier(ttl)`` when the
            catalog's prices give none for ``ttl``.
        uncached_prefix_usd: one prefix at the input rate: ``prefix_tokens x input / 1e6``
            (USD; input price from :func:`promptcache.catalog.get_prices` at ``at``, or
            ``prices=``; the prompt-length tier of ``prefix_tokens`` applies).
        write_usd: one prefix written: ``uncached_prefix_usd x write_multiplier`` (USD).
        read_usd: one prefix read: ``uncached_prefix_usd x read_multiplier`` (USD).
        reason: why ``requests`` is ``None`` (prefix below the catalog's minimum cacheable
            length, or reads not cheaper than input); ``None`` otherwise.

    Sources: the multipliers and minimums are the catalog's (``promptcache/catalog``, citing
    the providers' pricing pages, e.g. https://platform.claude.com/docs/en/about-claude/pricing
    and https://developers.openai.com/api/docs/guides/prompt-caching).
    """

    model: str
    ttl: str | None
    prefix_tokens: int
    requests: int | None
    read_multiplier: float
    write_multiplier: float
    uncached_prefix_usd: Decimal
    write_usd: Decimal
    read_usd: Decimal
    reason: str | None = None

    def cost_cached(self, n: int) -> Decimal:
        """``n`` requests within one TTL with caching: one write, ``n-1`` reads (USD)."""
        return Decimal(0) if n <= 0 else self.write_usd + (n - 1) * self.read_usd

    def cost_uncached(self, n: int) -> Decimal:
        """``n`` requests without caching (USD)."""
        return n * self.uncached_prefix_usd


def breakeven(
    model: str,
    prefix_tokens: int,
    ttl: str | None = None,
    *,
    prices: PriceTable | None = None,
    policy: Any = None,
    at: datetime | None = None,
    prompt_tokens: int | None = None,
) -> BreakEven:
    """Requests within one TTL from which caching a ``prefix_tokens`` prefix is cheaper.

    ``n`` requests cost ``w + (n - 1) r`` prefixes cached against ``n`` uncached (``w``, ``r``:
    write and read multipliers); the answer is the smallest ``n > (w - r) / (1 - r)``. For a
    model without a TTL (automatic caching, no write fee: ``w = 1``) that is 2: the second
    request that still finds the prefix cached already pays, but nothing guarantees how long
    the provider keeps it.

    Args:
        model: model id (catalog).
        prefix_tokens: tokens of the shared prefix.
        ttl: ``"5m"``/``"1h"`` (Anthropic), ``"30m"`` (OpenAI GPT-5.6+); default: the model's
            default TTL; must be None for models without a TTL parameter.
        prices: explicit prices (multipliers then come from these prices).
        policy: explicit ``CachePolicy`` (models the catalog does not know).
        at: price date (default now).
        prompt_tokens: the whole prompt the prefix is part of (tokens; default
            ``prefix_tokens``): it picks the price tier of a model priced by prompt length
            (Haiku 5.5 above 100K tokens, OpenAI above 272K), as ``ttl_policy`` prices
            ``prefix_tokens + suffix_tokens``. Must be at least ``prefix_tokens``.

    Returns:
        A :class:`BreakEven`: ``requests`` (count, or ``None`` with ``reason``), the
        multipliers and the per-prefix USD amounts (uncached, write, read); see its fields.

    Raises:
        UnknownModelError: model unknown to the catalog (and no ``policy``/``prices``).
        TypeError: ``prefix_tokens`` not a number (e.g. the string ``"5000"``), or ``ttl`` not
            a string.
        ValueError: ``prefix_tokens`` negative, fractional, or over
            :data:`~promptcache.usage.record.MAX_TOKENS` (10**9, an implausible count: the
            bound ``promptcache report`` applies), or a TTL the model does not offer (any TTL
            for a model without one, e.g. ``"1h"`` for gpt-5); the message starts with the
            argument's name.
    """
    prefix_tokens = _count("prefix_tokens", prefix_tokens)
    if prompt_tokens is None:
        prompt_tokens = prefix_tokens
    else:
        prompt_tokens = _count("prompt_tokens", prompt_tokens)
        if prompt_tokens < prefix_tokens:
            raise ValueError(f"prompt_tokens ({prompt_tokens:,}) must be at least "
                             f"prefix_tokens ({prefix_tokens:,}): the prefix is part of it")
    get_policy, get_prices = _catalog()
    pol = get_policy(model, policy=policy)
    table = prices if prices is not None else get_prices(model, at=at)
    flat = _flat(table, prompt_tokens)
    if ttl is not None and not isinstance(ttl, str):
        raise TypeError(f"ttl must be a string such as '5m' or '1h', not {type(ttl).__name__} "
                        f"({ttl!r})")
    if pol.ttls:
        ttl = ttl or pol.default_ttl
        if ttl not in pol.ttls:
            raise ValueError(f"{model}: TTL {ttl!r} not offered (offered: {', '.join(pol.ttls)})")
    elif ttl is not None:  # as the CLI's --ttl: a TTL the model does not take is a mistake
        raise ValueError(f"{model}: caches automatically and takes no TTL (got {ttl!r}): its "
                         "cache lifetime is the provider's, leave ttl unset")
    else:
        ttl = None
    if prices is not None:
        base = _frac(flat.input)
        r = _frac(flat.cache_read) / base if flat.cache_read is not None else Fraction(1)
        wp = _write_price(flat, ttl)
        w = _frac(wp) / base if wp is not None else Fraction(1)
    else:
        # The dated price table's own ratios where it has the price (a read price that changed
        # on a date, as Sonnet 5.5's 0.20 -> 0.10 on 2026-10-07, or a PROMPTCACHE_PRICES
        # override): the undated policy multiplier priced a read at 0.05x before that date
        # while ttl_policy, through price_record, priced it at 0.1x. The policy's otherwise.
        r, w = _frac(pol.read_multiplier), _frac(pol.write_multiplier(ttl))
        if flat.input is not None and flat.input > 0:
            base = _frac(flat.input)
            if flat.cache_read is not None:
                r = _frac(flat.cache_read) / base
            wp = _ttl_write_price(flat, ttl)
            if wp is not None:
                w = _frac(wp) / base
    unit = Decimal(prefix_tokens) * flat.input / Decimal(1_000_000)
    write_usd = unit * Decimal(w.numerator) / Decimal(w.denominator)
    read_usd = unit * Decimal(r.numerator) / Decimal(r.denominator)
    reason: str | None = None
    n: int | None
    if prefix_tokens < pol.min_cacheable_tokens:
        n, reason = None, (f"prefix {prefix_tokens} tokens < minimum {pol.min_cacheable_tokens}: "
                           "nothing is cached")
    elif r >= 1:
        n, reason = None, "reads are not cheaper than uncached input"
    else:
        n = max(1, math.floor((w - r) / (1 - r)) + 1)
    return BreakEven(model, ttl, prefix_tokens, n, float(r), float(w), unit, write_usd, read_usd,
                     reason)


def _flat(table: PriceTable, prompt_tokens: int) -> PriceTable:
    for_prompt = getattr(table, "for_prompt", None)
    tiers = getattr(table, "tiers", None)
    if callable(for_prompt) and tiers:
        result: PriceTable = for_prompt(prompt_tokens)
        return result
    return table


def _ttl_write_price(p: PriceTable, ttl: str | None) -> Decimal | None:
    """The table's write price for exactly ``ttl`` (``5m`` / ``1h``: the split prices; another
    TTL, e.g. OpenAI's ``30m``: ``cache_write``); None when the table has none for it (and for
    no TTL: automatic caching without a write fee)."""
    if ttl == "5m":
        return p.cache_write_5m if p.cache_write_5m is not None else p.cache_write
    if ttl == "1h":
        return p.cache_write_1h
    return None if ttl is None else p.cache_write


def _write_price(p: PriceTable, ttl: str | None) -> Decimal | None:
    if ttl == "1h" and p.cache_write_1h is not None:
        return p.cache_write_1h
    if ttl == "5m" and p.cache_write_5m is not None:
        return p.cache_write_5m
    return p.cache_write if p.cache_write is not None else p.cache_write_5m


# ------------------------------------------------------------------------------- TTL policy


@dataclass(frozen=True)
class PolicyOption:
    """One priced policy in :func:`ttl_policy` (USD over the whole horizon).

    Attributes:
        name: ``none``, ``5m``, ``1h``, ``30m``, ``5m+keepalive``, ``1h+keepalive``,
            ``in_memory``, ``24h``.
        cost: total cost of the ``requests`` requests plus pings (USD).
        writes, reads: requests that wrote / read the prefix.
        pings: keepalive pings sent; ``ping_cost``: their total (USD).
        available: False when the option cannot cache (below the minimum), or when its
            lifetime is unknown (``in_memory`` on a policy without ``idle_lifetime``).
        capped: the keepalive budget ran out before every gap was covered.
        note: one sentence.
    """

    name: str
    cost: Decimal
    writes: int
    reads: int
    pings: int = 0
    ping_cost: Decimal = Decimal(0)
    available: bool = True
    capped: bool = False
    note: str = ""


@dataclass(frozen=True)
class TtlPolicy:
    """Result of :func:`ttl_policy`: the cheapest option and every option priced."""

    model: str
    prefix_tokens: int
    inter_arrival_seconds: float
    requests: int
    best: PolicyOption
    options: tuple[PolicyOption, ...] = field(default=())

    def option(self, name: str) -> PolicyOption:
        """The option called ``name`` (KeyError if absent)."""
        for opt in self.options:
            if opt.name == name:
                return opt
        raise KeyError(name)

    @property
    def savings_vs_none(self) -> Decimal:
        """``none`` cost minus the best cost (USD)."""
        return self.option("none").cost - self.best.cost


def ttl_policy(
    model: str,
    prefix_tokens: int,
    inter_arrival_seconds: float,
    *,
    requests: int = 100,
    suffix_tokens: int = 0,
    output_tokens: int = 0,
    keepalive_interval: float | None = None,
    ping_input_tokens: int = 1,
    ping_output_tokens: int = 1,
    keepalive_cap_usd: Decimal | float | None = None,
    keepalive_max_pings: int | None = None,
    in_memory_seconds: float | None = None,
    batch: bool = False,
    prices: PriceTable | None = None,
    policy: Any = None,
    at: datetime | None = None,
) -> TtlPolicy:
    """Price each caching policy for steady traffic and return the cheapest.

    Args:
        model: model id (catalog).
        prefix_tokens: the shared, cacheable prefix of every request (tokens).
        inter_arrival_seconds: time between request starts (seconds, > 0).
        requests: requests in the horizon (>= 1).
        suffix_tokens, output_tokens: per-request uncached suffix and output (tokens).
        keepalive_interval: seconds between pings (default 90 % of each option's TTL); one
            longer than a TTL makes that TTL's keepalive option unavailable.
        ping_input_tokens, ping_output_tokens: uncached input and output of one ping (tokens).
        keepalive_cap_usd, keepalive_max_pings: spend cap on pings over the horizon.
        in_memory_seconds: assumed OpenAI in-memory retention (seconds); None (the default):
            the policy's usual in-memory idle clearing (``idle_bounds("in_memory").usual_s``,
            catalog ``idle_lifetime``: 300 s for the catalog's models). A ``policy=`` without
            an ``idle_lifetime`` (and no ``in_memory_seconds``) has no known in-memory
            lifetime: its ``in_memory`` option is listed unavailable, with a note saying so,
            rather than priced on a guess.
        batch: price with the batch discount.
        prices, policy, at: as :func:`breakeven`.

    Returns:
        :class:`TtlPolicy`; ties go to the option listed first (``none`` first).

    Raises:
        UnknownModelError: model unknown (and no ``policy``).
        TypeError: an argument of the wrong type (e.g. a token count given as a string); the
            message names it.
        ValueError: an interval or ``in_memory_seconds`` that is not a finite number of
            seconds in (0, :data:`MAX_SPAN_SECONDS`] (NaN, infinite, zero, negative, past the
            year 9999); a request count < 1 or over :data:`MAX_REQUESTS`; a horizon
            (``(requests - 1) x inter_arrival_seconds``) over :data:`MAX_SPAN_SECONDS`; a
            negative or fractional token count, one over
            :data:`~promptcache.usage.record.MAX_TOKENS` (10**9), or ``prefix_tokens +
            suffix_tokens`` over it (one request's prompt); a negative or non-finite
            ``keepalive_cap_usd``; a negative ``keepalive_max_pings``; a
            ``keepalive_interval`` longer than every TTL, or so short that one option would
            send more than :data:`MAX_REQUESTS` pings. The message starts with the
            argument's name.
    """
    inter_arrival_seconds = _seconds("inter_arrival_seconds", inter_arrival_seconds)
    requests = _count("requests", requests, 1, MAX_REQUESTS, _REQUESTS_WHY)
    prefix_tokens = _count("prefix_tokens", prefix_tokens)
    suffix_tokens = _count("suffix_tokens", suffix_tokens)
    output_tokens = _count("output_tokens", output_tokens)
    ping_input_tokens = _count("ping_input_tokens", ping_input_tokens)
    ping_output_tokens = _count("ping_output_tokens", ping_output_tokens)
    if prefix_tokens + suffix_tokens > MAX_TOKENS:  # one request's uncached prompt
        raise ValueError(f"prefix_tokens + suffix_tokens ({prefix_tokens:,} + "
                         f"{suffix_tokens:,}) must be at most {MAX_TOKENS:,} {_TOKENS_WHY}")
    horizon = Fraction(requests - 1) * Fraction(inter_arrival_seconds)
    if horizon > MAX_SPAN_SECONDS:
        raise ValueError(f"requests x inter_arrival_seconds: {requests:,} requests every "
                         f"{inter_arrival_seconds:g} s span {float(horizon):g} s, over "
                         f"{MAX_SPAN_SECONDS:.0f} s (the epoch to the year 9999): fewer "
                         "requests or a shorter interval")
    if keepalive_interval is not None:
        keepalive_interval = _seconds("keepalive_interval", keepalive_interval)
    if keepalive_max_pings is not None:
        keepalive_max_pings = _count("keepalive_max_pings", keepalive_max_pings, 0, None)
    if in_memory_seconds is not None:
        in_memory_seconds = _seconds("in_memory_seconds", in_memory_seconds)
    cap = None if keepalive_cap_usd is None else _usd("keepalive_cap_usd", keepalive_cap_usd)
    get_policy, get_prices = _catalog()
    pol = get_policy(model, policy=policy)
    table = prices if prices is not None else get_prices(model, at=at)
    provider = pol.provider
    gap = inter_arrival_seconds

    def cost(rec: UsageRecord) -> Decimal:
        c = price_record(rec, table, batch=batch, batch_multiplier=pol.batch_multiplier)
        assert c.total is not None, c.notes
        return c.total

    def req(uncached: int, read: int, write: int, ttl: str | None, out: int) -> UsageRecord:
        fields: dict[str, Any] = {"provider": provider, "model": model,
                                  "uncached_input": uncached, "cache_read": read,
                                  "cache_write": write, "output": out}
        if ttl in ("5m", "1h"):
            fields["cache_write_5m"] = write if ttl == "5m" else 0
            fields["cache_write_1h"] = write if ttl == "1h" else 0
        elif ttl is not None:
            fields["cache_write_ttl"] = ttl
        return UsageRecord.model_validate(fields)

    none_cost = requests * cost(req(prefix_tokens + suffix_tokens, 0, 0, None, output_tokens))
    options = [PolicyOption("none", none_cost, 0, 0, note="every prefix token at the input rate")]
    cacheable = prefix_tokens >= pol.min_cacheable_tokens and prefix_tokens > 0
    below = f"prefix {prefix_tokens} tokens < minimum {pol.min_cacheable_tokens}: nothing cached"

    def cached(name: str, ttl: str | None, lifetime: float, *, fee: bool) -> PolicyOption:
        write_ttl = ttl if fee else None
        write_rec = (req(suffix_tokens, 0, prefix_tokens, write_ttl, output_tokens) if fee
                     else req(prefix_tokens + suffix_tokens, 0, 0, None, output_tokens))
        read_rec = req(suffix_tokens, prefix_tokens, 0, None, output_tokens)
        if not cacheable:
            return PolicyOption(name, none_cost, 0, 0, available=False, note=below)
        if gap <= lifetime:
            total = cost(write_rec) + (requests - 1) * cost(read_rec)
            return PolicyOption(name, total, 1, requests - 1,
                                note=f"gap {gap:g}s within {lifetime:g}s: one write, then reads")
        return PolicyOption(name, requests * cost(write_rec), requests, 0,
                            note=f"gap {gap:g}s > {lifetime:g}s: every request writes again")

    def keepalive(name: str, ttl: str, lifetime: float) -> PolicyOption:
        base = cached(name, ttl, lifetime, fee=True)
        if not base.available or gap <= lifetime:
            return PolicyOption(name, base.cost, base.writes, base.reads,
                                available=base.available,
                                note=base.note if not base.available else "no pings needed")
        interval = keepalive_interval if keepalive_interval is not None else 0.9 * lifetime
        if interval > lifetime:
            return PolicyOption(name, none_cost, 0, 0, available=False,
                                note=f"keepalive_interval {interval:g}s > TTL {lifetime:g}s: "
                                     "each ping would write again")
        per_gap = math.ceil(Fraction(gap) / Fraction(interval)) - 1  # exact: no overflow
        gaps = requests - 1
        if gaps * per_gap > MAX_REQUESTS:
            raise ValueError(f"keepalive_interval {interval:g}s: {name} would send "
                             f"{float(gaps * per_gap):.3g} pings over {gaps:,} gaps of "
                             f"{gap:g}s, over {MAX_REQUESTS:,} {_REQUESTS_WHY}: a longer "
                             "keepalive_interval")
        ping = cost(req(ping_input_tokens, prefix_tokens, 0, None, ping_output_tokens))
        allowed = gaps * per_gap
        if keepalive_max_pings is not None:
            allowed = min(allowed, keepalive_max_pings)
        if cap is not None and ping > 0 and cap < allowed * ping:
            allowed = int(cap // ping)  # < allowed: a quotient Decimal can hold exactly
        covered = gaps if per_gap == 0 else min(gaps, allowed // per_gap)
        pings = covered * per_gap
        write_rec = req(suffix_tokens, 0, prefix_tokens, ttl, output_tokens)
        read_rec = req(suffix_tokens, prefix_tokens, 0, None, output_tokens)
        uncovered = gaps - covered
        total = (cost(write_rec) * (1 + uncovered) + cost(read_rec) * covered + ping * pings)
        return PolicyOption(
            name, total, 1 + uncovered, covered, pings, ping * pings, capped=uncovered > 0,
            note=f"{per_gap} ping(s) per {gap:g}s gap every {interval:g}s"
                 + (f"; budget covers {covered} of {gaps} gaps" if uncovered else ""),
        )

    if pol.ttls:
        for ttl in sorted(pol.ttls, key=ttl_seconds):
            options.append(cached(ttl, ttl, ttl_seconds(ttl), fee=True))
        by_length = sorted(pol.ttls, key=ttl_seconds)
        longest = ttl_seconds(by_length[-1])
        if keepalive_interval is not None and keepalive_interval > longest:
            raise ValueError(f"keepalive_interval must be in (0, {longest:g}] seconds (the "
                             f"longest TTL), got {keepalive_interval:g}")
        for i, ttl in enumerate(by_length):
            # the shortest TTL's option is always listed; a longer TTL's only when the gap
            # exceeds it (within it, it is the plain TTL option)
            if i == 0 or gap > ttl_seconds(ttl):
                options.append(keepalive(f"{ttl}+keepalive", ttl, ttl_seconds(ttl)))
    elif pol.automatic_caching:
        fee = bool(pol.write_multipliers)
        lifetime = (in_memory_seconds if in_memory_seconds is not None
                    else _in_memory_lifetime(pol))
        accepted = tuple(pol.prompt_cache_retention)
        if accepted and "in_memory" not in accepted:
            # gpt-5.5 and later take only 24h (openai-python; hosted-api-rules.md 2.2): the
            # in-memory option cannot be chosen (trial 27)
            options.append(PolicyOption(
                "in_memory", none_cost, 0, 0, available=False,
                note=f"{model} takes only prompt_cache_retention="
                     f"{' / '.join(repr(r) for r in accepted)}"))
        elif lifetime is None:
            options.append(PolicyOption(
                "in_memory", none_cost, 0, 0, available=False,
                note="in-memory lifetime unknown: the policy has no idle_lifetime; pass "
                     "in_memory_seconds"))
        else:
            options.append(cached("in_memory", None, lifetime, fee=fee))
        for retention in pol.prompt_cache_retention:
            if retention != "in_memory":
                options.append(cached(retention, None, ttl_seconds(retention), fee=fee))
    best = min(options, key=lambda o: (o.cost, options.index(o)))
    return TtlPolicy(model, prefix_tokens, inter_arrival_seconds, requests, best, tuple(options))
