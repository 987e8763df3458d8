"""Provider facts as data: per-model prompt-caching policy and prices.

- :func:`get_policy` / :class:`CachePolicy`: minimum cacheable tokens, breakpoint limits,
  lookback, TTLs, read/write multipliers, long-context tiers, request flags and tokenizer of
  every current Anthropic and OpenAI model, each value with its source URL and as-of date
  (``policies.toml``; sources from ``shared/reference/hosted-api-rules.md``).
- :func:`get_prices` / :class:`ModelPrices`: USD per million tokens from genai-prices (pinned,
  bundled data only, never auto-updated), falling back to the catalog's dated rows
  (``prices.toml``), overridden by a user TOML file (:func:`load_overrides` or the
  ``PROMPTCACHE_PRICES`` environment variable).
- :func:`price_adjustment` / :class:`PriceAdjustment`: how a request's ``service_tier``
  (OpenAI Flex), ``inference_geo`` (Anthropic "us") and ``speed`` ("fast") change its prices
  (``prices.toml`` modifier tables), or why they cannot be priced.
- :func:`provider_rules` / :class:`ProviderRules` and :func:`invalidation_rules` /
  :class:`InvalidationRule`: provider-wide facts that are not per-model policy (OpenAI's
  per-key overflow rate, the providers' diagnostics reasons, Anthropic's ``max_tokens=0``
  pre-warm and the settings it is rejected with (:class:`PrewarmRejection`), the Responses
  API's smallest ``max_output_tokens``, which request parameter invalidates which cache
  tier), each with its source URL and as-of date
  (``provider_rules.toml``).
- :func:`thinking_strip_models`: the Claude models that strip earlier thinking blocks (the
  per-model ``strips_prior_thinking`` policy field).
"""

from __future__ import annotations

from promptcache.catalog._modifiers import PriceAdjustment, price_adjustment
from promptcache.catalog._policy import (
    CachePolicy,
    Provider,
    Source,
    TierRule,
    cache_grid_tokens,
    catalog_as_of,
    catalog_sources,
    find_policy,
    get_policy,
    known_models,
    resolve_model_id,
    thinking_strip_models,
)
from promptcache.catalog._prices import (
    PRICES_ENV_VAR,
    ModelPrices,
    PriceOverride,
    PriceSource,
    PriceTier,
    UnknownPriceError,
    catalog_price_rows,
    catalog_prices_for,
    clear_overrides,
    genai_prices_for,
    get_prices,
    is_fine_tuned,
    load_overrides,
    overrides_version,
)
from promptcache.catalog._rules import (
    InvalidationRule,
    PrewarmRejection,
    ProviderRules,
    invalidation_rules,
    provider_rules,
    provider_rules_sources,
)

__all__ = [
    "PRICES_ENV_VAR",
    "CachePolicy",
    "InvalidationRule",
    "ModelPrices",
    "PrewarmRejection",
    "PriceAdjustment",
    "PriceOverride",
    "PriceSource",
    "PriceTier",
    "Provider",
    "ProviderRules",
    "Source",
    "TierRule",
    "UnknownPriceError",
    "cache_grid_tokens",
    "catalog_as_of",
    "catalog_price_rows",
    "catalog_prices_for",
    "catalog_sources",
    "clear_overrides",
    "find_policy",
    "genai_prices_for",
    "get_policy",
    "get_prices",
    "invalidation_rules",
    "is_fine_tuned",
    "known_models",
    "load_overrides",
    "overrides_version",
    "price_adjustment",
    "provider_rules",
    "provider_rules_sources",
    "resolve_model_id",
    "thinking_strip_models",
]
