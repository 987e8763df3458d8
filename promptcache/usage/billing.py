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

* Request settings (catalog data, :func:`promptcache.catalog.price_adjustment`): OpenAI
  ``service_tier: "flex"`` is 0.5x every token (hosted-api-rules.md 2.5); Anthropic
  ``inference_geo: "us"`` is 1.1x every token for Claude 4.6 and later (1.6); ``speed: "fast"``
  uses the catalog's fast-mode prices (Opus 5.5 $8/$40, Opus 5 / 4.8 $10/$50; OpenAI 2x). A
  tier, geo or speed the catalog cannot price (``"priority"``, ``"scale"``, fast mode of a model
  without fast-mode prices, cache tokens in Anthropic fast mode) makes the cost unknown with a
  note, never the standard price. ``inference_geo`` and ``speed`` are read with ``getattr``
  (records without those fields price at the list price). Bedrock / Google Cloud model ids
  get a note (regional endpoints' 10 % premium, not applied); a price the reference marks
  UNCONFIRMED (``ModelPrices.source.confirmed`` False) gets the note ``"unconfirmed price"``.

Notes that state an assumption or an applied adjustment, not why a cost is unknown, start with
one of :data:`ASSUMPTION_PREFIXES`.

Savings are input-side: the output is billed the same with or without caching, so
``savings = uncached_input_cost - input`` where ``uncached_input_cost`` prices every input token
of the same request at the (tiered) input rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from promptcache.usage.record import UsageRecord

if TYPE_CHECKING:
    from promptcache.catalog import ModelPrices, PriceAdjustment

__all__ = ["ASSUMPTION_PREFIXES", "Cost", "PriceTable", "TierLike", "explicit_prices",
           "price_record"]

_MTOK = Decimal(1_000_000)
_ONE = Decimal(1)

#: Prefixes of :attr:`Cost.notes` that state an assumption made while pricing or a price
#: adjustment that was applied (the cost is known); every other note says why a part of the
#: cost is unknown.
ASSUMPTION_PREFIXES: tuple[str, ...] = (
    "write TTL not reported", "no write fee for this model", "write TTL 12h", "write TTL 24h",
    "price adjusted:", "regional endpoint:", "unconfirmed price",
)
#: The write TTLs ``default_write_ttl`` accepts.
WRITE_TTLS = ("5m", "1h")


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
        notes: why a part is unknown, or which assumption was made / adjustment applied
            (those start with one of :data:`ASSUMPTION_PREFIXES`).
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
    def assumptions(self) -> tuple[str, ...]:
        """The notes that state an assumption or an applied adjustment (not an unknown)."""
        return tuple(n for n in self.notes if n.startswith(ASSUMPTION_PREFIXES))

    @property
    def unknown_reasons(self) -> tuple[str, ...]:
        """The notes that say why a part of the cost is unknown."""
        return tuple(n for n in self.notes if not n.startswith(ASSUMPTION_PREFIXES))

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


@dataclass(frozen=True)
class _Replaced:
    """A flat price table with some prices replaced (fast mode); ``None``: no such price."""

    input: Decimal
    output: Decimal
    cache_read: Decimal | None
    cache_write_5m: Decimal | None
    cache_write_1h: Decimal | None
    cache_write: Decimal | None


def _adjusted(prices: PriceTable, replace: Any) -> PriceTable:
    def pick(name: str) -> Decimal | None:
        value: Decimal | None = replace[name] if name in replace else getattr(prices, name)
        return value

    return _Replaced(input=pick("input") or prices.input, output=pick("output") or prices.output,
                     cache_read=pick("cache_read"), cache_write_5m=pick("cache_write_5m"),
                     cache_write_1h=pick("cache_write_1h"), cache_write=pick("cache_write"))


def _unconfirmed(prices: PriceTable) -> str | None:
    """The note for prices the reference marks UNCONFIRMED (``source.confirmed`` False on
    the table or on one of its ``field_sources``), else None."""
    source = getattr(prices, "source", None)
    field_sources = getattr(prices, "field_sources", None)
    sources = (source, *dict(field_sources).values()) if field_sources else (source,)
    for src in sources:
        if src is not None and getattr(src, "confirmed", True) is False:
            model = getattr(prices, "model_id", None)
            why = getattr(src, "note", None)
            return ("unconfirmed price" + (f" for {model}" if model else "")
                    + (f": {why}" if why else ""))
    return None


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
    if not rules:
        return None, True
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

    Raises:
        ValueError: ``default_write_ttl`` is not "5m" or "1h".
        CatalogError: the catalog's price modifier tables are malformed.
    """
    if default_write_ttl not in WRITE_TTLS:
        raise ValueError(f"default_write_ttl must be one of {', '.join(WRITE_TTLS)}, "
                         f"got {default_write_ttl!r}")
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
        im = cm = om = _ONE
    else:
        tier, tier_known = _tier_for(tier_rules, rec)
        tier_above = tier.above_tokens if tier else None
        im = _d(tier.input_multiplier) if tier else _ONE
        cm = _d(tier.cache_multiplier) if tier else _ONE
        om = _d(tier.output_multiplier) if tier else _ONE
    if not tier_known:
        notes.append("prompt length unknown: pricing tier cannot be chosen")
    unconfirmed = _unconfirmed(prices)
    if unconfirmed is not None:
        notes.append(unconfirmed)
    use_batch = rec.service_tier == "batch" if batch is None else batch
    disc = _ONE
    if use_batch:
        mult = _d(batch_multiplier) if batch_multiplier is not None else _catalog_batch(rec.model)
        if mult is None:
            notes.append("batch multiplier unknown for this model: pass batch_multiplier=")
            return Cost(None, None, None, None, None, tier_above, True, tuple(notes))
        disc = mult
    adj = _adjustment(rec, use_batch)
    if adj.notes:
        notes.extend(f"price adjusted: {n}" if not n.startswith("regional endpoint:") else n
                     for n in adj.notes)
    unknown = list(adj.unknown)
    if adj.replace:
        cached = [name for name, n in (("cache reads", rec.cache_read), ("cache writes",
                                                                         rec.writes)) if n]
        if cached:
            unknown.append(f"speed 'fast': no fast-mode price for {' and '.join(cached)} in the "
                           "catalog (the reference gives fast-mode input and output prices only)")
        prices = _adjusted(prices, adj.replace)
    if unknown:
        notes.extend(unknown)
        return Cost(None, None, None, None, None, tier_above, use_batch, tuple(notes))
    disc *= adj.multiplier
    in_rate = prices.input * im * disc

    # -- uncached
    # (_usd written out: tokens x rate / 1M)
    uncached = None if rec.uncached_input is None else rec.uncached_input * in_rate / _MTOK
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
        read_rate = prices.cache_read
        r = None if read_rate is None else read_rate * cm * disc
        read_cost = None if r is None else _usd(rec.cache_read, r)
        if r is None:
            notes.append("no cache-read price for this model")
    # -- writes
    write_cost = _write_cost(rec, prices, cm, disc, in_rate, default_write_ttl, notes)
    # -- output
    out_cost = None if rec.output is None else rec.output * (prices.output * om * disc) / _MTOK
    if out_cost is None:
        notes.append("output not reported")
    total_in = rec.total_input
    base = None if total_in is None else total_in * in_rate / _MTOK
    if not tier_known:
        uncached = read_cost = write_cost = out_cost = base = None
    # Cost(uncached, read_cost, ...) without the frozen dataclass's eight object.__setattr__
    # calls: the same fields in the same order, nothing else (no __post_init__)
    cost = _new_cost(Cost)
    cost.__dict__.update(uncached=uncached, cache_read=read_cost, cache_write=write_cost,
                         output=out_cost, uncached_input_cost=base, tier_above=tier_above,
                         batch=use_batch, notes=tuple(notes))
    return cost


_new_cost = object.__new__


def _adjustment(rec: UsageRecord, use_batch: bool) -> PriceAdjustment:
    """The catalog's adjustment for the record's service tier, inference geo and speed (the
    last two read with ``getattr``: fields of newer records). Under the batch discount the
    reported tier is not looked at again."""
    price_adjustment = _PRICE_ADJUSTMENT or _import_price_adjustment()
    adjustment: PriceAdjustment = price_adjustment(
        rec.model, provider=rec.provider,
        service_tier=None if use_batch else rec.service_tier,
        inference_geo=getattr(rec, "inference_geo", None),
        speed=getattr(rec, "speed", None))
    return adjustment


#: promptcache.catalog.price_adjustment, imported on first use (the catalog loads TOML).
_PRICE_ADJUSTMENT: Any = None


def _import_price_adjustment() -> Any:
    global _PRICE_ADJUSTMENT
    from promptcache.catalog import price_adjustment

    _PRICE_ADJUSTMENT = price_adjustment
    return price_adjustment


def _write_cost(
    rec: UsageRecord,
    prices: PriceTable,
    cm: Decimal,
    disc: Decimal,
    in_rate: Decimal,
    default_write_ttl: str,
    notes: list[str],
) -> Decimal | None:
    writes = rec.writes
    price_w, price_5m, price_1h = prices.cache_write, prices.cache_write_5m, prices.cache_write_1h
    charges_writes = price_w is not None or price_5m is not None or price_1h is not None
    if writes is None:
        if not charges_writes:
            # no write category (OpenAI before GPT-5.6): nothing is billed as a write, whether
            # or not the record gives its inclusive input count (a hand-built or third-party
            # log line with the uncached part alone was "cost unknown: cache writes not
            # reported" on gpt-4o; trial 29 follow-up)
            return Decimal(0)
        notes.append("cache writes not reported")
        return None
    if writes == 0:
        return Decimal(0)
    if not charges_writes:
        notes.append("no write fee for this model: writes billed at the input rate")
        return _usd(writes, in_rate)

    def rate(value: Decimal | None) -> Decimal | None:
        return None if value is None else value * cm * disc

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
