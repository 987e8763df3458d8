"""Request settings that change a request's price: service tier, inference geo, fast mode.

Data: the ``[[service_tiers]]``, ``[[inference_geo]]``, ``[[fast_mode]]`` and
``[[regional_endpoints]]`` tables of ``prices.toml`` (copied from hosted-api-rules.md 1.6 and
2.5, each row with its source tag). :func:`price_adjustment` turns one request's settings into
a :class:`PriceAdjustment`; ``promptcache.usage.billing`` applies it. Batch is not here: it is
the policy's ``batch_multiplier``.

Rules:

* ``service_tier`` (as the response reports it): a tier with a catalog multiplier re-prices
  every token (OpenAI ``"flex"``: 0.5x); the standard tiers (``"default"``, ``"auto"``,
  ``"standard"``) keep the list price; any other tier (``"priority"``, ``"scale"``, a value the
  catalog does not list) cannot be priced: ``unknown`` says why.
* ``inference_geo``: ``"us"`` is 1.1x on every token for Claude 4.6 and later (the rows'
  ``models``); ``"global"`` / ``"not_available"`` keep the list price; another value on such a
  model cannot be priced. Models outside the list keep the list price.
* ``speed``: ``"fast"`` uses the catalog's fast-mode prices (Anthropic: input and output only,
  so cache reads and writes in fast mode have no price) or multiplier (OpenAI: 2x); a model
  without a fast-mode row cannot be priced. ``"standard"`` / None: list price.
* Bedrock / Google Cloud model ids (``bedrock/...``, ``us.anthropic....``, ``vertex_ai/...``,
  ``...@date``) of Anthropic models get a note: regional endpoints charge a separate 10 %
  premium, which is not applied (the endpoint type is not known from the id).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache, lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from promptcache._errors import CatalogError
from promptcache.catalog._policy import _catalog, get_policy, resolve_model_id

__all__ = ["PriceAdjustment", "price_adjustment"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class _TierRow(BaseModel):
    model_config = _FROZEN
    tiers: tuple[str, ...]
    providers: tuple[str, ...]
    any_provider: bool = False
    multiplier: Decimal | None = Field(default=None, gt=0)
    source: str | None = None
    note: str


class _GeoRow(BaseModel):
    model_config = _FROZEN
    geo: str
    multiplier: Decimal = Field(gt=0)
    standard: tuple[str, ...]
    models: tuple[str, ...]
    source: str
    note: str


class _FastRow(BaseModel):
    model_config = _FROZEN
    models: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    input: Decimal | None = Field(default=None, ge=0)
    output: Decimal | None = Field(default=None, ge=0)
    multiplier: Decimal | None = Field(default=None, gt=0)
    source: str
    note: str


class _RegionalRow(BaseModel):
    model_config = _FROZEN
    premium: Decimal
    id_prefixes: tuple[str, ...]
    id_contains: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    source: str
    note: str


class _Modifiers(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    service_tiers: tuple[_TierRow, ...]
    inference_geo: tuple[_GeoRow, ...]
    fast_mode: tuple[_FastRow, ...]
    regional_endpoints: tuple[_RegionalRow, ...]


@cache
def _modifiers() -> _Modifiers:
    try:
        text = resources.files("promptcache.catalog").joinpath("prices.toml").read_text("utf-8")
        data = _Modifiers.model_validate(tomllib.loads(text))
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise CatalogError(f"promptcache/catalog/prices.toml: {exc}") from exc
    sources = _catalog().sources
    rows: list[Any] = [*data.service_tiers, *data.inference_geo, *data.fast_mode,
                       *data.regional_endpoints]
    for row in rows:
        if row.source is not None and row.source not in sources:
            raise CatalogError(f"prices.toml: unknown source tag {row.source!r}")
        for model_id in getattr(row, "models", ()):
            if resolve_model_id(model_id) != model_id:
                raise CatalogError(f"prices.toml: {model_id!r} is not a catalog model id")
    for fast in data.fast_mode:
        if fast.multiplier is None and (fast.input is None or fast.output is None):
            raise CatalogError("prices.toml: a [[fast_mode]] row needs a multiplier or both "
                               "input and output")
    return data


def _why(note: str, tag: str | None) -> str:
    """``(note; source URL)``."""
    return f"({note})" if tag is None else f"({note}; {_catalog().sources[tag].url})"


@dataclass(frozen=True)
class PriceAdjustment:
    """How a request's settings change its list prices (USD per MTok).

    Attributes:
        multiplier: factor on every token price (input, cache read, cache writes, output);
            the product of the service tier's and the inference geo's factors.
        replace: prices (USD per MTok) that replace the list prices before ``multiplier``
            (fast mode): a field absent from the mapping keeps its list price, a field mapped
            to ``None`` has no price in this mode (tokens of that kind make the cost unknown).
        unknown: why the request cannot be priced (a setting the catalog has no price for);
            non-empty means the cost is unknown.
        notes: what was applied or assumed, each with its source URL.
    """

    multiplier: Decimal = Decimal(1)
    replace: Mapping[str, Decimal | None] = field(default_factory=lambda: MappingProxyType({}))
    unknown: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _provider_of(model: str | None, record_provider: str | None) -> tuple[str | None, str | None]:
    """(catalog model id or None, "anthropic" / "openai" / None)."""
    canonical = resolve_model_id(model) if model else None
    if canonical is not None:
        return canonical, get_policy(canonical).provider
    fam = {"anthropic": "anthropic", "openai": "openai", "openai-responses": "openai"}
    return None, fam.get(record_provider or "")


def _norm(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip().lower()
    return text or None


def price_adjustment(
    model: str | None,
    *,
    provider: str | None = None,
    service_tier: str | None = None,
    inference_geo: str | None = None,
    speed: str | None = None,
) -> PriceAdjustment:
    """The price adjustment of one request (catalog data: ``prices.toml`` modifier tables).

    Args:
        model: the model id as sent or reported (snapshots, prefixes as ``get_policy``).
        provider: the usage record's provider (``"anthropic"``, ``"openai"``, ``"bedrock"``...),
            used when the catalog does not know ``model``.
        service_tier: the tier the response reports; ``"batch"`` is ignored here (the batch
            discount is the policy's ``batch_multiplier``).
        inference_geo: Anthropic ``usage.inference_geo``.
        speed: the request's ``speed`` (``"fast"`` / ``"standard"``).

    Returns:
        A :class:`PriceAdjustment`; ``unknown`` non-empty when a setting cannot be priced.

    Raises:
        CatalogError: ``prices.toml`` is malformed.

    Sources: hosted-api-rules.md 1.6 (inference_geo, fast mode, regional endpoints: the
    Anthropic pricing page) and 2.5 (Flex, fast mode: third-party copies of OpenAI's pricing).
    """
    return _adjustment(model, provider, service_tier, inference_geo, speed)


@lru_cache(maxsize=4096)  # a report prices every record: one lookup per distinct setting
def _adjustment(model: str | None, provider: str | None, service_tier: str | None,
                inference_geo: str | None, speed: str | None) -> PriceAdjustment:
    data = _modifiers()
    canonical, family = _provider_of(model, provider)
    mult = Decimal(1)
    replace: dict[str, Decimal | None] = {}
    unknown: list[str] = []
    notes: list[str] = []

    tier = _norm(service_tier)
    if tier is not None and tier != "batch":
        row = next((r for r in data.service_tiers if tier in r.tiers and (
            family in r.providers or (family is None and r.any_provider))), None)
        if row is None or row.multiplier is None:
            why = row.note if row is not None else "the catalog has no price for this tier"
            unknown.append(f"service_tier {tier!r}: not priced ({why})")
        elif row.multiplier != 1:
            mult *= row.multiplier
            notes.append(f"service_tier {tier!r}: {row.multiplier:g}x the list price "
                         f"{_why(row.note, row.source)}")

    geo = _norm(inference_geo)
    if geo is not None and canonical is not None:
        for g in data.inference_geo:
            if canonical not in g.models or geo in g.standard:
                continue
            if geo == g.geo:
                mult *= g.multiplier
                notes.append(f"inference_geo {geo!r}: {g.multiplier:g}x the list price "
                             f"{_why(g.note, g.source)}")
            else:
                unknown.append(f"inference_geo {geo!r}: not priced (the catalog prices only "
                               f"{g.geo!r} ({g.multiplier:g}x) and {', '.join(g.standard)})")
            break

    fast = _norm(speed)
    if fast is not None and fast != "standard":
        row_f = None
        if fast == "fast":
            row_f = next((r for r in data.fast_mode if canonical is not None
                          and canonical in r.models), None) or next(
                (r for r in data.fast_mode if not r.models and family in r.providers), None)
        if row_f is None:
            what = model or "this model"
            unknown.append(f"speed {fast!r}: not priced (the reference gives no fast-mode "
                           f"price for {what})"
                           if fast == "fast" else f"speed {fast!r}: not priced (unknown mode)")
        elif row_f.multiplier is not None:
            mult *= row_f.multiplier
            notes.append(f"speed 'fast': {row_f.multiplier:g}x the list price "
                         f"{_why(row_f.note, row_f.source)}")
        else:
            replace = {"input": row_f.input, "output": row_f.output, "cache_read": None,
                       "cache_write_5m": None, "cache_write_1h": None, "cache_write": None}
            notes.append(f"speed 'fast': fast-mode prices ${row_f.input:g} input / "
                         f"${row_f.output:g} output per MTok {_why(row_f.note, row_f.source)}")

    key = (model or "").strip().lower()
    if family == "anthropic" or "claude" in key:
        for reg in data.regional_endpoints:
            if (key.startswith(reg.id_prefixes) or any(c in key for c in reg.id_contains)
                    or (provider in reg.providers)):
                notes.append(f"regional endpoint: a {(reg.premium * 100).normalize():f}% premium applies on a "
                             "regional endpoint; not included, as the endpoint type is not "
                             f"known from the model id {_why(reg.note, reg.source)}")
                break
    return PriceAdjustment(multiplier=mult, replace=MappingProxyType(replace),
                           unknown=tuple(unknown),
                           notes=tuple(notes))
