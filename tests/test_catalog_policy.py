"""Tests for promptcache.catalog's cache policies: lookup, coverage of the reference, sources.

The expected values below are copied by hand from ../shared/reference/hosted-api-rules.md
(sections 1.4, 1.6, 2.1-2.5), independently of policies.toml, so a wrong or missing catalog
row fails here.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from datetime import date
from importlib import resources
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptcache._errors import CatalogError, UnknownModelError
from promptcache.catalog import (
    CachePolicy,
    catalog_sources,
    get_policy,
    known_models,
    resolve_model_id,
)
from promptcache.catalog._policy import POLICY_FIELDS, build_catalog

# model id -> minimum cacheable tokens (hosted-api-rules.md 1.4; UNCONFIRMED rows get the
# fallback documented in policies.toml: the predecessor in the same line).
ANTHROPIC_MINIMUMS = {
    "claude-fable-5-1": 512,
    "claude-mythos-5-1": 512,
    "claude-opus-5-5": 512,
    "claude-opus-5": 512,
    "claude-fable-5": 512,
    "claude-mythos-5": 512,
    "claude-opus-4-8": 1024,
    "claude-sonnet-5": 1024,
    "claude-sonnet-4-6": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4-0": 1024,
    "claude-sonnet-4-0": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-3-5-sonnet": 1024,
    "claude-3-opus": 1024,
    "claude-opus-4-7": 2048,
    "claude-mythos-preview": 2048,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
}
ANTHROPIC_UNCONFIRMED_MINIMUMS = {
    "claude-fable-5-2": 512,
    "claude-mythos-5-2": 512,
    "claude-sonnet-5-5": 1024,
    "claude-haiku-5-5": 4096,
}
ANTHROPIC_READ_EXCEPTIONS = {
    "claude-fable-5-1": 0.025,
    "claude-mythos-5-1": 0.025,
    "claude-opus-5-5": 0.05,
    "claude-sonnet-5-5": 0.05,
    "claude-fable-5-2": 0.025,
    # not in the reference; policies.toml's documented fallback is Fable 5.2's rate, flagged
    # confirmed=false (checked in test_mythos_52_read_is_an_unconfirmed_fallback)
    "claude-mythos-5-2": 0.025,
}
# Claude 4.7 and later, and Mythos Preview, use the newer tokenizer (hosted-api-rules.md 1.10).
NEW_TOKENIZER = {
    "claude-opus-4-7",
    "claude-opus-4-8",
    "claude-opus-5",
    "claude-opus-5-5",
    "claude-sonnet-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
    "claude-fable-5",
    "claude-fable-5-1",
    "claude-fable-5-2",
    "claude-mythos-5",
    "claude-mythos-5-1",
    "claude-mythos-5-2",
    "claude-mythos-preview",
}

# OpenAI model -> read multiplier (1 - discount; hosted-api-rules.md 2.5).
OPENAI_READ = {
    "gpt-4o": 0.5,
    "gpt-4o-mini": 0.5,
    "gpt-4.1": 0.25,
    "gpt-4.1-mini": 0.25,
    "gpt-4.1-nano": 0.25,
    "o3": 0.25,
    "o4-mini": 0.25,
    "gpt-5": 0.1,
    "gpt-5-mini": 0.1,
    "gpt-5-nano": 0.1,
    "gpt-5.1": 0.1,
    "gpt-5.1-codex-mini": 0.1,
    "gpt-5.2": 0.1,
    "gpt-5.3-codex": 0.1,
    "gpt-5.4": 0.1,
    "gpt-5.5": 0.1,
    "gpt-5.6-sol": 0.1,
    "gpt-5.6-terra": 0.1,
    "gpt-5.6-luna": 0.1,
    "gpt-6-astra": 0.1,
    "gpt-6-sol": 0.1,
    "gpt-6-luna": 0.1,
    "gpt-6.1-sol": 0.05,
}
GPT56_PLUS = {
    "gpt-5.6-sol",
    "gpt-5.6-terra",
    "gpt-5.6-luna",
    "gpt-6-astra",
    "gpt-6-sol",
    "gpt-6-luna",
    "gpt-6.1-sol",
}
# Not in the reference's 272K rule (stated for GPT-5.6/6), but genai-prices bills them so;
# policies.toml adopts it with confirmed=false.
LONG_CONTEXT_PRE_56 = {"gpt-5.4", "gpt-5.5", "gpt-5.5-pro"}
EXTENDED_RETENTION = {
    "gpt-4.1",
    "gpt-5",
    "gpt-5.1",
    "gpt-5.1-codex-mini",
    "gpt-5.2",
    "gpt-5.3-codex",
    "gpt-5.4",
    "gpt-5.5",
    "gpt-5.5-pro",
}

REFERENCE_SOURCES = {
    # every URL the catalog may cite: the Sources list of hosted-api-rules.md + tiktoken's map
    "https://platform.claude.com/docs/en/build-with-claude/prompt-caching",
    "https://platform.claude.com/docs/en/about-claude/pricing",
    "https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/prompt-caching.md",
    "https://github.com/anthropics/anthropic-sdk-python",
    "https://platform.claude.com/docs/en/build-with-claude/token-counting",
    "https://docs.anthropic.com/ko/docs/build-with-claude/prompt-caching",
    "https://platform.claude.com/docs/zh-CN/models/opus-5-5/overview",
    "https://developers.openai.com/api/docs/guides/prompt-caching?prompt-cache-api=chat-completions",
    "https://developers.openai.com/api/docs/guides/prompt-caching.md",
    "https://github.com/openai/openai-python",
    "https://learn.microsoft.com/azure/foundry/openai/how-to/prompt-caching",
    "https://learn.microsoft.com/en-us/javascript/api/@azure/ai-projects/promptcachebreakpointconfig",
    "https://github.com/kurofune/claudit/releases/tag/v1.9.2",
    "https://docs.laozhang.ai/en/announcements/gpt-5-6-pricing-2026-07.md",
    "https://github.com/openai/tiktoken/blob/main/tiktoken/model.py",
}


def test_every_reference_model_is_in_the_catalog() -> None:
    expected = (
        set(ANTHROPIC_MINIMUMS)
        | set(ANTHROPIC_UNCONFIRMED_MINIMUMS)
        | set(OPENAI_READ)
        | {"gpt-5.5-pro"}
    )
    assert expected <= set(known_models())
    assert set(known_models(provider="anthropic")) == set(ANTHROPIC_MINIMUMS) | set(
        ANTHROPIC_UNCONFIRMED_MINIMUMS
    )


@pytest.mark.parametrize("model_id", sorted(ANTHROPIC_MINIMUMS))
def test_anthropic_minimums(model_id: str) -> None:
    policy = get_policy(model_id)
    assert policy.provider == "anthropic"
    assert policy.min_cacheable_tokens == ANTHROPIC_MINIMUMS[model_id]
    assert policy.sources["min_cacheable_tokens"].confirmed


@pytest.mark.parametrize("model_id", sorted(ANTHROPIC_UNCONFIRMED_MINIMUMS))
def test_unconfirmed_minimums_are_flagged_with_their_fallback(model_id: str) -> None:
    policy = get_policy(model_id)
    src = policy.sources["min_cacheable_tokens"]
    assert policy.min_cacheable_tokens == ANTHROPIC_UNCONFIRMED_MINIMUMS[model_id]
    assert src.confirmed is False
    assert src.note is not None and "fallback" in src.note
    assert "min_cacheable_tokens" in policy.unconfirmed()


@pytest.mark.parametrize(
    "model_id", sorted(set(ANTHROPIC_MINIMUMS) | set(ANTHROPIC_UNCONFIRMED_MINIMUMS))
)
def test_anthropic_shared_rules(model_id: str) -> None:
    p = get_policy(model_id)
    assert p.max_breakpoints == 4
    assert p.lookback_positions == 20
    assert p.lookback_collapses_tool_runs is True
    assert p.ttls == ("5m", "1h")
    assert p.default_ttl == "5m"
    assert p.longer_ttl_first is True
    if model_id == "claude-3-haiku":
        # billed $0.30 write / $0.03 read on $0.25 input (official table and genai-prices agree)
        assert p.write_multipliers == {"5m": 1.2, "1h": 2.0}
        assert p.read_multiplier == 0.12
    else:
        assert p.write_multipliers == {"5m": 1.25, "1h": 2.0}
        assert p.write_multiplier() == 1.25
        assert p.read_multiplier == ANTHROPIC_READ_EXCEPTIONS.get(model_id, 0.1)
    assert p.write_multiplier("1h") == 2.0
    assert p.cache_step_tokens is None
    assert p.explicit_breakpoints and p.top_level_cache_control
    assert not p.automatic_caching and not p.prompt_cache_options
    assert p.prompt_cache_retention == ()
    assert p.tokenizer == "anthropic-estimate"
    assert p.token_ratio == (1.3 if model_id in NEW_TOKENIZER else 1.0)
    assert p.batch_multiplier == 0.5


@pytest.mark.parametrize("model_id", sorted(OPENAI_READ))
def test_openai_rules(model_id: str) -> None:
    p = get_policy(model_id)
    assert p.provider == "openai"
    assert p.read_multiplier == OPENAI_READ[model_id]
    assert p.min_cacheable_tokens == 1024
    assert p.cache_step_tokens == 128
    assert p.automatic_caching is True
    assert p.tokenizer == "o200k_base"
    assert p.token_ratio is None
    assert p.batch_multiplier == 0.5
    assert p.lookback_positions is None
    if model_id in GPT56_PLUS:
        assert p.max_breakpoints == 4
        assert p.explicit_breakpoints and p.prompt_cache_options
        assert p.ttls == ("30m",)
        assert p.write_multipliers == {"30m": 1.25}
        assert p.read_breakpoint_window == 80
        assert p.sources["read_breakpoint_window"].confirmed is False  # CONFLICT: Azure says 50
        assert p.prompt_cache_retention == ()
        (rule,) = p.tier_rules
        assert (rule.above_tokens, rule.input_multiplier, rule.cache_multiplier) == (272000, 2, 2)
        assert rule.output_multiplier == 1.5
    else:
        assert p.max_breakpoints == 0
        assert not p.explicit_breakpoints and not p.prompt_cache_options
        assert p.write_multipliers == {}
        assert p.write_multiplier() == 1.0  # no write fee before GPT-5.6
        if model_id in LONG_CONTEXT_PRE_56:
            (rule,) = p.tier_rules
            assert (rule.above_tokens, rule.output_multiplier) == (272000, 1.5)
            assert p.sources["tier_rules"].confirmed is False
        else:
            assert p.tier_rules == ()
        assert ("24h" in p.prompt_cache_retention) == (model_id in EXTENDED_RETENTION)


def test_gpt55_accepts_only_24h_and_nano_has_no_extended_retention() -> None:
    assert get_policy("gpt-5.5").prompt_cache_retention == ("24h",)
    assert get_policy("gpt-5-nano").prompt_cache_retention == ()
    assert get_policy("gpt-5.4").prompt_cache_retention == ("in_memory", "24h")


def test_mythos_52_read_is_an_unconfirmed_fallback() -> None:
    src = get_policy("claude-mythos-5-2").sources["read_multiplier"]
    assert src.confirmed is False and src.note and "fallback" in src.note


def test_haiku_55_tier_rule() -> None:
    p = get_policy("claude-haiku-5-5")
    (rule,) = p.tier_rules
    assert rule.above_tokens == 100_000
    assert set(rule.counts) == {"input", "cache_read", "cache_write"}
    assert rule.input_multiplier == rule.cache_multiplier == rule.output_multiplier == 5.0
    assert p.tier_for(100_000) is None  # "above 100K"
    assert p.tier_for(100_001) == rule
    assert get_policy("claude-sonnet-4-6").tier_for(10**6) is None  # 4.6+: no premium


def test_every_value_has_a_source_url_and_date() -> None:
    tags = catalog_sources()
    assert {s.url for s in tags.values()} <= REFERENCE_SOURCES
    for model_id in known_models():
        p = get_policy(model_id)
        assert set(p.sources) == set(POLICY_FIELDS), model_id
        for name, src in p.sources.items():
            assert src.url in REFERENCE_SOURCES, (model_id, name, src.url)
            assert set(src.also) <= REFERENCE_SOURCES
            assert date(2025, 1, 1) <= src.as_of <= date(2026, 12, 31), (model_id, name)
            if not src.confirmed:
                assert src.note, (model_id, name, "unconfirmed values must say why")


def test_write_multiplier_rejects_unknown_ttl() -> None:
    with pytest.raises(ValueError, match="30m"):
        get_policy("claude-sonnet-4-5").write_multiplier("30m")


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-3-5-haiku-20241022", "claude-3-5-haiku"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-opus-4-20250514", "claude-opus-4-0"),
        ("claude-sonnet-4", "claude-sonnet-4-0"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("anthropic/claude-opus-4-5", "claude-opus-4-5"),
        ("openai/gpt-4.1-nano", "gpt-4.1-nano"),
        ("openrouter/anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("claude-4-5-sonnet", "claude-sonnet-4-5"),
        ("Claude-Sonnet-4-5", "claude-sonnet-4-5"),
        ("gpt-5.6", "gpt-5.6-sol"),
        ("gpt-5-6-sol", "gpt-5.6-sol"),
        ("gpt-6.1-sol-2026-09-29", "gpt-6.1-sol"),
        ("ft:gpt-4o-2024-08-06:acme::abc123", "gpt-4o"),
        ("gpt-5.1-codex", "gpt-5.1"),
    ],
)
def test_lookup_accepts_snapshots_aliases_and_prefixes(ref: str, expected: str) -> None:
    assert get_policy(ref).model_id == expected
    assert resolve_model_id(ref) == expected


def test_unknown_model_names_closest_ids() -> None:
    with pytest.raises(UnknownModelError) as info:
        get_policy("claude-sonet-4-5")
    assert info.value.suggestions[0] == "claude-sonnet-4-5"
    assert "claude-sonnet-4-5" in str(info.value)
    with pytest.raises(UnknownModelError) as info:
        get_policy("gpt-4o-mni")
    assert info.value.suggestions[0] == "gpt-4o-mini"
    assert resolve_model_id("Dummy") is None
    with pytest.raises(UnknownModelError):
        get_policy("Dummy")


def test_explicit_policy_bypasses_lookup() -> None:
    custom = get_policy("claude-sonnet-4-5").model_copy(
        update={"model_id": "my-proxy-model", "min_cacheable_tokens": 2048}
    )
    assert get_policy("my-proxy-model", policy=custom) is custom
    bare = CachePolicy(
        model_id="local-llama",
        provider="openai",
        min_cacheable_tokens=16,
        max_breakpoints=4,
        read_multiplier=0.0,
    )
    assert get_policy("anything", policy=bare).min_cacheable_tokens == 16


def test_policies_are_frozen() -> None:
    p = get_policy("gpt-4o")
    with pytest.raises(Exception):  # noqa: B017  (pydantic's ValidationError for frozen models)
        p.min_cacheable_tokens = 1  # type: ignore[misc]


def test_case_models_resolve() -> None:
    # every model id used in ../shared/cases/bug-cases.jsonl (except the deliberate "Dummy")
    for ref in [
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
        "gpt-4o",
        "claude-sonnet-4-5-20250929",
        "claude-haiku-4-5-20251001",
        "gpt-4.1-nano",
        "claude-3-5-haiku-20241022",
    ]:
        assert resolve_model_id(ref) is not None, ref


# ------------------------------------------------------------------- malformed catalog data


def _raw_catalog() -> dict[str, Any]:
    text = resources.files("promptcache.catalog").joinpath("policies.toml").read_text("utf-8")
    return tomllib.loads(text)


def test_shipped_catalog_builds() -> None:
    built = build_catalog(_raw_catalog())
    assert set(built.policies) == set(known_models())


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda r: r["models"]["gpt-4o"].update(profile="nope"), "unknown profile"),
        (lambda r: r["models"]["gpt-4o"].update(min_tokens={"value": 1}), "unknown field"),
        (
            lambda r: r["models"]["gpt-4o"].update(read_multiplier={"value": 0.5, "source": "X9"}),
            "unknown or missing source tag",
        ),
        (
            lambda r: r["models"]["gpt-4o"].update(read_multiplier={"value": 0.5}),
            "unknown or missing source tag",
        ),
        (
            lambda r: r["models"]["gpt-4o"].update(read_multiplier={"value": -1, "source": "P11"}),
            "greater than or equal to 0",
        ),
        (
            lambda r: r["models"]["gpt-4o"].update(read_multiplier=0.5),
            "expected an inline table",
        ),
        (lambda r: r["models"]["gpt-4o"].update(aliases=["gpt-4o-mini"]), "names both"),
        (
            lambda r: r["profiles"]["anthropic"]["fields"].pop("lookback_positions"),
            "no value for",
        ),
        (
            lambda r: r["models"]["claude-opus-4-5"].update(min_cacheable_tokens={"source": "A3"}),
            "no value for required",
        ),
        (lambda r: r.pop("sources"), "malformed header"),
    ],
)
def test_malformed_catalog_data_raises_catalog_error(
    mutate: Callable[[dict[str, Any]], object], reason: str
) -> None:
    raw = _raw_catalog()
    mutate(raw)
    with pytest.raises(CatalogError, match=reason):
        build_catalog(raw)


@given(st.text(max_size=60))
def test_lookup_of_any_string_resolves_or_raises_unknown_model(model: str) -> None:
    try:
        policy = get_policy(model)
    except UnknownModelError as exc:
        assert exc.model == model
        assert all(s in known_models() for s in exc.suggestions)
    else:
        assert policy.model_id in known_models()


def test_non_string_model_is_an_unknown_model() -> None:
    with pytest.raises(UnknownModelError):
        get_policy(None)  # type: ignore[arg-type]
