"""Model prices in USD per million tokens: genai-prices, catalog fallback rows, user overrides.

Order of precedence for :func:`get_prices`, field by field:

1. a user override file: :func:`load_overrides` or the ``PROMPTCACHE_PRICES`` environment
   variable (path to a TOML file; re-read when the file changes);
2. genai-prices 0.2.3 (pinned in pyproject.toml). Only its **bundled** data is read
   (``genai_prices.data.providers``); its ``UpdatePrices`` auto-update is never started and a
   custom snapshot installed by someone else in the process is ignored, so results never
   depend on the network. A model of the policy catalog is looked up under its provider
   (Anthropic or OpenAI); any other model under Anthropic and OpenAI, then under DeepSeek
   (``deepseek-*`` ids) and Google (``gemini-*`` / ``gemma-*`` ids; not the Claude models
   genai-prices lists under Google, which are Vertex AI's prices);
3. the catalog's own dated rows (``prices.toml``, copied from hosted-api-rules.md 1.6/2.5),
   for models genai-prices lacks (Claude Mythos 5 / 5.1), and for a period where a row is
   marked ``wins_over_genai_prices`` (decided against genai-prices with the reference:
   Claude Sonnet 5.5's read price before 2026-10-07; GPT-5.6 Sol, whose $4/$20 cut in
   genai-prices the reference marks UNCONFIRMED). Where genai-prices gives the price but the
   catalog row of that period is ``confirmed = false`` (the reference marks it UNCONFIRMED),
   the result keeps ``source.confirmed`` False and the row's note.

Prices are data only: billing arithmetic belongs to ``promptcache.usage``.

Field mapping from genai-prices: ``input_mtok`` -> input, ``output_mtok`` -> output,
``cache_read_mtok`` -> cache_read; ``cache_write_mtok`` -> cache_write_5m for Anthropic (its
5-minute write) and cache_write for OpenAI (GPT-5.6+ write); ``cache_write_1h_mtok`` ->
cache_write_1h. genai-prices' ``TieredPrices`` become :class:`PriceTier` rows; its tier rule
("all tokens at the tier price when total input tokens > start") is the same whole-request
rule as the catalog's ``TierRule``.

DeepSeek and Gemini models get genai-prices' input, output and cache-read prices (no write
price: both bill a cache miss as plain input). Gemini's storage fee for explicit context
caches (per token-hour) is not a token price and is not included. DeepSeek prices change
with the time of day in genai-prices (off-peak hours): they are taken at the request time,
and without one (``at=None``) at 12:00 UTC of today (``source.note`` says so), so the answer
does not depend on the hour it is asked.

Override file format (USD per MTok; numbers or strings)::

    [models."claude-sonnet-4-5"]        # any id get_policy accepts, or a new model id
    input = 3.0
    output = 15.0
    cache_read = 0.30
    cache_write_5m = 3.75
    cache_write_1h = 6.0
    as_of = 2026-11-01                  # optional
    note = "negotiated rate"            # optional
    [[models."claude-sonnet-4-5".tiers]]  # optional; replaces the tiers
    above_tokens = 200000
    input = 6.0
    output = 22.5

A field an override leaves out keeps its genai-prices / catalog value; a model known nowhere
else must give at least ``input`` and ``output``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable
from datetime import UTC, date, datetime, time
from decimal import Decimal
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from promptcache._errors import CatalogError, UnknownModelError
from promptcache.catalog._policy import (
    Provider,
    _base_key,
    _candidates,
    _catalog,
    _suggest,
    get_policy,
    resolve_model_id,
)

__all__ = [
    "GENAI_PRICES_URL",
    "PRICES_ENV_VAR",
    "ModelPrices",
    "PriceSource",
    "PriceTier",
    "UnknownPriceError",
    "clear_overrides",
    "get_prices",
    "is_fine_tuned",
    "load_overrides",
]

PRICES_ENV_VAR = "PROMPTCACHE_PRICES"
GENAI_PRICES_URL = "https://github.com/pydantic/genai-prices"
PRICE_FIELDS: tuple[str, ...] = (
    "input",
    "output",
    "cache_read",
    "cache_write_5m",
    "cache_write_1h",
    "cache_write",
)
_GENAI_PROVIDERS = ("anthropic", "openai")
#: Other genai-prices providers searched for a model outside the policy catalog, with the
#: model id prefixes taken from each: their own first-party models only (genai-prices' google
#: provider also lists Claude on Vertex AI, whose prices are not Anthropic's).
_OTHER_GENAI_PROVIDERS: dict[str, tuple[str, ...]] = {
    "deepseek": ("deepseek",),
    "google": ("gemini", "gemma"),
}
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class UnknownPriceError(UnknownModelError):
    """No price is known for a model (not in genai-prices, the catalog or an override file).

    Attributes:
        model, suggestions: as :class:`~promptcache._errors.UnknownModelError`.
    """

    def __init__(self, model: str, suggestions: Iterable[str] = ()) -> None:
        super().__init__(model, list(suggestions))
        hint = f"; closest known ids: {', '.join(self.suggestions)}" if self.suggestions else ""
        self.args = (
            f"no prices for model {model!r}{hint}. Add it to a price override file "
            f"(load_overrides(path) or ${PRICES_ENV_VAR}).",
        )


class PriceSource(BaseModel):
    """Where a price (or a set of prices) comes from.

    Attributes:
        kind: ``"genai-prices"``, ``"catalog"`` (prices.toml) or ``"override"`` (user file).
        url: the source URL (genai-prices repository, a catalog source, or ``file://`` path).
        as_of: the date the price is known to hold (None when the source has no date).
        effective_from: the date this price took effect, when the source says.
        confirmed: False where the reference marks the price UNCONFIRMED.
        note: free text.
    """

    model_config = _FROZEN

    kind: Literal["genai-prices", "catalog", "override"]
    url: str
    as_of: date | None = None
    effective_from: date | None = None
    confirmed: bool = True
    note: str | None = None


class PriceTier(BaseModel):
    """Prices (USD per MTok) for a request whose prompt exceeds ``above_tokens`` tokens.

    A field left None keeps the base (untiered) price.
    """

    model_config = _FROZEN

    above_tokens: int = Field(gt=0)
    input: Decimal | None = Field(default=None, ge=0)
    output: Decimal | None = Field(default=None, ge=0)
    cache_read: Decimal | None = Field(default=None, ge=0)
    cache_write_5m: Decimal | None = Field(default=None, ge=0)
    cache_write_1h: Decimal | None = Field(default=None, ge=0)
    cache_write: Decimal | None = Field(default=None, ge=0)


class ModelPrices(BaseModel):
    """Prices of one model at one time, in USD per million tokens (Decimal).

    ``None`` means "no such price" (unknown, or the provider has no such charge): an OpenAI
    model before GPT-5.6 has no ``cache_write`` (writes bill as plain input); Anthropic models
    use ``cache_write_5m`` / ``cache_write_1h`` and never ``cache_write``.

    Attributes:
        model_id: canonical catalog id when the catalog knows the model, else the id the
            prices were found under.
        provider: ``"anthropic"``, ``"openai"`` or None (a model priced by an override file
            only, or another provider's model priced by genai-prices: DeepSeek, Gemini;
            ``source.note`` names the genai-prices provider).
        input, output, cache_read, cache_write_5m, cache_write_1h, cache_write: base prices.
        tiers: prompt-length tiers (ascending ``above_tokens``); a request whose prompt
            tokens exceed a tier's threshold pays that tier's prices on **every** token.
        tier_counts: usage buckets summed into "prompt tokens" for the tier threshold.
        source: where the base prices come from; ``field_sources`` names per-field origins
            where they differ (partial overrides).
        at: the request time the prices were resolved for (UTC).
    """

    model_config = _FROZEN

    model_id: str
    provider: Provider | None = None
    input: Decimal = Field(ge=0)
    output: Decimal = Field(ge=0)
    cache_read: Decimal | None = Field(default=None, ge=0)
    cache_write_5m: Decimal | None = Field(default=None, ge=0)
    cache_write_1h: Decimal | None = Field(default=None, ge=0)
    cache_write: Decimal | None = Field(default=None, ge=0)
    tiers: tuple[PriceTier, ...] = ()
    tier_counts: tuple[Literal["input", "cache_read", "cache_write"], ...] = (
        "input",
        "cache_read",
        "cache_write",
    )
    source: PriceSource
    field_sources: dict[str, PriceSource] = Field(default_factory=dict)
    at: datetime

    def tier_for(self, prompt_tokens: int) -> PriceTier | None:
        """The tier a request with ``prompt_tokens`` prompt tokens falls in (None: base)."""
        hit: PriceTier | None = None
        for tier in sorted(self.tiers, key=lambda t: t.above_tokens):
            if prompt_tokens > tier.above_tokens:
                hit = tier
        return hit

    def for_prompt(self, prompt_tokens: int) -> ModelPrices:
        """Flat prices (no tiers) for one request whose prompt counts ``prompt_tokens`` tokens.

        ``prompt_tokens`` is the sum of the usage buckets in ``tier_counts`` (for Claude Haiku
        5.5: input + cache reads + cache writes). Raises ValueError if it is negative.
        """
        if prompt_tokens < 0:
            raise ValueError(f"prompt_tokens must be >= 0, got {prompt_tokens}")
        tier = self.tier_for(prompt_tokens)
        update: dict[str, Any] = {"tiers": ()}
        if tier is not None:
            for name in PRICE_FIELDS:
                value = getattr(tier, name)
                if value is not None:
                    update[name] = value
        return self.model_copy(update=update)

    def price(self, field: str, prompt_tokens: int = 0) -> Decimal | None:
        """One price (``"input"``, ``"cache_read"``, ...) for a request of ``prompt_tokens``."""
        if field not in PRICE_FIELDS:
            raise ValueError(f"unknown price field {field!r}; one of {', '.join(PRICE_FIELDS)}")
        value: Decimal | None = getattr(self.for_prompt(prompt_tokens), field)
        return value


# ------------------------------------------------------------------------------ time helper


def _as_utc(at: datetime | date | None) -> datetime:
    if at is None:
        return datetime.now(tz=UTC)
    if not isinstance(at, datetime):
        return datetime.combine(at, time(0), tzinfo=UTC)
    if at.tzinfo is None:
        return at.replace(tzinfo=UTC)
    return at.astimezone(UTC)


# ---------------------------------------------------------------------------- genai-prices


class _Found(BaseModel):
    model_config = ConfigDict(frozen=True)

    model_id: str
    provider: Provider | None  # None: another provider's model (genai-prices only)
    prices: dict[str, Decimal]
    tiers: tuple[PriceTier, ...]
    effective_from: date | None
    note: str | None
    wins: bool = False
    genai_provider: str | None = None  # the genai-prices provider id it was found under
    at: datetime | None = None  # the time it was resolved for, when not the one asked
    confirmed: bool = True  # False: the reference marks this period's price UNCONFIRMED


def _genai_model(refs: Iterable[str], provider: Provider | None
                 ) -> tuple[Any, Provider | None, str] | None:
    """Find a model in genai-prices' bundled data (never the auto-updated snapshot).

    Returns (genai-prices model, catalog provider or None for another provider's model,
    genai-prices provider id). A model of the policy catalog (``provider`` given) is looked up
    under that provider only; any other model under Anthropic and OpenAI first, then under
    :data:`_OTHER_GENAI_PROVIDERS` (DeepSeek, Google Gemini), where only that provider's own
    model ids count.
    """
    from genai_prices.data import providers  # 0.7 s import: only when prices are asked for

    by_id = {p.id: p for p in providers}
    wanted = [by_id[p] for p in _GENAI_PROVIDERS if p in by_id]
    if provider is not None:
        wanted = [p for p in wanted if p.id == provider]
    for ref in refs:
        for prov in wanted:
            model = prov.find_model(ref)
            if model is not None:
                pid: Provider = "anthropic" if prov.id == "anthropic" else "openai"
                return model, pid, prov.id
    if provider is not None:
        return None
    for ref in refs:
        for other, prefixes in _OTHER_GENAI_PROVIDERS.items():
            found_under = by_id.get(other)
            model = found_under.find_model(ref) if found_under is not None else None
            if model is not None and str(model.id).lower().startswith(prefixes):
                return model, None, other
    return None


def _time_of_day_priced(model: Any) -> bool:
    """True when genai-prices gives ``model`` prices that change with the time of day
    (DeepSeek's off-peak hours)."""
    from genai_prices.types import ConditionalPrice, TimeOfDateConstraint

    return isinstance(model.prices, list) and any(
        isinstance(c, ConditionalPrice) and isinstance(c.constraint, TimeOfDateConstraint)
        for c in model.prices)


def _genai_prices(refs: list[str], provider: Provider | None, at: datetime,
                  *, time_known: bool = True) -> _Found | None:
    """Prices genai-prices gives for the first of ``refs`` it knows, at ``at``.

    ``time_known`` False (no request time was given, ``at`` is now): a model whose prices
    change with the time of day is priced as at 12:00 UTC of ``at``'s date, the same price
    whenever the question is asked (the note says so), not the hour the report runs.
    """
    from genai_prices.types import ConditionalPrice, StartDateConstraint, TieredPrices

    hit = _genai_model(refs, provider)
    if hit is None:
        return None
    model, pid, genai_provider = hit
    note = model.price_comments
    if not time_known and _time_of_day_priced(model):
        at = at.replace(hour=12, minute=0, second=0, microsecond=0)
        note = "; ".join(x for x in (
            note, "prices change with the time of day; no request time given: priced as at "
                  "12:00 UTC") if x)
    price = model.get_prices(at)  # standard tier, the conditional price active at `at`
    effective: date | None = None
    if isinstance(model.prices, list):
        for cond in reversed(model.prices):
            if not isinstance(cond, ConditionalPrice):
                continue
            constraint = cond.constraint
            if constraint is None or constraint.active(at):
                if isinstance(constraint, StartDateConstraint):
                    effective = constraint.start_date
                break
    write_key = "cache_write_5m" if pid == "anthropic" else "cache_write"
    keys = {
        "input_mtok": "input",
        "output_mtok": "output",
        "cache_read_mtok": "cache_read",
        "cache_write_mtok": write_key,
        "cache_write_1h_mtok": "cache_write_1h",
    }
    base: dict[str, Decimal] = {}
    tiered: dict[str, Any] = {}
    for gkey, ours in keys.items():
        value = getattr(price, gkey, None)
        if value is None:
            continue
        if isinstance(value, TieredPrices):
            base[ours] = value.base
            tiered[ours] = value
        else:
            base[ours] = Decimal(value)
    starts = sorted({t.start for v in tiered.values() for t in v.tiers})
    tiers: list[PriceTier] = []
    for start in starts:
        row: dict[str, Decimal] = {}
        for ours, value in tiered.items():
            applicable = value.base
            for t in value.tiers:
                if t.start <= start:
                    applicable = t.price
            row[ours] = applicable
        tiers.append(PriceTier(above_tokens=start, **row))
    if "input" not in base or "output" not in base:
        return None  # audio/image-only entries: not a token-priced chat model
    return _Found(
        model_id=model.id,
        provider=pid,
        genai_provider=genai_provider,
        prices=base,
        tiers=tuple(tiers),
        effective_from=effective,
        note=note,
        at=at,
    )


# ----------------------------------------------------------------------- catalog fallback rows


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    models: tuple[str, ...]
    effective_from: date | None = Field(default=None, alias="from")
    input: Decimal = Field(ge=0)
    output: Decimal = Field(ge=0)
    cache_read: Decimal | None = Field(default=None, ge=0)
    cache_write_5m: Decimal | None = Field(default=None, ge=0)
    cache_write_1h: Decimal | None = Field(default=None, ge=0)
    cache_write: Decimal | None = Field(default=None, ge=0)
    source: str
    as_of: date | None = None
    confirmed: bool = True
    note: str | None = None
    # True where genai-prices is wrong for this row's period (decided with the reference; the
    # row's note says why): the row then wins over genai-prices.
    wins_over_genai_prices: bool = False


@cache
def _catalog_rows() -> dict[str, tuple[_Row, ...]]:
    try:
        text = resources.files("promptcache.catalog").joinpath("prices.toml").read_text("utf-8")
        raw = tomllib.loads(text)
        rows = [_Row.model_validate(r) for r in raw["rows"]]
    except (OSError, KeyError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise CatalogError(f"promptcache/catalog/prices.toml: {exc}") from exc
    sources = _catalog().sources
    by_model: dict[str, list[_Row]] = {}
    for row in rows:
        if row.source not in sources:
            raise CatalogError(f"prices.toml: unknown source tag {row.source!r}")
        for model_id in row.models:
            if resolve_model_id(model_id) != model_id:
                raise CatalogError(f"prices.toml: {model_id!r} is not a catalog model id")
            by_model.setdefault(model_id, []).append(row)
    return {
        k: tuple(sorted(v, key=lambda r: r.effective_from or date.min)) for k, v in by_model.items()
    }


def catalog_price_rows() -> dict[str, tuple[dict[str, Any], ...]]:
    """The catalog's fallback price rows by model id (for inspection and tests)."""
    return {
        k: tuple(r.model_dump(by_alias=False) for r in rows) for k, rows in _catalog_rows().items()
    }


def _catalog_prices(model_id: str, at: datetime) -> _Found | None:
    rows = _catalog_rows().get(model_id)
    if not rows:
        return None
    chosen = rows[0]
    for row in rows:
        if row.effective_from is None or row.effective_from <= at.date():
            chosen = row
    policy = get_policy(model_id)
    base = {
        name: getattr(chosen, name) for name in PRICE_FIELDS if getattr(chosen, name) is not None
    }
    tiers: list[PriceTier] = []
    for rule in policy.tier_rules:  # derive tier prices from the policy's tier rule
        mult = {
            "input": rule.input_multiplier,
            "output": rule.output_multiplier,
            "cache_read": rule.cache_multiplier,
            "cache_write_5m": rule.cache_multiplier,
            "cache_write_1h": rule.cache_multiplier,
            "cache_write": rule.cache_multiplier,
        }
        tiers.append(
            PriceTier(
                above_tokens=rule.above_tokens,
                **{k: v * Decimal(str(mult[k])) for k, v in base.items()},
            )
        )
    return _Found(
        model_id=model_id,
        provider=policy.provider,
        prices=base,
        tiers=tuple(tiers),
        effective_from=chosen.effective_from,
        note=chosen.note if chosen.confirmed else f"UNCONFIRMED: {chosen.note}",
        wins=chosen.wins_over_genai_prices,
        confirmed=chosen.confirmed,
    )


def _unconfirmed_note(note: str | None) -> str:
    """A catalog row's note for a price the reference marks UNCONFIRMED, said once."""
    text = (note or "").removeprefix("UNCONFIRMED: ")
    return text if "UNCONFIRMED" in text else f"UNCONFIRMED in the reference: {text}"


def _catalog_source(model_id: str, found: _Found) -> PriceSource:
    rows = _catalog_rows()[model_id]
    row = next(r for r in rows if r.effective_from == found.effective_from)
    src = _catalog().sources[row.source]
    return PriceSource(
        kind="catalog",
        url=src.url,
        as_of=row.as_of or src.as_of,
        effective_from=row.effective_from,
        confirmed=row.confirmed,
        note=row.note,
    )


# -------------------------------------------------------------------------------- overrides


class PriceOverride(BaseModel):
    """One model's entry in a user price override file (USD per MTok)."""

    model_config = _FROZEN

    input: Decimal | None = Field(default=None, ge=0)
    output: Decimal | None = Field(default=None, ge=0)
    cache_read: Decimal | None = Field(default=None, ge=0)
    cache_write_5m: Decimal | None = Field(default=None, ge=0)
    cache_write_1h: Decimal | None = Field(default=None, ge=0)
    cache_write: Decimal | None = Field(default=None, ge=0)
    tiers: tuple[PriceTier, ...] | None = None
    as_of: date | None = None
    note: str | None = None
    path: str = ""


class _OverrideFile(BaseModel):
    model_config = _FROZEN

    models: dict[str, PriceOverride]


_installed: dict[str, PriceOverride] = {}
_env_cache: dict[tuple[str, int], dict[str, PriceOverride]] = {}
#: bumped by every load_overrides(install=True) / clear_overrides (see overrides_version)
_generation = 0


def is_fine_tuned(model: str) -> bool:
    """Whether ``model`` is an OpenAI fine-tuned model id (``ft:gpt-4o-2024-08-06:org::id``),
    which is billed at its own rates, never its base model's: :func:`get_prices` prices it only
    from an override entry naming the ``ft:`` id itself."""
    return model.strip().lower().startswith("ft:")


def _override_key(model: str) -> str:
    if is_fine_tuned(model):  # its own prices, never its base model's
        return model.strip().lower()
    return resolve_model_id(model) or _base_key(model)


def _parse_overrides(path: Path) -> dict[str, PriceOverride]:
    where = str(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CatalogError(f"{where}: price override file not found") from exc
    except OSError as exc:
        raise CatalogError(f"{where}: cannot read price override file ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise CatalogError(f"{where}: not UTF-8 text ({exc.reason})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{where}: invalid TOML ({exc})") from exc
    if set(raw) - {"models"}:
        extra = ", ".join(sorted(set(raw) - {"models"}))
        raise CatalogError(
            f'{where}: unknown top-level key(s) {extra}; put prices under [models."<id>"]'
        )
    try:
        parsed = _OverrideFile.model_validate(raw if raw else {"models": {}})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise CatalogError(f"{where}: {loc}: {err['msg']}") from exc
    out: dict[str, PriceOverride] = {}
    for model, entry in parsed.models.items():
        if entry.tiers is not None:
            starts = [t.above_tokens for t in entry.tiers]
            if len(set(starts)) != len(starts):
                raise CatalogError(f"{where}: models.{model}.tiers: duplicate above_tokens")
        out[_override_key(model)] = entry.model_copy(update={"path": where})
    return out


def load_overrides(
    path: str | os.PathLike[str], *, install: bool = True
) -> dict[str, PriceOverride]:
    """Read a user price override file (TOML; format in this module's docstring).

    Args:
        path: the file.
        install: when True (default) the overrides apply to later :func:`get_prices` calls in
            this process (a later file's entries replace an earlier file's for the same model).

    Returns:
        The overrides by model key (canonical catalog id when the catalog knows the model).

    Raises:
        CatalogError: the file is missing, unreadable, not TOML, or has an unknown key, a
            negative or non-numeric price; the message names the file and the reason.
    """
    global _generation
    parsed = _parse_overrides(Path(path))
    if install:
        _installed.update(parsed)
        _generation += 1
    return parsed


def clear_overrides() -> None:
    """Forget overrides installed by :func:`load_overrides` (the env var still applies)."""
    global _generation
    _installed.clear()
    _generation += 1


def overrides_version() -> tuple[int, str | None, int | None]:
    """A token that changes whenever the price overrides :func:`get_prices` applies may have
    changed: :func:`load_overrides` / :func:`clear_overrides` called, ``$PROMPTCACHE_PRICES``
    set to another file or its file modified (path, mtime in ns; None when unset or
    unreadable). Whoever keeps prices looked up earlier (``UsageTracker``) drops them when
    the token changes."""
    value = os.environ.get(PRICES_ENV_VAR)
    if not value:
        return (_generation, None, None)
    try:
        mtime: int | None = os.stat(value).st_mtime_ns
    except OSError:
        mtime = None
    return (_generation, value, mtime)


def _env_overrides() -> dict[str, PriceOverride]:
    value = os.environ.get(PRICES_ENV_VAR)
    if not value:
        return {}
    path = Path(value)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError as exc:
        raise CatalogError(
            f"{value}: price override file from ${PRICES_ENV_VAR} cannot be read "
            f"({exc.strerror or exc})"
        ) from exc
    key = (str(path), mtime)
    if key not in _env_cache:
        _env_cache.clear()
        _env_cache[key] = _parse_overrides(path)
    return _env_cache[key]


def _override_for(model: str) -> PriceOverride | None:
    if is_fine_tuned(model):  # only an entry naming the fine-tuned id itself
        key = _override_key(model)
        return _installed.get(key) or _env_overrides().get(key)
    keys = {_override_key(model), *_candidates(model)}
    canonical = resolve_model_id(model)
    found: PriceOverride | None = None
    for table in (_env_overrides(), _installed):  # installed (explicit) wins over env
        for key in keys:
            if key in table:
                found = table[key]
        if canonical is not None and canonical in table:
            found = table[canonical]
    return found


# ------------------------------------------------------------------------------------- API


def get_prices(model: str, *, at: datetime | date | None = None) -> ModelPrices:
    """Prices of ``model`` (USD per million tokens, Decimal) at request time ``at``.

    Args:
        model: a model id as sent to the API (snapshots, aliases and provider prefixes as in
            :func:`~promptcache.catalog.get_policy`); models outside the policy catalog work
            when genai-prices (Anthropic, OpenAI, DeepSeek and Gemini models) or an override
            file knows them.
        at: the request time (default: now, UTC; a naive datetime is UTC, a date is midnight
            UTC). Chooses among dated prices (e.g. Claude Sonnet 5.5's read price change on
            2026-10-07) and time-of-day prices (DeepSeek's off-peak hours in genai-prices;
            with ``at=None`` or a date (no time of day) those are taken at 12:00 UTC of that
            day, and ``ModelPrices.at`` says so).

    Returns:
        :class:`ModelPrices`; use ``.for_prompt(prompt_tokens)`` for the flat prices of one
        request under the model's prompt-length tiers.

    Raises:
        UnknownPriceError: (an :class:`UnknownModelError`) no source has prices for ``model``;
            also for an OpenAI fine-tuned id (``ft:...``) that no override entry names: a
            fine-tuned model is billed at its own rates, not its base model's list price.
        CatalogError: a price override file is malformed (names the file and the reason).

    A fine-tuned id is priced only by an override entry under that exact id (input and output
    required; a price it leaves out is None, never the base model's).

    Sources: genai-prices 0.2.3 bundled data (https://github.com/pydantic/genai-prices); the
    catalog rows cite hosted-api-rules.md's sources.
    """
    when = _as_utc(at)
    if is_fine_tuned(model):
        return _fine_tune_prices(model, when)
    canonical = resolve_model_id(model)
    provider: Provider | None = get_policy(canonical).provider if canonical else None
    refs = [*_candidates(model)]
    if canonical is not None:
        refs.append(canonical)
        refs.extend(get_policy(canonical).aliases)
    refs = list(dict.fromkeys(refs))

    source: PriceSource | None = None
    found = _catalog_prices(canonical, when) if canonical is not None else None
    row = found  # the catalog's row for this period: its UNCONFIRMED mark is kept below
    if found is not None and canonical is not None and found.wins:
        source = _catalog_source(canonical, found)
    else:
        # a date carries no time of day, like None: a model priced by the hour is taken at
        # 12:00 UTC of that date, not at midnight (DeepSeek's off-peak window; review 13)
        genai = _genai_prices(refs, provider, when, time_known=isinstance(at, datetime))
        if genai is not None:
            from genai_prices import __version__ as genai_version

            found = genai
            other = "" if genai.provider is not None else (
                f" (provider {genai.genai_provider!r}"
                + (f"; {genai.note}" if genai.note else "") + ")")
            unconfirmed = row is not None and not row.confirmed
            source = PriceSource(
                kind="genai-prices",
                url=GENAI_PRICES_URL,
                effective_from=genai.effective_from,
                # the reference marks the period's price UNCONFIRMED (the catalog row says
                # so): genai-prices carrying the same number does not confirm it (review 15)
                confirmed=not unconfirmed,
                note=f"genai-prices {genai_version} bundled data, model {genai.model_id!r}"
                + other + (f"; {_unconfirmed_note(row.note)}" if unconfirmed and row is not None
                           else ""),
            )
        elif found is not None and canonical is not None:
            source = _catalog_source(canonical, found)

    override = _override_for(model)
    model_id = canonical or (found.model_id if found else _base_key(model))
    if found is None and override is None:
        raise UnknownPriceError(model, [m for m in _suggest(model, 4) if m != canonical][:3])

    values: dict[str, Any] = dict(found.prices) if found else {}
    tiers: tuple[PriceTier, ...] = found.tiers if found else ()
    field_sources: dict[str, PriceSource] = {}
    if override is not None:
        osrc = PriceSource(
            kind="override",
            url=Path(override.path).resolve().as_uri() if override.path else "override",
            as_of=override.as_of,
            note=override.note,
        )
        for name in PRICE_FIELDS:
            value = getattr(override, name)
            if value is not None:
                values[name] = value
                field_sources[name] = osrc
        if override.tiers is not None:
            tiers = override.tiers
            field_sources["tiers"] = osrc
        if source is None:
            source = osrc
        if "input" not in values or "output" not in values:
            raise CatalogError(
                f"{override.path}: models.{model}: no genai-prices or catalog prices for this "
                "model, so the override must give at least input and output"
            )
    if source is None:  # unreachable: found or override is set, and each sets a source
        raise UnknownPriceError(model)
    policy_tiers = get_policy(canonical).tier_rules if canonical else ()
    counts = policy_tiers[0].counts if policy_tiers else ("input", "cache_read", "cache_write")
    return ModelPrices(
        model_id=model_id,
        provider=provider or (found.provider if found else None),
        tiers=tuple(sorted(tiers, key=lambda t: t.above_tokens)),
        tier_counts=counts,
        source=source,
        field_sources=field_sources,
        at=found.at if found is not None and found.at is not None else when,
        **values,
    )


def _fine_tune_prices(model: str, when: datetime) -> ModelPrices:
    """Prices of a fine-tuned id from the override entry naming it (see :func:`get_prices`)."""
    override = _override_for(model)
    if override is None:
        err = UnknownPriceError(model)
        err.args = (f"no prices for fine-tuned model {model!r}: fine-tuned models are billed at "
                    "their own rates, not the base model's list price. Add the ft: id to a "
                    f"price override file (load_overrides(path) or ${PRICES_ENV_VAR}).",)
        raise err
    if override.input is None or override.output is None:
        raise CatalogError(f"{override.path}: models.{model}: a fine-tuned model's entry must "
                           "give at least input and output")
    canonical = resolve_model_id(model)
    src = PriceSource(
        kind="override",
        url=Path(override.path).resolve().as_uri() if override.path else "override",
        as_of=override.as_of, note=override.note)
    return ModelPrices(
        model_id=model.strip(),
        provider=get_policy(canonical).provider if canonical else None,
        tiers=tuple(sorted(override.tiers or (), key=lambda t: t.above_tokens)),
        source=src,
        at=when,
        **{name: getattr(override, name) for name in PRICE_FIELDS},
    )


def _reference_refs(model_id: str) -> list[str]:
    """ids to try in genai-prices for a catalog model (used by tests)."""
    policy = get_policy(model_id)
    return list(dict.fromkeys([model_id, *policy.aliases]))


def genai_prices_for(model_id: str, *, at: datetime | date | None = None) -> ModelPrices | None:
    """Prices genai-prices alone carries for a catalog model (no fallback, no override).

    Returns None when genai-prices lacks the model. Used to compare the catalog with it.
    """
    when = _as_utc(at)
    policy = get_policy(model_id)
    found = _genai_prices(_reference_refs(model_id), policy.provider, when)
    if found is None:
        return None
    return ModelPrices.model_validate(
        {
            "model_id": policy.model_id,
            "provider": policy.provider,
            "tiers": found.tiers,
            "source": PriceSource(kind="genai-prices", url=GENAI_PRICES_URL, note=found.model_id),
            "at": when,
            **found.prices,
        }
    )


def catalog_prices_for(model_id: str, *, at: datetime | date | None = None) -> ModelPrices | None:
    """Prices from the catalog's own rows alone (no genai-prices, no override), or None."""
    when = _as_utc(at)
    found = _catalog_prices(model_id, when)
    if found is None:
        return None
    return ModelPrices.model_validate(
        {
            "model_id": model_id,
            "provider": found.provider,
            "tiers": found.tiers,
            "source": _catalog_source(model_id, found),
            "at": when,
            **found.prices,
        }
    )
