"""Provider cache facts the rules need, read from the catalog (never constants in rules).

:func:`facts_for` asks :func:`promptcache.catalog.get_policy` for the request's model. When the
model is absent or unknown, provider-wide facts are still known when every catalog entry of the
provider agrees on them (every Anthropic model: 4 breakpoints, 20 lookback positions; every
OpenAI model: 1,024-token minimum); a fact on which models disagree stays None (unknown), and a
rule that needs it stays silent.

Provider-level facts come from :func:`promptcache.catalog.provider_rules`: OpenAI's "about 15
requests per minute per prefix + prompt_cache_key" overflow point
(https://developers.openai.com/api/docs/guides/prompt-caching.md, hosted-api-rules.md 2.1).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["MODEL_RULES", "CacheFacts", "SdkTTLs", "facts_for", "model_rules_skipped",
           "provider_family", "sdk_ttls"]

_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class CacheFacts:
    """The cache facts of one model (or of a provider when the model is unknown).

    Attributes:
        provider: ``"anthropic"`` or ``"openai"``.
        model: the model id asked for (None when the request names none).
        known_model: whether the catalog knows ``model``.
        max_breakpoints: the catalog's per-request breakpoint limit (None: unknown). Anthropic:
            markers per request, the automatic one included (more is an HTTP 400). OpenAI
            GPT-5.6+: cache *writes* per request (the implicit breakpoint plus the latest 3
            explicit ones, or the latest 4 in ``mode: "explicit"``); more markers are accepted,
            the earlier ones only read (hosted-api-rules.md 2.3). OpenAI before GPT-5.6: 0.
        lookback_positions: Anthropic lookback window in positions (None: none / unknown).
        min_cacheable_tokens: the smallest cacheable prefix, in tokens (None: unknown).
        longer_ttl_first: whether longer TTLs must precede shorter ones.
        key_overflow_rpm: OpenAI requests/min per prefix+key before spill-over (None: n/a).
        explicit_breakpoints: whether the request may carry explicit markers (OpenAI:
            ``prompt_cache_breakpoint``, GPT-5.6+ only; None: unknown).
        prompt_cache_options: whether the request may carry OpenAI's ``prompt_cache_options``
            (GPT-5.6+ only; None: unknown).
        ttls: the TTL values the model takes (``("5m", "1h")``, ``("30m",)``, ``()``; None:
            unknown).
        read_breakpoint_window: reads consider only the latest N breakpoints (OpenAI GPT-5.6+:
            80); None: no such window, or unknown.
        strips_prior_thinking: whether a plain user turn strips earlier thinking blocks
            before caching (older Claude models, hosted-api-rules.md 1.7; None: unknown).
        default_ttl: the TTL of a marker that names none (Anthropic ``"5m"``); None: no TTL
            parameter, or unknown.
    """

    provider: str
    model: str | None
    known_model: bool
    max_breakpoints: int | None
    lookback_positions: int | None
    min_cacheable_tokens: int | None
    longer_ttl_first: bool
    key_overflow_rpm: float | None
    explicit_breakpoints: bool | None = None
    prompt_cache_options: bool | None = None
    ttls: tuple[str, ...] | None = None
    read_breakpoint_window: int | None = None
    default_ttl: str | None = None
    strips_prior_thinking: bool | None = None


#: The catalog policy fields copied into :class:`CacheFacts` (known per model; provider-wide
#: only where every catalog model of the provider agrees).
_FACT_FIELDS = (
    "max_breakpoints",
    "lookback_positions",
    "min_cacheable_tokens",
    "longer_ttl_first",
    "explicit_breakpoints",
    "prompt_cache_options",
    "ttls",
    "read_breakpoint_window",
    "default_ttl",
    "strips_prior_thinking",
)


def provider_family(provider: str) -> str:
    """``"anthropic"`` or ``"openai"`` for a renderer provider name."""
    return "anthropic" if provider == "anthropic" else "openai"


def _get(policy: Any, name: str) -> Any:
    return getattr(policy, name, None)


@lru_cache(maxsize=8)
def _provider_wide(family: str) -> dict[str, Any]:
    """Facts on which every catalog model of ``family`` agrees."""
    out: dict[str, Any] = {}
    for name, seen in _family_values(family).items():
        if len(seen) == 1:
            out[name] = next(iter(seen))
    return out


@lru_cache(maxsize=8)
def _family_values(family: str) -> dict[str, set[Any]]:
    """fact name -> the values the catalog models of ``family`` have for it."""
    try:
        from promptcache.catalog import get_policy, known_models
    except ImportError:  # pragma: no cover - the catalog is part of the package
        return {}
    values: dict[str, set[Any]] = {}
    for model in known_models():
        try:
            policy = get_policy(model)
        except Exception:
            continue
        if str(_get(policy, "provider")) != family:
            continue
        for name in _FACT_FIELDS:
            values.setdefault(name, set()).add(_get(policy, name))
    return values


#: The rules that read a model-specific catalog fact: code -> (provider family the rule
#: checks, the fact). ``"known_model"``: the rule runs only for a model the catalog knows.
MODEL_RULES: dict[str, tuple[str, str]] = {
    "PC301": ("anthropic", "max_breakpoints"),
    "PC302": ("anthropic", "lookback_positions"),
    "PC303": ("anthropic", "known_model"),
    "PC401": ("openai", "min_cacheable_tokens"),
    "PC402": ("openai", "min_cacheable_tokens"),
}


def model_rules_skipped(facts: CacheFacts, codes: Iterable[str]) -> list[str]:
    """Which of the rule ``codes`` cannot check a request with these ``facts``.

    A rule is skipped when the request's model is unknown to the catalog and the fact it needs
    differs between the catalog's models of the provider (so it stays unknown), or when the
    rule runs only for known models. Empty for a known model. Never raises.
    """
    if facts.known_model:
        return []
    out = []
    with _LOCK:
        values = _family_values(facts.provider)
    for code in codes:
        need = MODEL_RULES.get(code)
        if need is None or need[0] != facts.provider:
            continue
        fact = need[1]
        if fact == "known_model" or (
            getattr(facts, fact) is None and any(v is not None for v in values.get(fact, ()))
        ):
            out.append(code)
    return out


def _key_overflow_rpm(family: str) -> float | None:
    """The catalog's requests/min per prefix + key before spill-over (None: n/a or unknown)."""
    try:
        from promptcache.catalog import provider_rules

        return provider_rules("anthropic" if family == "anthropic" else "openai").key_overflow_rpm
    except Exception:  # a catalog that cannot load: the fact is unknown, never a guess
        return None


