"""Exact cost of one usage record, in Decimal USD.

Rules (reference/hosted-api-rules.md 1.6, 1.8, 2.3, 2.5):

* Every input token is billed at exactly **one** rate: uncached at ``input``, reads at
  ``cache_read``, writes at the write rate. A write is never *also* billed as input (the LiteLLM
  #9812 bug, case BR-25), and OpenAI's ``prompt_tokens`` is split before pricing (case BR-27).
* Anthropic writes are priced by TTL: ``cache_write_5m`` / ``cache_write_1h``. When a response
  does not split its writes by TTL, they are priced at ``default_write_ttl`` ("5m" unless the
  caller knows better) and the cost carries the note ``"write TTL not reported"``.
  https://platform.claude.com/docs/en/about-claude/pricing
* OpenAI GPT-5.6+ writes use the single ``cache_write`` rate, which *replaces* the input rate.
  Models with no write price (OpenAI before GPT-5.6, DeepSeek, Gemini implicit) have no write
  category: their writes are uncached input. If a model charges writes but the response did not
  report them, the cost is unknown (``None``), never a guess.
  https://developers.openai.com/api/docs/guides/prompt-caching
* Prompt-length tiers re-price a *whole* request (Claude Haiku 5.5 above 100K prompt tokens,
  OpenAI GPT-5.6/6 above 272K input tokens): the catalog's ``TierRule`` multipliers apply to the
  base prices when the rule's counted buckets exceed its threshold.
* Batch: the catalog's ``CachePolicy.batch_multiplier`` (0.5 for Anthropic and OpenAI: 50 % off
  every token, cache reads and writes included,
  https://platform.claude.com/docs/en/about-claude/pricing) applies to every rate. A batch record
  for a model without a known multiplier has an unknown cost (pass ``batch_multiplier=``).

Savings are input-side: the output is billed the same with or without caching, so
``savings = uncached_input_cost - input`` where ``uncached_input_cost`` prices every input token
of the same request at the (tiered) input rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Protocol

from promptcache.usage.record import UsageRecord

if TYPE_CHECKING:
    from promptcache.catalog import ModelPrices

__all__ = ["Cost", "PriceTable", "TierLike", "explicit_prices", "price_record"]

_MTOK = Decimal(1_000_000)


class PriceTable(Protocol):
    """What billing needs from :class:`promptcache.catalog.ModelPrices` (USD per MTok)."""

    @property
    def input(self) -> Decimal: ...
    @property
    def output(self) -> Decimal: ...
    @property
    def cache_read(self) -> Decimal | None: ...
    @property
    def cache_write_5m(self) -> Decimal | None: ...
    @property
    def cache_write_1h(self) -> Decimal | None: ...
    @property
    def cache_write(self) -> Decimal | None: ...


class TierLike(Protocol):
    """What billing needs from :class:`promptcache.catalog.TierRule`."""

    @property
    def above_tokens(self) -> int: ...
    @property
    def counts(self) -> tuple[str, ...]: ...
    @property
    def input_multiplier(self) -> float: ...
    @property
    def cache_multiplier(self) -> float: ...
    @property
    def output_multiplier(self) -> float: ...


@dataclass(frozen=True)
class Cost:
    """The cost of one record (USD, Decimal, exact; ``None`` = unknown).

    Attributes:
        uncached: uncached input tokens x input rate.
        cache_read: read tokens x read rate.
        cache_write: write tokens x write rate(s).
        output: output tokens x output rate.
        uncached_input_cost: what the same input would cost with no caching at all.
        tier_above: threshold (tokens) of the prompt-length tier that re-priced the request.
        batch: whether the batch discount was applied.
        notes: why a part is unknown, or which assumption was made.
    """

    uncached: Decimal | None
    cache_read: Decimal | None
    cache_write: Decimal | None
    output: Decimal | None
    uncached_input_cost: Decimal | None
    tier_above: int | None = None
    batch: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def input(self) -> Decimal | None:
        """Input side: uncached + cache read + cache write (USD); ``None`` if a part is."""
        if self.uncached is None or self.cache_read is None or self.cache_write is None:
            return None
        return self.uncached + self.cache_read + self.cache_write

    @property
    def total(self) -> Decimal | None:
        """Input + output (USD); ``None`` if either is unknown."""
        inp = self.input
        if inp is None or self.output is None:
            return None
        return inp + self.output

    @property
    def savings(self) -> Decimal | None:
        """``uncached_input_cost - input`` (USD); negative when writes cost more than reads saved."""
        inp = self.input
        if inp is None or self.uncached_input_cost is None:
            return None
        return self.uncached_input_cost - inp


def _d(x: float | Decimal) -> Decimal:
    return Decimal(str(x))


def _catalog_batch(model: str | None) -> Decimal | None:
    """``CachePolicy.batch_multiplier`` of ``model`` from the catalog (None if unknown)."""
    if model is None:
        return None
    from promptcache._errors import PromptCacheError
    from promptcache.catalog import get_policy

    try:
        mult = get_policy(model).batch_multiplier
    except PromptCacheError:
        return None
    return None if mult is None else _d(mult)


def _usd(tokens: int, rate: Decimal) -> Decimal:
    return tokens * rate / _MTOK


def _prompt_tokens(rec: UsageRecord, counts: tuple[str, ...]) -> int | None:
    """Sum of the usage buckets a tier threshold counts (``None`` when one is unknown)."""
    writes = rec.writes
    if writes is None and rec.input_total is not None and rec.uncached_input is not None:
        writes = 0  # no write category: any writes are inside the uncached part
    parts = {"input": rec.uncached_input, "cache_read": rec.cache_read, "cache_write": writes}
    counted = [parts.get(name) for name in counts]
    if any(v is None for v in counted):
        return None
    return sum(v for v in counted if v is not None)


def _tier_for(rules: tuple[TierLike, ...], rec: UsageRecord) -> tuple[TierLike | None, bool]:
    """(applicable tier rule or None, whether the tier is known)."""
    hit: TierLike | None = None
    for rule in sorted(rules, key=lambda r: r.above_tokens):
        prompt = _prompt_tokens(rec, tuple(rule.counts))
        if prompt is None:
            return None, False
        if prompt > rule.above_tokens:
            hit = rule
    return hit, True


def price_record(
    rec: UsageRecord,
    prices: PriceTable,
    *,
    tier_rules: tuple[TierLike, ...] = (),
    batch: bool | None = None,
    batch_multiplier: Decimal | float | None = None,
    default_write_ttl: str = "5m",
) -> Cost:
    """Price one record with an explicit price table.

    Args:
        rec: the usage record.
        prices: USD per MTok (``promptcache.catalog.ModelPrices`` or any object with the same
            attributes; cases price with their own tables).
        tier_rules: prompt-length tier rules (``CachePolicy.tier_rules``), used only when
            ``prices`` has no ``tiers`` of its own (``ModelPrices.tiers`` wins).
        batch: apply the batch discount; ``None``: only when ``rec.service_tier == "batch"``.
        batch_multiplier: batch price / list price; default: the catalog policy of
            ``rec.model`` (``CachePolicy.batch_multiplier``).
        default_write_ttl: TTL assumed for writes whose TTL split is not reported ("5m"/"1h").

    Returns:
        A :class:`Cost`; parts that cannot be known are ``None`` with a note saying why.
    """
    notes: list[str] = []
    tier_above: int | None = None
    price_tiers = tuple(getattr(prices, "tiers", ()) or ())
    if price_tiers:  # ModelPrices carries its own tiers (genai-prices / catalog / override)
        counts = tuple(getattr(prices, "tier_counts", ("input", "cache_read", "cache_write")))
        prompt = _prompt_tokens(rec, counts)
        tier_known = prompt is not None
        if prompt is not None:
            flat = prices.for_prompt(prompt)  # type: ignore[attr-defined]
            tier_above = next((t.above_tokens for t in sorted(
                price_tiers, key=lambda t: -int(t.above_tokens)) if prompt > t.above_tokens), None)
            prices = flat
        im = cm = om = Decimal(1)
    else:
        tier, tier_known = _tier_for(tier_rules, rec)
        tier_above = tier.above_tokens if tier else None
        im = _d(tier.input_multiplier) if tier else Decimal(1)
        cm = _d(tier.cache_multiplier) if tier else Decimal(1)
        om = _d(tier.output_multiplier) if tier else Decimal(1)
    if not tier_known:
        notes.append("prompt length unknown: pricing tier cannot be chosen")
    use_batch = rec.service_tier == "batch" if batch is None else batch
    disc = Decimal(1)
    if use_batch:
        mult = _d(batch_multiplier) if batch_multiplier is not None else _catalog_batch(rec.model)
        if mult is None:
            notes.append("batch multiplier unknown for this model: pass batch_multiplier=")
            return Cost(None, None, None, None, None, tier_above, True, tuple(notes))
        disc = mult
    in_rate = prices.input * im * disc

    def rate(value: Decimal | None, mult: Decimal) -> Decimal | None:
        return None if value is None else value * mult * disc

    # -- uncached
    uncached = None if rec.uncached_input is None else _usd(rec.uncached_input, in_rate)
    if uncached is None:
        notes.append("uncached input not reported")
    # -- reads
    read_cost: Decimal | None
    if rec.cache_read is None:
        read_cost = None
        notes.append("cache reads not reported")
    elif rec.cache_read == 0:
        read_cost = Decimal(0)
    else:
        r = rate(prices.cache_read, cm)
        read_cost = None if r is None else _usd(rec.cache_read, r)
        if r is None:
            notes.append("no cache-read price for this model")
    # -- writes
    write_cost = _write_cost(rec, prices, cm, disc, in_rate, default_write_ttl, notes)
    # -- output
    out_cost = None if rec.output is None else _usd(rec.output, prices.output * om * disc)
    if out_cost is None:
        notes.append("output not reported")
    total_in = rec.total_input
    base = None if total_in is None else _usd(total_in, in_rate)
    if not tier_known:
        uncached = read_cost = write_cost = out_cost = base = None
    return Cost(
        uncached=uncached,
        cache_read=read_cost,
        cache_write=write_cost,
        output=out_cost,
        uncached_input_cost=base,
        tier_above=tier_above,
        batch=use_batch,
        notes=tuple(notes),
    )


def _write_cost(
    rec: UsageRecord,
    prices: PriceTable,
    cm: Decimal,
    disc: Decimal,
    in_rate: Decimal,
    default_write_ttl: str,
    notes: list[str],
) -> Decimal | None:
    def rate(value: Decimal | None) -> Decimal | None:
        return None if value is None else value * cm * disc

    writes = rec.writes
    charges_writes = any(
        p is not None for p in (prices.cache_write, prices.cache_write_5m, prices.cache_write_1h)
    )
    if writes is None:
        if rec.input_total is not None and not charges_writes:
            return Decimal(0)  # no write category: writes are inside the uncached input
        notes.append("cache writes not reported")
        return None
    if writes == 0:
        return Decimal(0)
    if not charges_writes:
        notes.append("no write fee for this model: writes billed at the input rate")
        return _usd(writes, in_rate)
    w5, w1 = rec.cache_write_5m, rec.cache_write_1h
    if w5 is not None and w1 is not None:
        total = Decimal(0)
        for tokens, price, name in ((w5, prices.cache_write_5m, "5m"),
                                    (w1, prices.cache_write_1h, "1h")):
            if tokens == 0:
                continue
            r = rate(price) if price is not None else rate(prices.cache_write)
            if r is None:
                notes.append(f"no {name} cache-write price for this model")
                return None
            total += _usd(tokens, r)
        return total
    ttl = rec.cache_write_ttl
    if ttl in ("5m", "1h"):
        chosen = prices.cache_write_5m if ttl == "5m" else prices.cache_write_1h
    elif ttl in ("12h", "24h") and prices.cache_write is not None:
        # OpenAI documents one write rate, 1.25x input, for every write (hosted-api-rules.md
        # 2.3); a 12h write (openai-python 3.57.0, unconfirmed) has no price of its own
        notes.append(f"write TTL {ttl}: priced at the model's one documented write rate "
                     "(no price of its own is documented)")
        chosen = prices.cache_write
    elif prices.cache_write is not None:
        chosen = prices.cache_write
    else:
        notes.append(f"write TTL not reported: priced at the {default_write_ttl} rate")
        chosen = prices.cache_write_1h if default_write_ttl == "1h" else prices.cache_write_5m
    r = rate(chosen)
    if r is None:
        notes.append("no cache-write price for this TTL")
        return None
    return _usd(writes, r)


def explicit_prices(
    *,
    input: Decimal | float | str,
    output: Decimal | float | str,
    cache_read: Decimal | float | str | None = None,
    cache_write_5m: Decimal | float | str | None = None,
    cache_write_1h: Decimal | float | str | None = None,
    cache_write: Decimal | float | str | None = None,
    model_id: str = "explicit",
    note: str | None = None,
) -> ModelPrices:
    """A :class:`promptcache.catalog.ModelPrices` from explicit USD-per-MTok numbers.

    For case tests and private deployments: pass it as ``prices=`` to :func:`price_record` or as
    ``default_prices=`` / ``prices={model: ...}`` to the tracker. Floats go through ``str``
    so 0.3 is exactly ``Decimal("0.3")``. No tiers.

    Raises:
        pydantic.ValidationError: a negative price.
    """
    from promptcache.catalog import ModelPrices, PriceSource

    def dec(x: Decimal | float | str | None) -> Decimal | None:
        return None if x is None else Decimal(str(x))

    return ModelPrices(
        model_id=model_id,
        input=Decimal(str(input)),
        output=Decimal(str(output)),
        cache_read=dec(cache_read),
        cache_write_5m=dec(cache_write_5m),
        cache_write_1h=dec(cache_write_1h),
        cache_write=dec(cache_write),
        source=PriceSource(kind="override", url="explicit", note=note),
        at=datetime.now(tz=UTC),
    )


def utc(ts: float | None) -> datetime | None:
    """Seconds since the epoch -> aware UTC datetime (``None`` passes through)."""
    return None if ts is None else datetime.fromtimestamp(ts, tz=UTC)
