"""Tests for the catalog's provider-wide rules (provider_rules.toml) and strips_prior_thinking.

The expected values are copied by hand from ../shared/reference/hosted-api-rules.md (1.7 the
invalidation hierarchy and thinking blocks, 2.1 the per-key overflow rate), independently of
the TOML files, so a wrong or missing row fails here. Source URLs must be ones the reference
files cite.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from promptcache._errors import CatalogError
from promptcache.catalog import (
    _policy,
    _rules,
    get_policy,
    invalidation_rules,
    known_models,
    provider_rules,
    provider_rules_sources,
    thinking_strip_models,
)
from promptcache.catalog._rules import PROVIDER_FIELDS, build_rules
from promptcache.diff._causes import (
    _ANTHROPIC_BY_CAUSE,
    _OPENAI_BY_CAUSE,
    _TIER_TO_ANTHROPIC,
    CAUSES,
    anthropic_reason_for,
    openai_reason_for,
)
from promptcache.lint.facts import facts_for

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
REFERENCE = SHARED / "reference"

# The one URL the reference names by page rather than by URL: hosted-api-rules.md 1.7 cites
# "[A10] (structured-outputs page)" for output_config.format.
STRUCTURED_OUTPUTS = "https://platform.claude.com/docs/en/build-with-claude/structured-outputs"

# The one source the reference does not cite: the Responses API's max_output_tokens minimum of
# 16 has no official source; the catalog records the API's error text quoted in a third-party
# issue, as an unofficial, unconfirmed value.
RESPONSES_MINIMUM_ISSUE = "https://github.com/vectorize-io/hindsight/issues/58"

# hosted-api-rules.md 1.5 "Pre-warming": max_tokens: 0 is rejected with stream: true,
# thinking.type "enabled", output_config.format and a forced tool_choice (tool/any). [A3][A10]
PREWARM_SOURCES = {
    "https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/prompt-caching.md",
    "https://platform.claude.com/docs/en/build-with-claude/prompt-caching",
}

# hosted-api-rules.md 1.7 "Thinking blocks": older Opus and Sonnet models and all Haiku models
# up to Haiku 4.5 strip earlier thinking blocks (catalog ids).
STRIP_MODELS = {
    "claude-3-opus",
    "claude-opus-4-0",
    "claude-opus-4-1",
    "claude-3-5-sonnet",
    "claude-3-7-sonnet",
    "claude-sonnet-4-0",
    "claude-sonnet-4-5",
    "claude-3-haiku",
    "claude-3-5-haiku",
    "claude-haiku-4-5",
}

# (provider, first key) -> (cause, first tier invalidated): hosted-api-rules.md 1.7 for
# Anthropic (tool_choice: messages; thinking and effort: messages at least; speed: system on;
# output_config.format: the whole cache), 2.1 for prompt_cache_key (routing), and the OpenAI
# diagnostics reasons for request settings.
EXPECTED_RULES = {
    ("anthropic", "tool_choice"): ("tool_choice_changed", "messages"),
    ("anthropic", "thinking"): ("thinking_changed", "messages"),
    ("anthropic", "output_config.effort"): ("effort_changed", "messages"),
    ("anthropic", "output_config.format"): ("output_format_changed", "tools"),
    ("anthropic", "speed"): ("speed_changed", "system"),
    ("openai", "prompt_cache_key"): ("prompt_cache_key_changed", "tools"),
    ("openai", "reasoning.effort"): ("effort_changed", "tools"),
    ("openai", "text.verbosity"): ("verbosity_changed", "tools"),
    ("openai", "service_tier"): ("service_tier_changed", "tools"),
}

# hosted-api-rules.md 1.7 "Diagnostics": the cache_miss_reason.type values.
ANTHROPIC_REASONS = {
    "model_changed",
    "system_changed",
    "tools_changed",
    "messages_changed",
    "previous_message_not_found",
    "unavailable",
}


def _reference_urls() -> set[str]:
    urls: set[str] = set()
    for path in REFERENCE.glob("*.md"):
        urls |= {u.rstrip(".,;)") for u in re.findall(r"https?://[^\s)>\]]+", path.read_text())}
    return urls | {STRUCTURED_OUTPUTS}


# ------------------------------------------------------------------------------ the data


def test_shipped_rules_build() -> None:
    built = build_rules(_raw())
    assert set(built.providers) == {"anthropic", "openai"}
    assert len(built.invalidation) == len(invalidation_rules())


def test_openai_key_overflow_rpm_is_about_15() -> None:
    assert provider_rules("openai").key_overflow_rpm == 15.0
    assert provider_rules("anthropic").key_overflow_rpm is None


def test_invalidation_table_matches_the_reference() -> None:
    got = {(r.provider, r.keys[0]): (r.cause, r.invalidates) for r in invalidation_rules()}
    assert got == EXPECTED_RULES
    assert {r.provider for r in invalidation_rules("openai")} == {"openai"}
    assert all(r.cause in CAUSES for r in invalidation_rules())


def test_anthropic_diagnostics_reasons_match_the_reference() -> None:
    assert set(provider_rules("anthropic").diagnostics_reasons) == ANTHROPIC_REASONS


def test_cause_maps_only_name_the_providers_reasons() -> None:
    anthropic = set(provider_rules("anthropic").diagnostics_reasons)
    openai = set(provider_rules("openai").diagnostics_reasons)
    assert set(_ANTHROPIC_BY_CAUSE.values()) | set(_TIER_TO_ANTHROPIC.values()) <= anthropic
    assert set(_OPENAI_BY_CAUSE.values()) <= openai
    for code in CAUSES:
        for tier in ("tools", "system", "messages", None):
            a = anthropic_reason_for(code, tier)
            o = openai_reason_for(code, tier)
            assert a is None or a in anthropic, (code, tier, a)
            assert o is None or o in openai, (code, tier, o)


def test_anthropic_prewarm_rules_match_the_reference() -> None:
    rules = provider_rules("anthropic")
    assert rules.prewarm_max_tokens == 0
    got = {(r.param, frozenset(r.equals)) for r in rules.prewarm_rejects}
    assert got == {
        ("stream", frozenset({True})),
        ("thinking.type", frozenset({"enabled"})),
        ("tool_choice.type", frozenset({"tool", "any"})),
        ("output_config.format", frozenset()),
    }
    for field in ("prewarm_max_tokens", "prewarm_rejects"):
        src = rules.sources[field]
        assert {src.url, *src.also} == PREWARM_SOURCES, field
        assert src.confirmed and src.official
    # OpenAI documents no pre-warm; Anthropic has no max_output_tokens
    assert provider_rules("openai").prewarm_max_tokens is None
    assert provider_rules("openai").prewarm_rejects == ()
    assert rules.min_max_output_tokens is None


def test_prewarm_check_names_the_setting_and_the_source() -> None:
    from promptcache._errors import InvalidRequestError

    rules = provider_rules("anthropic")
    rules.check_prewarm({"stream": False, "thinking": {"type": "disabled"},
                         "tool_choice": {"type": "auto"}, "output_config": {"format": None}})
    rules.check_prewarm({"stream": 1})  # true, not 1: compared with its type
    with pytest.raises(InvalidRequestError, match="prompt-caching") as e:
        rules.check_prewarm({"tool_choice": {"type": "tool", "name": "t"}})
    assert e.value.path == "tool_choice.type"
    provider_rules("openai").check_prewarm({"stream": True})  # no pre-warm rules: no-op


def test_responses_minimum_is_recorded_unconfirmed() -> None:
    rules = provider_rules("openai")
    assert rules.min_max_output_tokens == 16
    src = rules.sources["min_max_output_tokens"]
    assert src.url == RESPONSES_MINIMUM_ISSUE
    assert not src.official and not src.confirmed
    assert src.note and "Expected a value >= 16" in src.note


def test_every_entry_has_a_reference_source_url_and_date() -> None:
    urls = _reference_urls()
    unreferenced = {s.url for s in provider_rules_sources().values()} - urls
    # the vision page (Anthropic's image size cap) is not in the reference: its one use, the
    # image limits, is official documentation (trial 14)
    vision = "https://platform.claude.com/docs/en/build-with-claude/vision"
    assert unreferenced == {RESPONSES_MINIMUM_ISSUE, vision}
    urls |= unreferenced  # the issue's one use is checked to be unconfirmed above
    for name in ("anthropic", "openai"):
        facts = provider_rules(name)  # type: ignore[arg-type]
        assert set(facts.sources) == set(PROVIDER_FIELDS), name
        for field, src in facts.sources.items():
            assert src.url in urls, (name, field, src.url)
            assert set(src.also) <= urls
            assert date(2025, 1, 1) <= src.as_of <= date(2026, 12, 31), (name, field)
    for rule in invalidation_rules():
        assert rule.source.url in urls, rule
        assert set(rule.source.also) <= urls
        assert date(2025, 1, 1) <= rule.source.as_of <= date(2026, 12, 31), rule


# ----------------------------------------------------------------- strips_prior_thinking


def test_thinking_strip_models_match_the_reference() -> None:
    assert thinking_strip_models() == STRIP_MODELS


@pytest.mark.parametrize("model_id", known_models())
def test_strips_prior_thinking_is_sourced_per_model(model_id: str) -> None:
    policy = get_policy(model_id)
    src = policy.sources["strips_prior_thinking"]
    if policy.provider == "openai":
        assert policy.strips_prior_thinking is None  # does not apply
    else:
        assert policy.strips_prior_thinking is (model_id in STRIP_MODELS)
        assert src.url == (
            "https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/"
            "prompt-caching.md"
        )
    assert src.as_of is not None


def test_haiku_55_keeps_thinking_as_an_unconfirmed_fallback() -> None:
    policy = get_policy("claude-haiku-5-5")
    assert policy.strips_prior_thinking is False
    assert "strips_prior_thinking" in policy.unconfirmed()
    assert policy.sources["strips_prior_thinking"].note  # says which fallback was chosen


# ------------------------------------------------------------------------- the users


def test_lint_facts_read_the_overflow_rate_from_the_catalog() -> None:
    assert facts_for("openai-chat", "gpt-4o").key_overflow_rpm == 15.0
    assert facts_for("openai-responses", None).key_overflow_rpm == 15.0
    assert facts_for("anthropic", "claude-sonnet-4-5").key_overflow_rpm is None


# ------------------------------------------------------------------- malformed rule data


def _raw() -> dict[str, Any]:
    text = resources.files("promptcache.catalog").joinpath("provider_rules.toml").read_text("utf-8")
    return tomllib.loads(text)


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda r: r.pop("sources"), "malformed header"),
        (lambda r: r.pop("invalidation"), "malformed header"),
        (lambda r: r["providers"].pop("openai"), "no \\[providers\\] entry"),
        (lambda r: r["providers"]["openai"].pop("key_overflow_rpm"), "no value for"),
        (lambda r: r["providers"]["anthropic"].pop("prewarm_rejects"), "no value for"),
        (
            lambda r: r["providers"]["anthropic"].update(
                prewarm_rejects={"value": [{"path": "stream"}], "source": "A3"}
            ),
            "param",
        ),
        (
            lambda r: r["providers"]["openai"].update(
                min_max_output_tokens={"value": 0, "source": "X1"}
            ),
            "greater than or equal to 1",
        ),
        (lambda r: r["providers"]["openai"].update(rpm={"value": 1}), "unknown field"),
        (
            lambda r: r["providers"]["openai"].update(key_overflow_rpm=15.0),
            "expected an inline table",
        ),
        (
            lambda r: r["providers"]["openai"].update(
                key_overflow_rpm={"value": 15.0, "source": "X9"}
            ),
            "unknown or missing source tag",
        ),
        (
            lambda r: r["providers"]["openai"].update(
                key_overflow_rpm={"value": -1.0, "source": "O2"}
            ),
            "greater than 0",
        ),
        (
            lambda r: r["providers"]["anthropic"].update(diagnostics_reasons={"source": "A4"}),
            "no value for required",
        ),
        (lambda r: r["invalidation"][0].update(invalidates="everything"), "invalidates"),
        (lambda r: r["invalidation"][0].update(keys=[]), "keys"),
        (lambda r: r["invalidation"][0].pop("source"), "unknown or missing source tag"),
        (lambda r: r["invalidation"][0].update(also=["X9"]), "unknown source tag"),
        (lambda r: r["invalidation"][0].update(tier="tools"), "unknown keys"),
        (lambda r: r["invalidation"][0].update(provider="gemini"), "provider"),
    ],
)
def test_malformed_rule_data_raises_catalog_error(
    mutate: Callable[[dict[str, Any]], object], reason: str
) -> None:
    raw = _raw()
    mutate(raw)
    with pytest.raises(CatalogError, match=reason):
        build_rules(raw)


def test_broken_rules_file_raises_catalog_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "provider_rules.toml").write_text("rules_as_of = \n", encoding="utf-8")
    monkeypatch.setattr(_policy.resources, "files", lambda package: tmp_path)
    _rules._rules.cache_clear()
    try:
        with pytest.raises(CatalogError, match=r"provider_rules\.toml"):
            provider_rules("openai")
        with pytest.raises(CatalogError, match=r"provider_rules\.toml"):
            invalidation_rules()
        # the linter's facts never raise: the fact becomes unknown, never a guess
        assert facts_for("openai", "gpt-broken-rules-file").key_overflow_rpm is None
    finally:
        monkeypatch.undo()
        _rules._rules.cache_clear()
    assert provider_rules("openai").key_overflow_rpm == 15.0