@lru_cache(maxsize=512)
def _facts(family: str, model: str | None) -> CacheFacts:
    policy: Any = None
    if model:
        try:
            from promptcache.catalog import get_policy

            policy = get_policy(model)
        except Exception:  # UnknownModelError, or a catalog that cannot load
            policy = None
    if policy is not None and str(_get(policy, "provider")) == family:
        src: dict[str, Any] = {n: _get(policy, n) for n in _FACT_FIELDS}
        known = True
    else:
        src = _provider_wide(family)
        known = False
    return CacheFacts(
        provider=family,
        model=model,
        known_model=known,
        max_breakpoints=src.get("max_breakpoints"),
        lookback_positions=src.get("lookback_positions"),
        min_cacheable_tokens=src.get("min_cacheable_tokens"),
        longer_ttl_first=bool(src.get("longer_ttl_first", family == "anthropic")),
        key_overflow_rpm=_key_overflow_rpm(family),
        explicit_breakpoints=_opt_bool(src.get("explicit_breakpoints")),
        prompt_cache_options=_opt_bool(src.get("prompt_cache_options")),
        ttls=tuple(src["ttls"]) if src.get("ttls") is not None else None,
        read_breakpoint_window=src.get("read_breakpoint_window"),
        default_ttl=src.get("default_ttl"),
        strips_prior_thinking=_opt_bool(src.get("strips_prior_thinking")),
    )


def _opt_bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def facts_for(provider: str, model: str | None) -> CacheFacts:
    """The :class:`CacheFacts` for a request.

    Args:
        provider: renderer provider (``"anthropic"``, ``"openai-chat"``, ``"openai-responses"``)
            or family (``"openai"``).
        model: the model id, or None.

    Returns:
        Facts from the model's catalog policy; provider-wide facts when the model is missing
        or unknown. Never raises.
    """
    with _LOCK:
        return _facts(provider_family(provider), model)


@dataclass(frozen=True, slots=True)
class SdkTTLs:
    """TTLs an official SDK newer than the reference documents for one API of a model, and
    that the reference does not confirm (policies.toml ``[sdk_ttls]``).

    Attributes:
        api: the request shape they hold for (``"openai-responses"``).
        ttls: the values (``("12h",)``), beyond the model's catalog ``ttls``.
        tag: the catalog source tag (``"O3b"``).
        url: the source's URL (``https://github.com/openai/openai-python``).
        source_note: the source's own note (the SDK version and file paths).
        confirmed: False: the reference does not confirm them.
        note: what the entry says (which API, what the reference says).
    """

    api: str
    ttls: tuple[str, ...]
    tag: str
    url: str
    source_note: str | None
    confirmed: bool
    note: str | None


@lru_cache(maxsize=1)
def _sdk_ttl_table() -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(``[sdk_ttls]`` by profile, model id -> profile) from the shipped policies.toml."""
    import tomllib
    from importlib import resources

    text = resources.files("promptcache.catalog").joinpath("policies.toml").read_text("utf-8")
    raw = tomllib.loads(text)
    profiles = {mid: str(spec.get("profile")) for mid, spec in raw.get("models", {}).items()
                if isinstance(spec, dict)}
    return dict(raw.get("sdk_ttls", {})), profiles


def sdk_ttls(model: str | None, provider: str) -> SdkTTLs | None:
    """The TTLs an official SDK documents for ``model`` on the API of ``provider`` beyond the
    model's catalog ``ttls`` (policies.toml ``[sdk_ttls]``); None when there are none.

    Args:
        model: the model id (any spelling :func:`promptcache.catalog.resolve_model_id` takes).
        provider: the request shape (``"openai-responses"``, ``"openai-chat"``,
            ``"anthropic"``).

    Returns:
        :class:`SdkTTLs` (for GPT-5.6+ on Responses: ``("12h",)`` from openai-python
        3.57.0, ``confirmed`` False), or None (Chat Completions, older models, an unknown
        model). Never raises: a catalog that cannot be read gives None.
    """
    if not model or not isinstance(model, str):
        return None
    try:
        from promptcache.catalog import catalog_sources, resolve_model_id

        model_id = resolve_model_id(model)
        if model_id is None:
            return None
        with _LOCK:
            table, profiles = _sdk_ttl_table()
        entry = table.get(profiles.get(model_id, ""), {}).get(provider)
        if not isinstance(entry, dict) or not entry.get("value"):
            return None
        src = catalog_sources()[str(entry["source"])]
        return SdkTTLs(provider, tuple(str(v) for v in entry["value"]), src.tag, src.url,
                       src.note, bool(entry.get("confirmed", True)), entry.get("note"))
    except Exception:  # a catalog that cannot load: nothing documented, never a guess
        return None
