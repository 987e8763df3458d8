"""Per-model prompt-caching policy, loaded from the shipped ``policies.toml``.

Every provider fact (minimum cacheable tokens, breakpoint limits, lookback, TTLs, read and write
multipliers, long-context tiers, request flags, tokenizer, thinking-block stripping) lives in
``promptcache/catalog/policies.toml`` with a source URL and an as-of date; this module only
loads, validates and looks it up. Sources are the ones listed in
``shared/reference/hosted-api-rules.md`` (plus tiktoken's model map for OpenAI tokenizers).

Deviations from the interface sketch in INTERFACES.md, and why:

- ``CachePolicy`` also carries ``default_ttl``, ``longer_ttl_first``, ``top_level_cache_control``,
  ``automatic_caching``, ``read_breakpoint_window`` (OpenAI GPT-5.6+ reads over the latest 80
  breakpoints), ``tokenizer`` and ``token_ratio``: the linter and the backend need them and they
  are provider facts, so they belong here rather than in code.
- OpenAI models before GPT-5.6 have ``max_breakpoints == 0``: ``prompt_cache_breakpoint`` is a
  400 there (hosted-api-rules.md 2.3), caching is automatic.
- ``write_multipliers`` is empty when a provider charges no write fee (OpenAI before GPT-5.6);
  :meth:`CachePolicy.write_multiplier` returns 1.0 for that case so callers need no special case.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Mapping
from datetime import date
from functools import cache, lru_cache
from importlib import resources
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from promptcache._errors import CatalogError, UnknownModelError

__all__ = [
    "CachePolicy",
    "IdleBounds",
    "IdleRetention",
    "Provider",
    "Source",
    "TierRule",
    "duration_seconds",
    "find_policy",
    "get_policy",
    "known_models",
    "resolve_model_id",
    "thinking_strip_models",
]

Provider = Literal["anthropic", "openai"]

#: The fields every model must end up with (profile + model overrides). A field may have no
#: value (None), but it must always have a source.
POLICY_FIELDS: tuple[str, ...] = (
    "min_cacheable_tokens",
    "max_breakpoints",
    "lookback_positions",
    "lookback_collapses_tool_runs",
    "ttls",
    "default_ttl",
    "longer_ttl_first",
    "read_multiplier",
    "write_multipliers",
    "cache_step_tokens",
    "explicit_breakpoints",
    "top_level_cache_control",
    "automatic_caching",
    "prompt_cache_options",
    "prompt_cache_retention",
    "read_breakpoint_window",
    "tier_rules",
    "tokenizer",
    "token_ratio",
    "batch_multiplier",
    "strips_prior_thinking",
    "idle_lifetime",
)

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Source(BaseModel):
    """Where one catalog value comes from.

    Attributes:
        tag: the reference tag (``"A3"``, ``"O1"``, ...) from hosted-api-rules.md's Sources.
        url: the source's URL.
        as_of: the date the value is known to hold (see the header of policies.toml).
        official: True for the provider's own docs or SDK, False for a third party.
        confirmed: False where the reference marks the value UNCONFIRMED (or an unresolved
            CONFLICT); ``note`` then names the fallback that was chosen.
        note: free text (conflicts, fallbacks, scope).
        also: URLs of further sources that state the same value.
    """

    model_config = _FROZEN

    tag: str
    url: str
    as_of: date
    official: bool = True
    confirmed: bool = True
    note: str | None = None
    also: tuple[str, ...] = ()


class TierRule(BaseModel):
    """A prompt-length pricing tier that re-prices a whole request.

    When the request's prompt tokens (the sum of the usage buckets named in ``counts``) exceed
    ``above_tokens``, every token of the request is billed at base rate times the multipliers:
    input at ``input_multiplier``, cache reads and writes at ``cache_multiplier``, output at
    ``output_multiplier``.

    Example: Claude Haiku 5.5, above 100,000 tokens (input + cache reads + cache writes): 5x
    on everything; OpenAI GPT-5.6/6 above 272,000 input tokens: 2x input and cache, 1.5x output.
    """

    model_config = _FROZEN

    above_tokens: int = Field(gt=0)
    counts: tuple[Literal["input", "cache_read", "cache_write"], ...]
    input_multiplier: float = Field(gt=0)
    cache_multiplier: float = Field(gt=0)
    output_multiplier: float = Field(gt=0)
    scope: Literal["request"] = "request"

    def applies(self, prompt_tokens: int) -> bool:
        """Whether a request whose prompt counts ``prompt_tokens`` tokens is in this tier."""
        return prompt_tokens > self.above_tokens


_DURATION = re.compile(r"^(\d+)([smhd])$")
_DURATION_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> float:
    """``"5m"`` -> 300.0, ``"1h"`` -> 3600.0, ``"24h"`` -> 86400.0.

    Raises:
        ValueError: not ``<int><s|m|h|d>``.
    """
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"bad duration {text!r} (expected <int><s|m|h|d>, e.g. '5m')")
    return float(int(match.group(1)) * _DURATION_S[match.group(2)])


class IdleRetention(BaseModel):
    """How long an automatic (OpenAI before GPT-5.6) cache entry survives without use, under
    one ``prompt_cache_retention`` value.

    Attributes:
        usual: entries are usually cleared after this much idle time (``"5m"``: the lower
            bound of "usually cleared after 5-10 min of inactivity"), but not always (kept up
            to 1 h off-peak); a read after it is possible, not guaranteed. None when the
            source gives no earlier typical clearing (``"24h"``).
        max: entries are always removed within this much idle time (``"1h"``, ``"24h"``):
            a read after it is impossible.
    """

    model_config = _FROZEN

    usual: str | None = None
    max: str

    @field_validator("usual", "max")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            duration_seconds(value)
        return value

    @property
    def usual_seconds(self) -> float | None:
        """:attr:`usual` in seconds (None when there is none)."""
        return None if self.usual is None else duration_seconds(self.usual)

    @property
    def max_seconds(self) -> float:
        """:attr:`max` in seconds."""
        return duration_seconds(self.max)


class IdleBounds(NamedTuple):
    """The idle lifetime of one request's automatic cache entries (:meth:`CachePolicy.idle_bounds`).

    Attributes:
        usual_s: seconds after which entries are usually cleared (a read is then possible,
            not guaranteed); None when there is no such earlier clearing.
        max_s: seconds after which entries are certainly gone.
        retention: the retention these bounds are for (``"in_memory"``, ``"24h"``), or
            ``"default"`` when the request sends none and the model's default depends on the
            organisation (see ``default_unknown``).
        default_unknown: True when the request sends no ``prompt_cache_retention`` and the
            model accepts both values: the default is a CONFLICT in the sources (openai-python:
            ``24h`` for non-ZDR organisations, ``in_memory`` for ZDR ones; Azure:
            ``in_memory``), so ``usual_s`` comes from ``in_memory`` and ``max_s`` from ``24h``.
    """

    usual_s: float | None
    max_s: float
    retention: str
    default_unknown: bool


class CachePolicy(BaseModel):
    """The prompt-caching rules of one model (frozen).

    Units: tokens for counts, multipliers relative to the model's base (uncached) input price.
    Policies returned by :func:`get_policy` are shared: treat the dict fields
    (``write_multipliers``, ``sources``) as read-only too.
    ``sources`` maps every field name below (from ``min_cacheable_tokens`` on) to its
    :class:`Source`. Build a custom policy with ``get_policy("claude-sonnet-4-5").model_copy(
    update={...})`` or by constructing one directly and passing it as ``policy=``.

    Attributes:
        model_id: canonical catalog id (``"claude-sonnet-4-5"``, ``"gpt-4o"``).
        provider: ``"anthropic"`` or ``"openai"``.
        aliases: other ids that resolve to this policy (dated snapshots, short names).
        min_cacheable_tokens: below this prefix length nothing is cached (no error).
        max_breakpoints: Anthropic: most breakpoints per request, the automatic one counted
            (more is an HTTP 400). OpenAI GPT-5.6+: most cache *writes* per request (the
            implicit breakpoint plus the latest 3 explicit ones, or the latest 4 in
            ``mode: "explicit"``); more markers are accepted, the earlier ones only read.
            0 when the API takes none (OpenAI before GPT-5.6).
        lookback_positions: how many positions a breakpoint looks back for an earlier write
            (Anthropic: 20); None when there is no such limit.
        lookback_collapses_tool_runs: a run of tool_use (or tool_result) blocks is one position.
        ttls: accepted TTL values (``("5m", "1h")``, ``("30m",)``, ``()``).
        default_ttl: TTL when none is given; None when the API has no TTL parameter.
        longer_ttl_first: entries with a longer TTL must precede shorter ones (Anthropic).
        read_multiplier: cache-read price / input price.
        write_multipliers: cache-write price / input price, by TTL (empty: no write fee).
        cache_step_tokens: hits grow in steps of this many tokens (OpenAI 128); None: exact.
        explicit_breakpoints: the request may carry explicit breakpoint markers.
        top_level_cache_control: Anthropic automatic caching (top-level ``cache_control``).
        automatic_caching: caching happens without any marker (OpenAI).
        prompt_cache_options: the request may carry ``prompt_cache_options`` (GPT-5.6+).
        prompt_cache_retention: accepted ``prompt_cache_retention`` values (pre-GPT-5.6).
        read_breakpoint_window: reads consider the latest N breakpoints (GPT-5.6+: 80).
        tier_rules: prompt-length tiers that re-price the whole request.
        tokenizer: ``"o200k_base"``, ``"cl100k_base"`` or ``"anthropic-estimate"``.
        token_ratio: Anthropic estimate factor vs cl100k_base (1.0, or 1.3 for Claude 4.7+);
            None for exact tokenizers.
        batch_multiplier: Batch API price / list price, applied to every token (cache reads
            and writes included; the discounts stack); None when unknown.
        strips_prior_thinking: a plain (non-``tool_result``) user turn makes the API drop the
            thinking blocks of earlier assistant turns, so the cached prefix lacks them (older
            Claude models); None where the rule does not apply (OpenAI).
        idle_lifetime: OpenAI before GPT-5.6: how long automatic entries survive without use,
            by ``prompt_cache_retention`` value (:class:`IdleRetention`; ``"in_memory"``:
            usually cleared after 5 min, always within 1 h; ``"24h"``: within 24 h). None
            where entries live by an explicit TTL instead (``ttls``: Anthropic, GPT-5.6+).
            Use :meth:`idle_bounds` for one request.
        catalog_as_of: the date of the catalog data as a whole.
    """

    model_config = _FROZEN

    model_id: str
    provider: Provider
    aliases: tuple[str, ...] = ()
    min_cacheable_tokens: int = Field(ge=0)
    max_breakpoints: int = Field(ge=0)
    lookback_positions: int | None = None
    lookback_collapses_tool_runs: bool = False
    ttls: tuple[str, ...] = ()
    default_ttl: str | None = None
    longer_ttl_first: bool = False
    read_multiplier: float = Field(ge=0)
    write_multipliers: dict[str, float] = Field(default_factory=dict)
    cache_step_tokens: int | None = None
    explicit_breakpoints: bool = False
    top_level_cache_control: bool = False
    automatic_caching: bool = False
    prompt_cache_options: bool = False
    prompt_cache_retention: tuple[str, ...] = ()
    read_breakpoint_window: int | None = None
    tier_rules: tuple[TierRule, ...] = ()
    tokenizer: str = "o200k_base"
    token_ratio: float | None = None
    batch_multiplier: float | None = None
    strips_prior_thinking: bool | None = None
    idle_lifetime: dict[str, IdleRetention] | None = None
    sources: dict[str, Source] = Field(default_factory=dict)
    catalog_as_of: date | None = None

    def write_multiplier(self, ttl: str | None = None) -> float:
        """Cache-write price / input price for ``ttl`` (default: ``default_ttl``).

        Returns 1.0 when the provider charges no write fee (``write_multipliers`` empty).

        Raises:
            ValueError: ``ttl`` is not one of ``ttls`` for a model that charges writes.
        """
        if not self.write_multipliers:
            return 1.0
        key = ttl if ttl is not None else self.default_ttl
        if key is None or key not in self.write_multipliers:
            raise ValueError(
                f"{self.model_id}: no write multiplier for TTL {key!r} "
                f"(known: {', '.join(sorted(self.write_multipliers))})"
            )
        return self.write_multipliers[key]

    def idle_bounds(self, retention: object = None) -> IdleBounds | None:
        """The idle lifetime of a request's automatic cache entries (OpenAI before GPT-5.6).

        Args:
            retention: the request's ``prompt_cache_retention`` (None: not sent; a value the
                model does not accept, which the API rejects, counts as not sent).

        Returns:
            :class:`IdleBounds`, or None when the model has no idle lifetime
            (``idle_lifetime`` is None: Anthropic, GPT-5.6+). With no retention sent the
            model's default applies: ``"in_memory"`` on a model without
            ``prompt_cache_retention``, ``"24h"`` on one that accepts only ``"24h"``
            (openai-python: gpt-5.5 and later), and on one that accepts both an unknown
            default (``default_unknown``: the usual clearing of ``in_memory``, the certain
            bound of ``24h``). Source: hosted-api-rules.md 2.1-2.2 [O2][O3][O4].
        """
        table = self.idle_lifetime
        if not table:
            return None
        accepted = tuple(self.prompt_cache_retention)
        if isinstance(retention, str) and retention in accepted and retention in table:
            chosen: str | None = retention
        elif not accepted:
            chosen = "in_memory"
        elif len(accepted) == 1:
            chosen = accepted[0]
        else:
            chosen = None
        if chosen is not None and chosen in table:
            entry = table[chosen]
            return IdleBounds(entry.usual_seconds, entry.max_seconds, chosen, False)
        low = table.get("in_memory")
        high = max(table.values(), key=lambda e: e.max_seconds)
        return IdleBounds(low.usual_seconds if low is not None else None, high.max_seconds,
                          "default", True)

    def tier_for(self, prompt_tokens: int) -> TierRule | None:
        """The tier rule a request with ``prompt_tokens`` prompt tokens falls in, or None."""
        hit: TierRule | None = None
        for rule in sorted(self.tier_rules, key=lambda r: r.above_tokens):
            if rule.applies(prompt_tokens):
                hit = rule
        return hit

    def unconfirmed(self) -> list[str]:
        """Names of fields whose value the reference marks UNCONFIRMED (``confirmed=False``)."""
        return sorted(name for name, src in self.sources.items() if not src.confirmed)


# --------------------------------------------------------------------------------- loading


class _Catalog(BaseModel):
    """The loaded catalog: policies by id and the lookup index."""

    model_config = ConfigDict(frozen=True)

    as_of: date
    policies: dict[str, CachePolicy]
    index: dict[str, str]  # normalised key -> canonical id
    sources: dict[str, Source]


def _read_toml(name: str) -> dict[str, Any]:
    try:
        text = resources.files("promptcache.catalog").joinpath(name).read_text(encoding="utf-8")
        return tomllib.loads(text)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogError(f"promptcache/catalog/{name}: {exc}") from exc


def _parse_sources(raw: Mapping[str, Any]) -> dict[str, Source]:
    """The ``[sources]`` table of a catalog file: tag -> :class:`Source`.

    Raises KeyError, TypeError or ValidationError on malformed entries (callers wrap them in
    :class:`CatalogError` with the file name).
    """
    return {
        tag: Source(
            tag=tag,
            url=entry["url"],
            as_of=entry["as_of"],
            official=entry.get("official", True),
            note=entry.get("note"),
        )
        for tag, entry in raw.items()
    }


def _source_for(
    entry: Mapping[str, Any],
    sources: Mapping[str, Source],
    where: str,
    file: str = "policies.toml",
    extra_keys: frozenset[str] = frozenset(),
) -> Source:
    """The :class:`Source` of one ``{ value = ..., source = "A3", ... }`` entry of ``file``.

    ``extra_keys`` are further keys the entry may carry (besides value/source/also/as_of/
    confirmed/note).

    Raises:
        CatalogError: a missing or unknown source tag, or an unknown key.
    """
    tag = entry.get("source")
    if not isinstance(tag, str) or tag not in sources:
        raise CatalogError(f"{file} {where}: unknown or missing source tag {tag!r}")
    base = sources[tag]
    also: list[str] = []
    for extra in entry.get("also", []):
        if extra not in sources:
            raise CatalogError(f"{file} {where}: unknown source tag {extra!r} in also")
        also.append(sources[extra].url)
    unknown = set(entry) - {"value", "source", "also", "as_of", "confirmed", "note"} - extra_keys
    if unknown:
        raise CatalogError(f"{file} {where}: unknown keys {sorted(unknown)}")
    return Source(
        tag=tag,
        url=base.url,
        as_of=entry.get("as_of", base.as_of),
        official=base.official,
        confirmed=bool(entry.get("confirmed", True)),
        note=entry.get("note"),
        also=tuple(also),
    )


_DATE_SUFFIX = re.compile(r"(?:[-@](?:\d{8}|\d{4}-\d{2}-\d{2}))$")
_VERSION_SUFFIX = re.compile(r"(?:-v\d+(?::\d+)?|:\d+)$")
_BEDROCK_PREFIX = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.")
_SWAPPED_CLAUDE = re.compile(r"^claude-(\d+(?:-\d+)?)-(opus|sonnet|haiku|fable|mythos)$")


def _base_key(model: str) -> str:
    """Lower-case ``model`` and drop provider prefixes (``anthropic/``, ``us.anthropic.``)."""
    key = model.strip().lower()
    if key.startswith("ft:"):  # ft:gpt-4o-2024-08-06:org::id
        key = key.split(":")[1]
    key = key.rsplit("/", 1)[-1]
    key = _BEDROCK_PREFIX.sub("", key)
    if key.startswith("claude"):
        key = key.replace(".", "-")  # claude-sonnet-4.5 -> claude-sonnet-4-5
    return key


def _candidates(model: str) -> list[str]:
    """Normalised keys to try for ``model``, most specific first."""
    key = _base_key(model)
    out = [key]
    stripped = key
    for _ in range(3):  # vertex "@date", bedrock "-v1:0", "-latest", "-YYYYMMDD"
        before = stripped
        stripped = stripped.split("@", 1)[0]
        stripped = _VERSION_SUFFIX.sub("", stripped)
        stripped = _DATE_SUFFIX.sub("", stripped)
        stripped = stripped.removesuffix("-latest")
        if stripped != before:
            out.append(stripped)
    swapped = _SWAPPED_CLAUDE.match(stripped)
    if swapped:  # claude-4-5-sonnet -> claude-sonnet-4-5
        out.append(f"claude-{swapped.group(2)}-{swapped.group(1)}")
    return out


def _index_keys(model_id: str, aliases: tuple[str, ...]) -> set[str]:
    keys: set[str] = set()
    for name in (model_id, *aliases):
        key = _base_key(name)
        keys.add(key)
        if "." in key:  # gpt-5.6-sol is also written gpt-5-6-sol
            keys.add(key.replace(".", "-"))
    return keys


#: resolve_model_id's answers, per loaded catalog (the wrapper and the tracker resolve the same
#: model id on every call)
_RESOLVED: list[Any] = [None, {}]


@cache
def _catalog() -> _Catalog:
    """The shipped catalog, loaded and validated once per process."""
    return build_catalog(_read_toml("policies.toml"))


def build_catalog(raw: Mapping[str, Any]) -> _Catalog:
    """Validate parsed ``policies.toml`` data and build the policies and the lookup index.

    Raises:
        CatalogError: a missing or unknown field, profile or source tag, a value of the wrong
            type, or an id/alias that names two models.
    """
    try:
        as_of = raw["catalog_as_of"]
        sources = _parse_sources(raw["sources"])
        profiles: dict[str, Any] = raw["profiles"]
        models: dict[str, Any] = raw["models"]
    except (KeyError, TypeError, ValidationError) as exc:
        raise CatalogError(f"policies.toml: malformed header or sources: {exc}") from exc

    policies: dict[str, CachePolicy] = {}
    index: dict[str, str] = {}
    for model_id, spec in models.items():
        if not isinstance(spec, Mapping):
            raise CatalogError(f"policies.toml [models.{model_id}]: expected a table")
        profile_name = spec.get("profile")
        if profile_name not in profiles:
            raise CatalogError(
                f"policies.toml [models.{model_id}]: unknown profile {profile_name!r}"
            )
        profile = profiles[profile_name]
        entries: dict[str, Any] = dict(profile.get("fields", {}))
        for name, entry in spec.items():
            if name in ("profile", "aliases"):
                continue
            if name not in POLICY_FIELDS:
                raise CatalogError(f"policies.toml [models.{model_id}]: unknown field {name!r}")
            entries[name] = entry
        missing = [name for name in POLICY_FIELDS if name not in entries]
        if missing:
            raise CatalogError(f"policies.toml [models.{model_id}]: no value for {missing}")
        values: dict[str, Any] = {}
        field_sources: dict[str, Source] = {}
        for name in POLICY_FIELDS:
            entry = entries[name]
            if not isinstance(entry, Mapping):
                raise CatalogError(
                    f"policies.toml [models.{model_id}].{name}: expected an inline table "
                    "with value/source"
                )
            field_sources[name] = _source_for(entry, sources, f"[models.{model_id}].{name}")
            values[name] = entry.get("value")
        aliases = tuple(spec.get("aliases", ()))
        missing_required = [k for k, v in values.items() if v is None and k not in _NULLABLE]
        if missing_required:
            raise CatalogError(
                f"policies.toml [models.{model_id}]: no value for required {missing_required}"
            )
        try:
            policy = CachePolicy.model_validate(
                {
                    "model_id": model_id,
                    "provider": profile["provider"],
                    "aliases": aliases,
                    "sources": field_sources,
                    "catalog_as_of": as_of,
                    **values,
                }
            )
        except ValidationError as exc:
            raise CatalogError(f"policies.toml [models.{model_id}]: {exc}") from exc
        policies[model_id] = policy
        for key in _index_keys(model_id, aliases):
            other = index.setdefault(key, model_id)
            if other != model_id:
                raise CatalogError(
                    f"policies.toml: id or alias {key!r} names both {other} and {model_id}"
                )
    return _Catalog(as_of=as_of, policies=policies, index=index, sources=sources)


_NULLABLE = frozenset(
    {
        "lookback_positions",
        "default_ttl",
        "cache_step_tokens",
        "read_breakpoint_window",
        "token_ratio",
        "batch_multiplier",
        "strips_prior_thinking",
        "idle_lifetime",
    }
)


# ---------------------------------------------------------------------------------- lookup


def resolve_model_id(model: str) -> str | None:
    """The canonical catalog id for ``model``, or None when the catalog does not know it.

    Accepts dated snapshots (``claude-sonnet-4-5-20250929``, ``gpt-4o-2024-08-06``), aliases
    (``claude-opus-4``, ``gpt-5.6``), provider prefixes (``anthropic/…``, ``openai/…``,
    Bedrock ``us.anthropic.…-v1:0``, Vertex ``…@20250929``), dotted Claude versions
    (``claude-sonnet-4.5``) and case differences.
    """
    catalog = _catalog()
    owner, memo = _RESOLVED
    memo = memo if owner is catalog else None
    if memo is None:  # a new catalog (first use, or the cache was cleared): a new memo
        memo = {}
        _RESOLVED[:] = [catalog, memo]
    if model in memo:
        known: str | None = memo[model]
        return known
    index = catalog.index
    found = next((index[key] for key in _candidates(model) if key in index), None)
    if len(memo) < 4096:  # spellings seen in one process are few; the bound guards odd input
        memo[model] = found
    return found


def _suggest(model: str, limit: int = 3) -> list[str]:
    catalog = _catalog()
    keys = list(catalog.index)
    out: list[str] = []
    for key in _candidates(model)[::-1]:
        for match in difflib.get_close_matches(key, keys, n=10, cutoff=0.5):
            model_id = catalog.index[match]
            if model_id not in out:
                out.append(model_id)
    return out[:limit]


def get_policy(model: str, *, policy: CachePolicy | None = None) -> CachePolicy:
    """The prompt-caching policy of ``model``.

    Args:
        model: a model id as sent to the API; see :func:`resolve_model_id` for the accepted
            spellings.
        policy: an explicit policy; when given it is returned as is (use this for models the
            catalog does not list, or to try different rules).

    Returns:
        The model's :class:`CachePolicy` (frozen; ``sources`` holds the URL and as-of date of
        every value).

    Raises:
        UnknownModelError: the catalog has no policy for ``model`` and no ``policy`` was
            passed; ``suggestions`` lists up to three close catalog ids (difflib).
        CatalogError: the shipped catalog data is malformed.
    """
    if policy is not None:
        return policy
    if not isinstance(model, str):
        raise UnknownModelError(repr(model))
    model_id = resolve_model_id(model)
    if model_id is None:
        raise UnknownModelError(model, _suggest(model))
    return _catalog().policies[model_id]


def cache_grid_tokens(tokens: int, minimum: int, step: int | None) -> int:
    """Tokens of a ``tokens``-long prefix that automatic caching stores or reads: 0 under
    ``minimum``, else ``minimum`` plus whole ``step``s (OpenAI before GPT-5.6, with the
    policy's ``min_cacheable_tokens`` and ``cache_step_tokens``: 1,024 + 128 n; ``step`` None
    or 0: every token). The one place the grid rule is written: the planner's next-read
    prediction, ``diff``'s predicted reads and the local backend's ``cached_tokens`` call it.
    Source: https://developers.openai.com/api/docs/guides/prompt-caching (hosted-api-rules.md
    2.1: "Turns on automatically for prompts of >= 1,024 tokens. After that, hits grow in
    128-token increments")."""
    if tokens < minimum:
        return 0
    step = step or 1
    return minimum + (tokens - minimum) // step * step


