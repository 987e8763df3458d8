"""Provider facts as data: per-model prompt-caching policy and prices.

- :func:`get_policy` / :class:`CachePolicy`: minimum cacheable tokens, breakpoint limits,
  lookback, TTLs, read/write multipliers, long-context tiers, request flags and tokenizer of
  every current Anthropic and OpenAI model, each value with its source URL and as-of date
  (``policies.toml``; sources from ``shared/reference/hosted-api-rules.md``).
- :func:`get_prices` / :class:`ModelPrices`: USD per million tokens from genai-prices (pinned,
  bundled data only, never auto-updated), falling back to the catalog's dated rows
  (``prices.toml``), overridden by a user TOML file (:func:`load_overrides` or the
  ``PROMPTCACHE_PRICES`` environment variable).
"""

from __future__ import annotations

from promptcache.catalog._policy import (
    CachePolicy,
    Provider,
    Source,
    TierRule,
    catalog_as_of,
    catalog_sources,
    get_policy,
    known_models,
    resolve_model_id,
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
    load_overrides,
)

__all__ = [
    "PRICES_ENV_VAR",
    "CachePolicy",
    "ModelPrices",
    "PriceOverride",
    "PriceSource",
    "PriceTier",
    "Provider",
    "Source",
    "TierRule",
    "UnknownPriceError",
    "catalog_as_of",
    "catalog_price_rows",
    "catalog_prices_for",
    "catalog_sources",
    "clear_overrides",
    "genai_prices_for",
    "get_policy",
    "get_prices",
    "known_models",
    "load_overrides",
    "resolve_model_id",
]
