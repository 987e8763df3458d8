"""Provider-wide cache rules, loaded from the shipped ``provider_rules.toml``.

Two kinds of provider fact that are not per-model policy live in
``promptcache/catalog/provider_rules.toml``, each with a source URL and an as-of date:

- :func:`provider_rules`: provider-level facts (:class:`ProviderRules`): OpenAI's request rate
  per prefix + ``prompt_cache_key`` above which requests spill to other machines, the
  reason values of each provider's own cache diagnostics, Anthropic's ``max_tokens=0``
  pre-warm and what it cannot be combined with (:meth:`ProviderRules.check_prewarm`, shared by
  the builder and the SDK keep-alive), and the Responses API's smallest ``max_output_tokens``.
- :func:`invalidation_rules`: which top-level request parameter invalidates the cache from
  which tier on (:class:`InvalidationRule`; hosted-api-rules.md 1.7 for Anthropic).

This module only loads, validates (pydantic; a malformed file raises
:class:`~promptcache._errors.CatalogError`) and looks the data up, like ``_policy.py`` does for
``policies.toml``. Sources are the ones listed in ``shared/reference/hosted-api-rules.md`` and
``shared/reference/peer-tools.md``.

Deviation from DESIGN.md: none in substance; the invalidation table used to live in
``promptcache.diff._causes`` because the catalog had no place for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from promptcache._errors import CatalogError, InvalidRequestError
from promptcache.catalog._policy import (
    Provider,
    Source,
    _parse_sources,
    _read_toml,
    _source_for,
)

__all__ = [
    "ImageLimits",
    "InvalidationRule",
    "PrewarmRejection",
    "ProviderRules",
    "invalidation_rules",
    "provider_rules",
    "provider_rules_sources",
]

_FILE = "provider_rules.toml"
_PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai")

#: The fields every provider must have (a field may have no value, but always a source).
PROVIDER_FIELDS: tuple[str, ...] = (
    "key_overflow_rpm",
    "diagnostics_reasons",
    "prewarm_max_tokens",
    "prewarm_rejects",
    "min_max_output_tokens",
    "image_limits",
)

_NULLABLE = frozenset(
    {"key_overflow_rpm", "prewarm_max_tokens", "prewarm_rejects", "min_max_output_tokens",
     "image_limits"}
)

_FROZEN = ConfigDict(frozen=True, extra="forbid")

Tier = Literal["tools", "system", "messages"]


class PrewarmRejection(BaseModel):
    """A request setting a pre-warm cannot be combined with.

    Attributes:
        param: dotted path into the request's parameters (``"thinking.type"``).
        equals: the rejected values (compared with their type: ``True`` is not ``1``); empty
            means any value present and not None is rejected.
    """

    model_config = _FROZEN

    param: str = Field(min_length=1)
    equals: tuple[str | bool | int, ...] = ()

    def matches(self, request: Mapping[str, Any]) -> bool:
        """True when ``request`` holds a rejected value at :attr:`param`."""
        value: Any = request
        for key in self.param.split("."):
            if not isinstance(value, Mapping) or key not in value:
                return False
            value = value[key]
        if not self.equals:
            return value is not None
        return any(type(value) is type(v) and value == v for v in self.equals)


class ImageLimits(BaseModel):
    """How the provider sizes an image before the model reads it (Anthropic; source
    https://platform.claude.com/docs/en/build-with-claude/vision, "Evaluate image size").

    Attributes:
        max_long_edge_px: an image whose long edge is longer is scaled down (1568).
        max_tokens: an image that would cost more tokens is scaled down (~1,600).
        pixels_per_token: tokens ~= width * height / this, after scaling (750).
        recommended_megapixels: the page's resize recommendation (1.15 MP); informational.
    """

    model_config = _FROZEN

    max_long_edge_px: int = Field(gt=0)
    max_tokens: int = Field(gt=0)
    pixels_per_token: float = Field(gt=0)
    recommended_megapixels: float | None = Field(default=None, gt=0)


class ProviderRules(BaseModel):
    """Provider-level cache facts (frozen).

    Attributes:
        provider: ``"anthropic"`` or ``"openai"``.
        key_overflow_rpm: requests per minute per prefix + ``prompt_cache_key`` above which
            some requests spill to other machines and miss (OpenAI: about 15; source
            https://developers.openai.com/api/docs/guides/prompt-caching.md); None where the
            provider has no such routing key (Anthropic).
        diagnostics_reasons: the reason values of the provider's cache diagnostics
            (Anthropic ``diagnostics.cache_miss_reason.type``, OpenAI
            ``prompt_cache_diagnostics.reason``).
        prewarm_max_tokens: the output limit that makes a request a pre-warm (prefill and
            cache writes only, no output): Anthropic ``max_tokens=0``; source
            https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/prompt-caching.md
            (also https://platform.claude.com/docs/en/build-with-claude/prompt-caching). None
            where the provider documents no pre-warm (OpenAI).
        prewarm_rejects: the request settings a pre-warm is rejected with (Anthropic:
            ``stream: true``, ``thinking.type: "enabled"``, a forced ``tool_choice``
            (``tool`` / ``any``), ``output_config.format``; same sources); see
            :meth:`check_prewarm`. Empty where there is no pre-warm.
        min_max_output_tokens: the smallest ``max_output_tokens`` the OpenAI Responses API
            accepts (16). UNCONFIRMED (``sources[...].confirmed`` is False): no official
            source, only the API's error text quoted in
            https://github.com/vectorize-io/hindsight/issues/58. None for Anthropic.
        image_limits: how an image is scaled and counted (:class:`ImageLimits`; Anthropic:
            1568 px long edge, ~1,600 tokens, width * height / 750; source
            https://platform.claude.com/docs/en/build-with-claude/vision). None for OpenAI.
        sources: field name -> :class:`Source` (URL and as-of date) for every field above
            (from ``key_overflow_rpm`` on).
        rules_as_of: the date of the file's data as a whole.
    """

    model_config = _FROZEN

    provider: Provider
    key_overflow_rpm: float | None = Field(default=None, gt=0)
    diagnostics_reasons: tuple[str, ...] = ()
    prewarm_max_tokens: int | None = Field(default=None, ge=0)
    prewarm_rejects: tuple[PrewarmRejection, ...] = ()
    min_max_output_tokens: int | None = Field(default=None, ge=1)
    image_limits: ImageLimits | None = None
    sources: dict[str, Source] = Field(default_factory=dict)
    rules_as_of: date | None = None

    def prewarm_conflict(self, request: Mapping[str, Any]) -> PrewarmRejection | None:
        """The first of :attr:`prewarm_rejects` that ``request`` (create() keyword arguments)
        holds, or None."""
        return next((r for r in self.prewarm_rejects if r.matches(request)), None)

    def check_prewarm(self, request: Mapping[str, Any]) -> None:
        """Refuse a pre-warm request (``max_tokens`` = :attr:`prewarm_max_tokens`) the API
        rejects; no-op where the provider has no pre-warm rules.

        Raises:
            InvalidRequestError: ``request`` holds one of :attr:`prewarm_rejects`; the path is
                its ``param`` (``"thinking.type"``), the message names the source URL.
        """
        bad = self.prewarm_conflict(request)
        if bad is None:
            return
        src = self.sources.get("prewarm_rejects")
        where = f" ({src.url})" if src is not None else ""
        raise InvalidRequestError(
            bad.param,
            f"cannot be combined with max_tokens={self.prewarm_max_tokens} (a pre-warm: "
            f"prefill and cache writes only), the API rejects it{where}",
        )


class InvalidationRule(BaseModel):
    """A top-level request parameter whose change invalidates the cache from one tier on.

    Attributes:
        provider: ``"anthropic"`` or ``"openai"``.
        keys: dotted paths into the request's top-level (non-segment) parameters, e.g.
            ``("output_config.format", "output_format")``; the first one present wins.
        cause: the ``promptcache diff`` cause code reported for the change.
        invalidates: the first tier invalidated, in render order tools -> system -> messages
            (``"tools"`` means the whole cache).
        note: caveat shown beside the cause (empty when none).
        source: where the rule comes from (URL, as-of date).
    """

    model_config = _FROZEN

    provider: Provider
    keys: tuple[str, ...] = Field(min_length=1)
    cause: str = Field(min_length=1)
    invalidates: Tier
    note: str = ""
    source: Source


class _Rules(BaseModel):
    """The loaded file: provider facts by provider, and the invalidation table."""

    model_config = ConfigDict(frozen=True)

    as_of: date
    providers: dict[str, ProviderRules]
    invalidation: tuple[InvalidationRule, ...]
    sources: dict[str, Source]


_RULE_KEYS = frozenset({"provider", "keys", "cause", "invalidates", "note", "source", "also"})


def build_rules(raw: Mapping[str, Any]) -> _Rules:
    """Validate parsed ``provider_rules.toml`` data.

    Raises:
        CatalogError: a missing or unknown field, provider or source tag, a value of the wrong
            type, or a provider without an entry.
    """
    try:
        as_of = raw["rules_as_of"]
        sources = _parse_sources(raw["sources"])
        providers_raw: dict[str, Any] = raw["providers"]
        table: list[Any] = raw["invalidation"]
    except (KeyError, TypeError, ValidationError) as exc:
        raise CatalogError(f"{_FILE}: malformed header or sources: {exc}") from exc

    missing_providers = [p for p in _PROVIDERS if p not in providers_raw]
    if missing_providers:
        raise CatalogError(f"{_FILE}: no [providers] entry for {missing_providers}")
    providers: dict[str, ProviderRules] = {}
    for name, spec in providers_raw.items():
        where = f"[providers.{name}]"
        if not isinstance(spec, Mapping):
            raise CatalogError(f"{_FILE} {where}: expected a table")
        unknown = set(spec) - set(PROVIDER_FIELDS)
        if unknown:
            raise CatalogError(f"{_FILE} {where}: unknown field {sorted(unknown)}")
        missing = [f for f in PROVIDER_FIELDS if f not in spec]
        if missing:
            raise CatalogError(f"{_FILE} {where}: no value for {missing}")
        values: dict[str, Any] = {}
        field_sources: dict[str, Source] = {}
        for field in PROVIDER_FIELDS:
            entry = spec[field]
            if not isinstance(entry, Mapping):
                raise CatalogError(
                    f"{_FILE} {where}.{field}: expected an inline table with value/source"
                )
            field_sources[field] = _source_for(entry, sources, f"{where}.{field}", _FILE)
            if entry.get("value") is None and field not in _NULLABLE:
                raise CatalogError(f"{_FILE} {where}: no value for required {field!r}")
            if "value" in entry:
                values[field] = entry["value"]
        try:
            providers[name] = ProviderRules.model_validate(
                {"provider": name, "sources": field_sources, "rules_as_of": as_of, **values}
            )
        except ValidationError as exc:
            raise CatalogError(f"{_FILE} {where}: {exc}") from exc

    rules: list[InvalidationRule] = []
    for i, entry in enumerate(table):
        where = f"[[invalidation]] #{i + 1}"
        if not isinstance(entry, Mapping):
            raise CatalogError(f"{_FILE} {where}: expected a table")
        unknown = set(entry) - _RULE_KEYS
        if unknown:
            raise CatalogError(f"{_FILE} {where}: unknown keys {sorted(unknown)}")
        fields = {k: v for k, v in entry.items() if k not in ("source", "also")}
        ref = {k: v for k, v in entry.items() if k in ("source", "also")}
        source = _source_for(ref, sources, where, _FILE)
        try:
            rules.append(InvalidationRule.model_validate({**fields, "source": source}))
        except ValidationError as exc:
            raise CatalogError(f"{_FILE} {where}: {exc}") from exc
    return _Rules(as_of=as_of, providers=providers, invalidation=tuple(rules), sources=sources)


@cache
def _rules() -> _Rules:
    """The shipped rules, loaded and validated once per process."""
    return build_rules(_read_toml(_FILE))


def provider_rules(provider: Provider) -> ProviderRules:
    """The provider-level cache facts of ``provider`` (``"anthropic"`` or ``"openai"``).

    Raises:
        KeyError: ``provider`` is not one of the catalog's providers.
        CatalogError: the shipped ``provider_rules.toml`` is malformed.
    """
    return _rules().providers[provider]


def invalidation_rules(provider: Provider | None = None) -> tuple[InvalidationRule, ...]:
    """The invalidation table (file order), optionally of one provider only.

    Raises:
        CatalogError: the shipped ``provider_rules.toml`` is malformed.
    """
    return tuple(r for r in _rules().invalidation if provider is None or r.provider == provider)


def provider_rules_sources() -> dict[str, Source]:
    """The source list of ``provider_rules.toml``: tag -> :class:`Source`."""
    return dict(_rules().sources)
