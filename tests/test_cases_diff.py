"""Acceptance: every ../shared/cases entry of kind ``diff`` (BR-05, 06, 16, 18, 20, 22).

Placeholders ``<N tokens: ...>`` expand to exactly N tokens (tests/cases.py). Where a case gives
token totals for a whole part (``token_counts``, "tools+system = 8000"), the test sizes one
filler so the rendered part hits the number exactly (:func:`fit`), then asserts the case's
numbers exactly. Case bodies written as prose ("<identical>", "<40000 tokens, cache_control
on last block>") are built here as the case describes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from promptcache.diff import diff, explain
from promptcache.prefix import render
from tests.cases import case, expand_placeholders, filler

MODEL = "claude-sonnet-4-5"  # minimum 1,024 tokens, read 0.1x, write 1.25x (catalog)


def fit(build: Callable[[int], Any], measure: Callable[[Any], int], target: int,
        start: int) -> Any:
    """Size one filler (``build(n)``) so that ``measure`` gives exactly ``target`` tokens."""
    n = start
    for _ in range(4):
        obj = build(n)
        got = measure(obj)
        if got == target:
            return obj
        n += target - got
    raise AssertionError(f"could not fit {target} tokens (got {got})")


def tokens_through(payload: dict[str, Any], tier: str) -> int:
    view = render(payload, "anthropic", model=MODEL)
    return max(s.end_token for s in view.segments if s.tier == tier)


def _text(n: int, salt: str) -> str:
    return filler(n, salt).strip()


def _turns(total: int, count: int, salt: str) -> list[dict[str, Any]]:
    per = total // count
    return [{"role": "user" if k % 2 == 0 else "assistant",
             "content": [{"type": "text", "text": _text(per, f"{salt}{k}")}]}
            for k in range(count)]


def _mark_last(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [{"role": m["role"], "content": [dict(b) for b in m["content"]]} for m in messages]
    for m in out:
        for b in m["content"]:
            b.pop("cache_control", None)
    out[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return out


# ----------------------------------------------------------------------------- BR-05
def test_br05_tools_reordered() -> None:
    c = case("BR-05")
    exp = c["expected"]
    a, b = (expand_placeholders(r["body"]) for r in c["input"]["requests"])
    r = diff(a, b, provider="anthropic", model=MODEL)
    assert r.verdict == exp["verdict"]
    assert r.cause == exp["cause"] == "tools_reordered"
    assert r.semantic_equal is exp["semantic_equal"]
    detail = r.causes[0].detail
    for key, value in exp["detail"].items():
        assert detail[key] == value
    assert r.divergence is not None and r.divergence.path == exp["first_divergence"]["path"]
    assert r.invalidated_levels == exp["invalidated_levels"]
    assert r.predicted is not None
    assert r.predicted.cache_read == exp["predicted_cache_read_tokens"]
    assert r.causes[0].fix_hint == exp["fix_hint"]
    # what A left: tools (1200 tokens of descriptions + JSON) + 5000 system, all rewritten
    assert r.ideal_cache_read is not None and r.ideal_cache_read > 6200
    assert r.lost_tokens == r.ideal_cache_read


def test_br05_sorted_tools_fix_hits() -> None:
    """Applying the fix hint (sort tools) turns the miss into a pure append."""
    c = case("BR-05")
    a, b = (expand_placeholders(r["body"]) for r in c["input"]["requests"])
    for body in (a, b):
        body["tools"] = sorted(body["tools"], key=lambda t: t["name"])
    r = diff(a, b, provider="anthropic", model=MODEL)
    assert r.verdict == "no_miss"
    assert r.cause == "append_only"
    assert r.predicted is not None and r.predicted.cache_read == r.ideal_cache_read > 6200


# ----------------------------------------------------------------------------- BR-06
def test_br06_json_key_order_openai_steps() -> None:
    c = case("BR-06")
    exp = c["expected"]
    target = c["input"]["token_counts"]["before_divergence"]  # 2150
    raw_a, raw_b = (r["body"] for r in c["input"]["requests"])

    def build(n: int) -> tuple[dict[str, Any], dict[str, Any]]:
        pair = []
        for raw in (raw_a, raw_b):
            body = expand_placeholders(raw)
            body["messages"][0]["content"] = _text(n, "br06-system")
            pair.append(body)
        return pair[0], pair[1]

    a, b = fit(build, lambda p: diff(*p).identical_prefix_tokens, target, 1500)
    r = diff(a, b)
    assert r.identical_prefix_tokens == target
    assert r.verdict == exp["verdict"]
    assert r.cause == exp["cause"] == "json_key_order"
    assert r.semantic_equal is exp["semantic_equal"] is True
    assert r.divergence is not None
    assert r.divergence.path == exp["first_divergence"]["path"]
    assert r.divergence.char_offset == exp["first_divergence"]["char_offset"]
    assert r.divergence.semantic_equal
    assert r.predicted is not None
    assert r.predicted.cache_read == exp["predicted_cached_tokens"] == 2048
    assert r.causes[0].fix_hint == exp["fix_hint"]
    assert r.invalidated_levels == ["messages"]


# ----------------------------------------------------------------------------- BR-16
def _br16_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    c = case("BR-16")
    body_a = c["input"]["requests"][0]["body"]

    def build(n: int) -> dict[str, Any]:
        tools = [{"name": f"tool_{k}", "description": _text(n if k == 0 else 990,
                                                             f"br16-tool{k}"),
                  "input_schema": {"type": "object"}} for k in range(3)]
        return {"model": MODEL, "tools": tools, "tool_choice": body_a["tool_choice"],
                "system": expand_placeholders(body_a["system"]),
                "messages": _mark_last(_turns(40000, 10, "br16-"))}

    a = fit(build, lambda p: tokens_through(p, "tools"), 3000, 990)
    assert tokens_through(a, "system") == 8000
    b = dict(a)
    b["tool_choice"] = c["input"]["requests"][1]["body"]["tool_choice"]
    b["messages"] = _mark_last([*a["messages"], {"role": "user", "content": [
        {"type": "text", "text": _text(300, "br16-side")}]}])
    return a, b


def test_br16_tool_choice_invalidates_messages_only() -> None:
    exp = case("BR-16")["expected"]
    a, b = _br16_pair()
    r = diff(a, b)
    assert r.verdict == exp["verdict"]
    assert r.cause == exp["cause"] == "tool_choice_changed"
    assert r.causes[0].detail == exp["detail"]
    assert r.invalidated_levels == exp["invalidated_levels"] == ["messages"]
    assert r.reusable_prefix == exp["reusable_prefix"] == "tools+system"
    assert r.predicted is not None
    assert r.predicted.cache_read == exp["predicted_usage_second"]["cache_read_input_tokens"]
    assert r.predicted.cache_write == \
        exp["predicted_usage_second"]["cache_creation_input_tokens"]
    assert r.causes[0].fix_hint == exp["fix_hint"]
    assert "confirm with usage" in r.causes[0].note  # states the rule, invites measurement
    assert r.divergence is None  # the content is a pure append: only the parameter changed


def test_br16_observed_hit_contradicts_documented_rule() -> None:
    """If the provider reads the messages anyway, the diff says the rule may not apply."""
    a, b = _br16_pair()
    r = diff(a, b, usage_b={"input_tokens": 0, "cache_read_input_tokens": 48000,
                            "cache_creation_input_tokens": 300})
    assert any("may not apply" in n for n in r.notes)


# ----------------------------------------------------------------------------- BR-18
def _br18_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    u = {k: _text(400, f"br18-{k}") for k in ("u1", "u2", "u3", "u4")}
    a_text = {k: _text(600, f"br18-{k}") for k in ("a1", "a2", "a3")}
    tools = [{"name": "shell", "description": _text(200, "br18-tool"),
              "input_schema": {"type": "object"}}]

    def build(n: int) -> dict[str, Any]:
        return {"model": MODEL, "tools": tools,
                "system": [{"type": "text", "text": _text(n, "br18-system"),
                            "cache_control": {"type": "ephemeral"}}],
                "cache_control": {"type": "ephemeral"},
                "messages": [
                    {"role": "user", "content": u["u1"]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": _text(300, "br18-think"),
                         "signature": "sig"},
                        {"type": "text", "text": a_text["a1"]}]},
                    {"role": "user", "content": u["u2"]},
                    {"role": "assistant", "content": a_text["a2"]},
                    {"role": "user", "content": u["u3"]}]}

    step3 = fit(build, lambda p: tokens_through(p, "system"), 31073, 30800)
    step4 = dict(step3)
    step4["messages"] = [
        {"role": "user", "content": u["u1"] + "\n\n" + u["u2"]},
        {"role": "assistant", "content": a_text["a2"]},
        {"role": "user", "content": u["u3"]},
        {"role": "assistant", "content": a_text["a3"]},
        {"role": "user", "content": u["u4"]}]
    return step3, step4


def test_br18_history_merge_is_message_rewritten() -> None:
    exp = case("BR-18")["expected"]["diff"]
    a, b = _br18_pair()
    r = diff(a, b)
    assert r.cause == exp["cause"] == "message_rewritten"
    assert "merged" in r.causes[0].detail["subtype"]
    assert r.causes[0].detail["merged_into"] == "messages[0]"
    assert r.divergence is not None
    assert r.divergence.path == exp["first_divergence"]["path"] == "messages[0].content"
    assert r.reusable_prefix == exp["reusable_prefix"]
    assert r.predicted is not None
    assert r.predicted.cache_read == exp["predicted_cache_read_tokens_approx"] == 31073
    assert r.verdict == "miss_explained"


def test_br18_tracker_flags_step4_and_not_the_healthy_control() -> None:
    c = case("BR-18")
    exp = c["expected"]
    series = [{"session_id": "gptme", "model": MODEL,
               "usage": {"input_tokens": 10, **{k: v for k, v in s.items() if k != "step"}}}
              for s in c["input"]["usage_series"]]
    report = explain(series)
    flagged = [x for x in report.requests if x.status == "prefix_regression"]
    assert [x.turn + 1 for x in flagged] == [exp["tracker"]["step"]]
    d = flagged[0].detail
    assert d["flag"] == exp["tracker"]["flag"]
    assert d["expected_min_read"] == exp["tracker"]["expected_min_read"]
    assert d["observed_read"] == exp["tracker"]["observed_read"]
    assert d["shortfall"] == exp["tracker"]["shortfall"] == flagged[0].lost_tokens
    healthy = [{"session_id": "langchain", "model": MODEL, "usage": u}
               for u in c["input"]["healthy_control_series"]]
    control = explain(healthy)
    assert [x.status for x in control.requests] == ["cold_start", "hit", "hit", "hit"]
    assert control.misses == 0


# ----------------------------------------------------------------------------- BR-20
def _br20_bodies() -> tuple[dict[str, Any], dict[str, Any]]:
    c = case("BR-20")
    raw_a, raw_b = (r["body"] for r in c["input"]["requests"])
    tools_a = expand_placeholders(raw_a["tools"])

    def build(n: int) -> dict[str, Any]:
        return {"model": MODEL, "tools": tools_a, "tool_choice": raw_a["tool_choice"],
                "system": [{"type": "text", "text": _text(n, "br20-system"),
                            "cache_control": {"type": "ephemeral"}}],
                "messages": _mark_last(_turns(20000, 8, "br20-"))}

    a = fit(build, lambda p: tokens_through(p, "system"), 7200, 6000)
    b = dict(a)
    b["tools"] = [t for t in tools_a if t["name"] == "submit_result"]
    b["tool_choice"] = raw_b["tool_choice"]
    b["messages"] = _mark_last([*a["messages"], {"role": "user", "content": [
        {"type": "text", "text": _text(100, "br20-nudge")}]}])
    return a, b


def test_br20_tools_changed_is_primary_over_tool_choice() -> None:
    exp = case("BR-20")["expected"]
    a, b = _br20_bodies()
    r = diff(a, b)
    assert r.verdict == exp["verdict"]
    assert r.cause == exp["cause"] == "tools_changed"
    assert r.causes[0].detail == exp["detail"]
    assert [c.code for c in r.secondary] == [exp["secondary_change"]]
    assert r.invalidated_levels == exp["invalidated_levels"]
    assert r.predicted is not None
    assert r.predicted.cache_read == exp["predicted_cache_read_tokens"] == 0
    alt = r.recommended_alternative
    assert alt is not None
    rec = exp["recommended_alternative"]
    assert alt["tool_choice"] == rec["tool_choice"]
    assert alt["tools"] == rec["tools"]
    assert alt["invalidated_levels"] == rec["invalidated_levels"]
    assert alt["predicted_cache_read_tokens"] == rec["predicted_cache_read_tokens"] == 7200


def test_br20_mode_switch_check_on_observed_usage() -> None:
    c = case("BR-20")
    obs = c["input"]["observed_example_from_mode_switch"]
    a, b = _br20_bodies()
    r = diff(a, b, usage_a=obs["before"], usage_b=obs["after"])
    check = next(x for x in r.checks if x.name == "whole-prefix rewrite")
    assert check.passed is True
    assert "136238" in check.detail and "134523" in check.detail
    assert r.observed is not None and r.observed.cache_read == 0


# ----------------------------------------------------------------------------- BR-22
def _br22_body() -> dict[str, Any]:
    def build(n: int) -> dict[str, Any]:
        return {"model": MODEL, "max_tokens": 256,
                "system": [{"type": "text", "text": _text(n, "br22-system"),
                            "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": "Summarise the policy."}]}

    return fit(build, lambda p: tokens_through(p, "system"), 1215, 1215)


@pytest.mark.parametrize("with_usage_a", [True, False])
def test_br22_identical_payloads_unexplained_provider_side(with_usage_a: bool) -> None:
    c = case("BR-22")
    exp = c["expected"]
    r1, r2 = c["input"]["requests"]
    body = _br22_body()
    r = diff(body, dict(body), usage_a=r1["usage"] if with_usage_a else None,
             usage_b=r2["usage"], timestamps=(0.0, c["input"]["context"]["gap_seconds"]),
             same_workspace=c["input"]["context"]["same_api_key_workspace"])
    assert r.verdict == exp["verdict"] == "unexplained_miss"
    assert r.cause == "no_difference"
    assert r.causes[0].detail["payload_difference"] == exp["payload_difference"]
    assert r.classification == "provider_side"
    assert r.divergence is None
    passed = {x.name for x in r.checks if x.passed}
    for name in exp["checks_passed"]:
        assert name in passed
    assert r.extra_cost_base_tokens == pytest.approx(1397.25)
    assert round(r.extra_cost_base_tokens or 0) == exp["extra_cost_tokens_equivalent"]
    assert r.lost_tokens == 1215
    assert r.miss_cost_usd is not None and r.miss_cost_usd > 0


def test_br22_lint_finds_nothing_either() -> None:
    """The case's negative test: no client-side finding may be invented (lint agrees)."""
    lint = pytest.importorskip("promptcache.lint")
    body = _br22_body()
    assert lint.lint_request(body, model=MODEL, previous=dict(body)) == \
        case("BR-22")["expected"]["lint_findings"]