def find_policy(model: object) -> CachePolicy | None:
    """The policy of ``model``, or None when ``model`` is None, empty, not a string or not in
    the catalog (the lenient twin of :func:`get_policy`, for code that goes on without one:
    the usage tracker, the diff, the wrapper's keepalive).

    Cached per model id (512 ids): an unknown id's spellings are tried once, not per record
    (``find_policy.cache_clear()`` empties it).

    Raises:
        CatalogError: the shipped catalog data is malformed (never hidden as "unknown").
    """
    if not model or not isinstance(model, str):
        return None
    return _find_policy(model)


@lru_cache(maxsize=512)
def _find_policy(model: str) -> CachePolicy | None:
    model_id = resolve_model_id(model)
    return None if model_id is None else _catalog().policies[model_id]


find_policy.cache_clear = _find_policy.cache_clear  # type: ignore[attr-defined]


def known_models(*, provider: Provider | None = None) -> list[str]:
    """Canonical ids of every model in the catalog (sorted), optionally of one provider."""
    return sorted(
        model_id
        for model_id, pol in _catalog().policies.items()
        if provider is None or pol.provider == provider
    )


def thinking_strip_models() -> frozenset[str]:
    """Canonical ids of the models whose ``strips_prior_thinking`` is True.

    On these (older Claude) models a plain (non-``tool_result``) user turn strips the thinking
    blocks of earlier assistant turns, and every message from the first stripped block falls
    out of the cache. Source:
    https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/prompt-caching.md
    (hosted-api-rules.md 1.7, "Thinking blocks"); per model in ``policies.toml``.
    """
    return frozenset(
        model_id for model_id, pol in _catalog().policies.items() if pol.strips_prior_thinking
    )


def catalog_sources() -> dict[str, Source]:
    """The catalog's source list: tag -> :class:`Source` (URL, as-of date, official flag)."""
    return dict(_catalog().sources)


def catalog_as_of() -> date:
    """The date of the catalog data as a whole (newest date the sources reflect)."""
    return _catalog().as_of