def test_every_diff_case_has_a_test() -> None:
    from tests.cases import load_cases

    ids = {c["id"] for c in load_cases("diff")}
    assert ids == {"BR-05", "BR-06", "BR-16", "BR-18", "BR-20", "BR-22"}


@pytest.mark.parametrize("estimated", [1213, 1217, 1230])
def test_br22_prediction_never_exceeds_what_a_wrote(estimated: int) -> None:
    """Our estimate of A's cached prefix differs from A's reported write (1,215): the
    prediction and the ideal read are A's reported read + write, never more."""
    c = case("BR-22")
    exp = c["expected"]
    r1, r2 = c["input"]["requests"]

    def build(n: int) -> dict[str, Any]:
        return {"model": MODEL, "max_tokens": 100,
                "system": [{"type": "text", "text": _text(n, "br22-est"),
                            "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": "hi"}]}

    body = fit(build, lambda p: tokens_through(p, "system"), estimated, estimated)
    usage_a = {"input_tokens": 3, "output_tokens": 5, **r1["usage"]}
    usage_b = {"input_tokens": 3, "output_tokens": 5, **r2["usage"]}
    r = diff(body, dict(body), usage_a=usage_a, usage_b=usage_b, timestamps=(0.0, 0.2))
    written = r1["usage"]["cache_creation_input_tokens"] + r1["usage"]["cache_read_input_tokens"]
    assert r.predicted is not None
    assert r.predicted.cache_read == r.ideal_cache_read == written == 1215
    assert r.lost_tokens == 1215
    assert r.extra_cost_base_tokens == pytest.approx(1397.25)
    assert round(r.extra_cost_base_tokens or 0) == exp["extra_cost_tokens_equivalent"]
    assert r.verdict == exp["verdict"]


def test_br22_openai_variant_whole_prefix_rewrite_is_not_applicable() -> None:
    """OpenAI (gpt-4o) reports no cache writes: the whole-prefix rewrite check is n/a, not
    failed; the predicted read is on the 128-token grid and within A's prompt tokens."""
    body = {"model": "gpt-4o", "messages": [
        {"role": "system", "content": _text(1300, "br22-openai")},
        {"role": "user", "content": "hi"}]}
    usage = {"prompt_tokens": 1320, "completion_tokens": 5,
             "prompt_tokens_details": {"cached_tokens": 0}}
    r = diff(body, dict(body), usage_a=usage, usage_b=usage, timestamps=(0.0, 0.2))
    check = next(x for x in r.checks if x.name == "whole-prefix rewrite")
    assert check.passed is None
    assert "FAILED" not in check.detail and "no cache writes" in check.detail
    assert r.predicted is not None and r.predicted.cache_read == 1280
    assert r.verdict == "unexplained_miss" and r.classification == "provider_side"
