"""Acceptance: ../shared/cases entries of kind ``lint`` (BR-01, 03, 09, 10, 14, 24) and the
``lint_findings`` inside BR-08 (builder), BR-12 (builder) and BR-22 (diff), with their negative
controls. Placeholders ``<N tokens: ...>`` are expanded by tests/cases.py.

Rule names in the cases are suggestions; the mapping to our codes is the table below.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from promptcache.lint import lint_paths, lint_request
from promptcache.lint.finding import Finding
from tests.cases import case, expand_placeholders, filler, load_cases, materialize_request

CASE_RULES = {
    "volatile-timestamp": "PC101",
    "volatile-id": "PC102",
    "too-many-breakpoints": "PC301",
    "lookback-exceeded": "PC302",
    "below-min-cacheable": "PC303",
    "cache-control-on-empty-block": "PC305",
    "whitespace-only-text-block": "PC306",
    "breakpoint-on-volatile-block": "PC307",
    "prompt-cache-key-missing": "PC402",
    "prompt-cache-key-unstable": "PC403",
    "prompt-cache-key-hot": "PC404",
}


def codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


def only(findings: list[Finding], code: str) -> list[Finding]:
    return [f for f in findings if f.code == code]


def test_every_lint_case_is_covered() -> None:
    ids = {c["id"] for c in load_cases("lint")}
    assert ids == {"BR-01", "BR-03", "BR-09", "BR-10", "BR-14", "BR-24"}
    for c in load_cases("lint"):
        for f in c["expected"].get("findings", []):
            assert f["rule"] in CASE_RULES


# ------------------------------------------------------------------ BR-01
def br01_request() -> dict[str, Any]:
    return expand_placeholders(case("BR-01")["input"]["request"])  # type: ignore[no-any-return]


def test_br01_second_timestamp_in_cached_system_prompt() -> None:
    c = case("BR-01")
    exp = c["expected"]["findings"][0]
    found = only(lint_request(br01_request()), "PC101")
    assert len(found) == 1
    f = found[0]
    assert f.severity.value == exp["severity"] == "warning"
    assert f.path == exp["path"]
    assert f.details["match"] == exp["match"]
    assert f.details["granularity"] == exp["granularity"]
    assert f.details["inside_cached_prefix"] is True
    assert f.details["breakpoint_path"] == exp["breakpoint_path"]
    # ~3020: the 3000 stable tokens plus the rest of the timestamp line (estimate, +-3 %)
    assert abs(f.details["tokens_invalidated"] - exp["tokens_invalidated_per_request_approx"]) \
        <= 0.03 * exp["tokens_invalidated_per_request_approx"]
    assert str(f.details["tokens_invalidated"]) in f.message
    assert f.fix == c["expected"]["fix_hint"]


def test_br01_negative_day_precision_is_info() -> None:
    req = br01_request()
    text = req["system"][0]["text"]
    req["system"][0]["text"] = text.replace("Current date and time: 2025-05-04 14:03:27",
                                            "Current date: 2025-05-04")
    found = only(lint_request(req), "PC101")
    assert [(f.severity.value, f.details["granularity"]) for f in found] == [("info", "day")]


def test_br01_negative_timestamp_after_last_breakpoint() -> None:
    req = br01_request()
    req["system"][0]["text"] = req["system"][0]["text"].replace(
        "Current date and time: 2025-05-04 14:03:27\n", "")
    req["messages"][-1]["content"] += "\nCurrent date and time: 2025-05-04 14:03:27"
    assert codes(lint_request(req)) == []


def test_br01_position_in_json_file(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    raw = json.dumps(br01_request(), indent=2)
    path.write_text(raw, encoding="utf-8")
    result = lint_paths([str(path)])
    [f] = only(result.findings, "PC101")
    line = raw.splitlines()[f.line - 1]
    assert line[f.col - 1:].startswith("2025-05-04 14:03:27")


# ------------------------------------------------------------------ BR-03
def test_br03_uuid_in_json_metadata() -> None:
    c = case("BR-03")
    exp = c["expected"]["findings"][0]
    req = expand_placeholders(c["input"]["request"])
    found = lint_request(req)
    [f] = only(found, "PC102")
    assert f.severity.value == exp["severity"]
    assert f.path == exp["path"]
    assert f.details["subkind"] == exp["kind"] == "uuid"
    assert f.details["json_key"] == exp["json_key"]
    assert f.details["inside_cached_prefix"] is True
    approx = exp["tokens_invalidated_per_request_approx"]
    assert approx <= f.details["tokens_invalidated"] <= approx * 1.03
    assert f.fix == c["expected"]["fix_hint"]
    assert "PC101" not in codes(found)


def test_br03_variant_b_id_and_millisecond_timestamp_at_char_0() -> None:
    c = case("BR-03")
    req = expand_placeholders(c["input"]["request"])
    req["system"][0]["text"] = expand_placeholders(c["input"]["variant_b"]["system[0].text"])
    found = lint_request(req)
    [fid] = only(found, "PC102")
    [fts] = only(found, "PC101")
    exp_id, exp_ts = c["expected"]["variant_b_findings"]
    assert (fid.path, fid.details["char_offset"]) == (exp_id["path"], exp_id["char_offset"])
    assert fid.severity.value == exp_id["severity"]
    assert fts.details["granularity"] == exp_ts["granularity"] == "millisecond"
    assert fts.severity.value == exp_ts["severity"]
    # "on Anthropic it is also below every model minimum, which BR-14 should report separately"
    assert only(found, "PC303")


def test_br03_negative_metadata_in_newest_user_turn() -> None:
    c = case("BR-03")
    req = expand_placeholders(c["input"]["request"])
    text = req["system"][0]["text"]
    meta, rest = text.split("\n", 2)[:2], text.split("\n", 2)[2]
    req["system"][0]["text"] = rest
    req["messages"][-1]["content"] = [{"type": "text", "text": "\n".join(meta)},
                                      {"type": "text", "text": "hi"}]
    assert codes(lint_request(req)) == c["expected"]["negative_control_findings"] == []


# ------------------------------------------------------------------ BR-09
def test_br09_five_breakpoints() -> None:
    c = case("BR-09")
    exp = c["expected"]["findings"][0]
    req = expand_placeholders(c["input"]["request"])
    [f] = only(lint_request(req), "PC301")
    assert f.severity.value == exp["severity"] == "error"
    assert (f.details["count"], f.details["limit"]) == (exp["count"], exp["limit"])
    assert f.details["paths_in_processing_order"] == exp["paths_in_processing_order"]


def test_br09_variant_relay_automatic_breakpoint_takes_a_slot() -> None:
    c = case("BR-09")
    req = expand_placeholders(c["input"]["request"])
    del req["messages"][2]["content"][0]["cache_control"]  # 4 user markers ...
    req["cache_control"] = {"type": "ephemeral"}  # ... plus the relay's automatic one
    [f] = only(lint_request(req), "PC301")
    assert f.details["count"] == 5 and f.details["limit"] == 4


def test_br09_four_breakpoints_pass() -> None:
    req = expand_placeholders(case("BR-09")["input"]["request"])
    del req["tools"][0]["cache_control"]
    assert "PC301" not in codes(lint_request(req))


# ------------------------------------------------------------------ BR-10
def br10() -> dict[str, Any]:
    c = case("BR-10")
    req = expand_placeholders(c["input"]["request"])
    req["messages"][0]["content"][0]["source"]["data"] = "iVBORw0KGgo="
    return req  # type: ignore[no-any-return]


def test_br10_cache_control_on_empty_block() -> None:
    exp = case("BR-10")["expected"]["findings"][0]
    found = lint_request(br10())
    assert codes(found) == ["PC305"]
    assert found[0].path == exp["path"] and found[0].severity.value == exp["severity"]


def test_br10_whitespace_only_block_even_without_cache_control() -> None:
    c = case("BR-10")
    req = br10()
    req["messages"][0]["content"][1] = c["input"]["variant_whitespace"]["messages[0].content[1]"]
    exp = c["expected"]["variant_whitespace_findings"][0]
    found = lint_request(req)
    assert codes(found) == ["PC306"]
    assert found[0].path == exp["path"] and found[0].severity.value == "error"


def test_br10_bad_block_in_history_is_still_found() -> None:
    req = br10()
    req["messages"] += [{"role": "assistant", "content": "I see a screenshot."},
                        {"role": "user", "content": "what now?"}]
    assert codes(lint_request(req)) == ["PC305"]


# ------------------------------------------------------------------ BR-14
def test_br14_prefix_below_haiku_minimum() -> None:
    c = case("BR-14")
    exp = c["expected"]["findings"][0]
    req = expand_placeholders(c["input"]["request"])
    [f] = only(lint_request(req), "PC303")
    assert f.path == exp["path"] and f.severity.value == exp["severity"]
    assert f.details["model_minimum"] == exp["model_minimum"] == 2048
    assert abs(f.details["prefix_tokens_at_breakpoint"] - exp["prefix_tokens_at_breakpoint"]) <= 20


def test_br14_usage_classified_below_minimum_not_a_prefix_break() -> None:
    """The observed usage: both requests 'not_cacheable_below_minimum', hit rate 0.0, and the
    miss reason reported is below_minimum, not a prefix break."""
    from promptcache.catalog import get_policy
    from promptcache.diff import diff, explain
    from promptcache.usage import UsageTracker, classify_anthropic, parse_usage

    c = case("BR-14")
    exp = c["expected"]
    req = expand_placeholders(c["input"]["request"])
    model = req["model"]
    minimum = get_policy(model).min_cacheable_tokens
    assert minimum == c["input"]["min_cacheable_table_excerpt"]["claude-3-5-haiku"]
    [finding] = only(lint_request(req), "PC303")
    at_breakpoint = finding.details["prefix_tokens_at_breakpoint"]
    records = [parse_usage(u, model=model, session="s") for u in c["input"]["observed_usage"]]
    for prefix in (at_breakpoint, None):  # with the linter's count, and from usage alone
        got = [classify_anthropic(r, prefix, minimum=minimum) for r in records]
        assert [h.classification for h in got] == exp["usage_classification"]
    tracker = UsageTracker(warn=False)
    for r in records:
        tracker.add(r)
    assert tracker.summary().hit_rate == exp["hit_rate"] == 0.0
    assert not [e for e in tracker.events if e.kind in ("zero_hit_alarm", "prefix_regression",
                                                         "collapse")]
    reason = exp["miss_reason_reported"]  # "below_minimum (not a prefix break)"
    assert reason.startswith("below_minimum")
    result = diff(req, req, usage_b=c["input"]["observed_usage"][1])
    assert [x.code for x in result.causes] == ["below_minimum"]
    report = explain([{"request": req, "usage": u} for u in c["input"]["observed_usage"]])
    assert report.misses == 0  # a model limit, not a prefix break
    assert report.requests[1].status == "uncached"
    assert report.requests[1].cause == "below_minimum"
    # control: the same usage above the minimum is no longer 'below minimum'
    assert classify_anthropic(records[0], 2100, minimum=minimum).classification == (
        "no_cache_activity")
    hit = parse_usage({"input_tokens": 20, "cache_read_input_tokens": 2100,
                       "cache_creation_input_tokens": 0, "output_tokens": 5})
    assert classify_anthropic(hit, 2120, minimum=minimum).classification == "hit"


def test_br14_variant_haiku_4_5_and_sonnet_control() -> None:
    req = expand_placeholders(case("BR-14")["input"]["request"])
    req["model"] = "claude-haiku-4-5"
    req["system"][0]["text"] = filler(3000)
    [f] = only(lint_request(req), "PC303")
    assert f.details["model_minimum"] == 4096
    req["model"] = "claude-sonnet-4-5"  # 1,024: the same prompt caches
    assert "PC303" not in codes(lint_request(req))


# ------------------------------------------------------------------ BR-24 (logs)
def _openai_request(key: str | None) -> dict[str, Any]:
    req: dict[str, Any] = {"model": "gpt-5", "messages": [
        {"role": "system", "content": filler(12350, "br24")},
        {"role": "user", "content": "summarise the ticket"}]}
    if key is not None:
        req["prompt_cache_key"] = key
    return req


def _write_log(tmp_path: Path, records: list[dict[str, Any]]) -> str:
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return str(path)


def test_br24_series_no_key(tmp_path: Path) -> None:
    series = case("BR-24")["input"]["series_no_key"]
    records = [{"timestamp": 1_760_000_000 + 40 * i, "request": _openai_request(None),
                "response": {"usage": {"prompt_tokens": 12400,
                                       "prompt_tokens_details": {"cached_tokens": cached}}}}
               for i, cached in enumerate(series["cached_tokens"])]
    result = lint_paths([_write_log(tmp_path, records)])
    expected = case("BR-24")["expected"]["series_no_key"]
    exp = expected["lint"]
    assert codes(result.findings) == ["PC402"]
    f = result.findings[0]
    assert f.severity.value == exp["severity"] and f.details["requests_without_key"] == 16
    assert f.line == 1
    # "bimodal hits with identical prefixes -> routing, not content"
    assert expected["diagnosis"].startswith("bimodal hits with identical prefixes -> routing")
    assert f.details["diagnosis"] == "routing" and f.details["hit_pattern"] == "bimodal"
    assert "routing, not content" in f.message
    assert f.details["request_hit_fraction"] == expected["request_hit_fraction"]
    assert round(f.details["token_hit_rate"], 4) == expected["token_hit_rate"]


def test_br24_diagnosis_separates_routing_from_content() -> None:
    """The same series diagnosed from usage alone; steady, partial and cold controls."""
    from promptcache.usage import diagnose_hit_pattern, parse_usage

    series = case("BR-24")["input"]["series_no_key"]
    expected = case("BR-24")["expected"]["series_no_key"]

    def records(cached: list[int]) -> list[Any]:
        return [parse_usage({"prompt_tokens": series["prompt_tokens_each"],
                             "prompt_tokens_details": {"cached_tokens": c}}) for c in cached]

    got = diagnose_hit_pattern(records(series["cached_tokens"]))
    assert (got.pattern, got.diagnosis) == ("bimodal", "routing")
    assert got.request_hit_fraction == expected["request_hit_fraction"]
    assert got.token_hit_rate is not None and round(got.token_hit_rate, 4) == (
        expected["token_hit_rate"])
    assert "routing (cache affinity), not content" in got.detail
    steady = diagnose_hit_pattern(records([0] + [12160] * 15))
    assert (steady.pattern, steady.diagnosis) == ("steady", None)
    partial = diagnose_hit_pattern(records([0, 6144, 0, 3072, 0, 8192, 0, 1024]))
    assert (partial.pattern, partial.diagnosis) == ("partial", None)  # content, not routing
    assert diagnose_hit_pattern(records([0] * 16)).pattern == "never"


def test_br24_series_random_key(tmp_path: Path) -> None:
    keys = ["9f1c2b44-0d6e-4b8f-9a21-5d8c0b7e3f44", "41ab7c10-8e47-4a02-b5d3-91e0c7a6f218",
            "c07e3a55-1f2b-4c3d-8e9f-0a1b2c3d4e5f"]
    records = [{"request": _openai_request(k)} for k in keys]
    result = lint_paths([_write_log(tmp_path, records)])
    [f] = only(result.findings, "PC403")
    assert f.severity.value == "warning" and f.details["distinct_keys"] == 3
    assert f.line == 2  # reported on the second request, where the key first changes


def test_br24_series_hot_key(tmp_path: Path) -> None:
    records = [{"ts": 1_760_000_000 + 1.5 * i, "request": _openai_request("tenant-42")}
               for i in range(40)]
    result = lint_paths([_write_log(tmp_path, records)])
    [f] = only(result.findings, "PC404")
    assert f.severity.value == "info" and f.details["requests_per_minute"] == 40
    assert "PC403" not in codes(result.findings)


def test_br24_stable_key_at_moderate_rate_is_clean(tmp_path: Path) -> None:
    records = [{"ts": 1_760_000_000 + 10 * i, "request": _openai_request("tenant-42")}
               for i in range(12)]
    assert codes(lint_paths([_write_log(tmp_path, records)]).findings) == []


# ------------------------------------------------------------------ BR-08 (builder case)
def test_br08_breakpoint_on_block_that_changes(tmp_path: Path) -> None:
    c = case("BR-08")
    first = materialize_request(c["input"]["requests"][0]["body"])
    second = materialize_request(c["input"]["requests"][1]["body"], previous=first)
    assert first is not None and second is not None
    for body in (first, second):
        body["model"] = "claude-sonnet-4-5"
    result = lint_paths([_write_log(tmp_path, [first, second])])
    exp = c["expected"]["lint_findings"][0]
    [f] = only(result.findings, "PC307")
    assert f.path == exp["path"] and f.severity.value == exp["severity"]
    assert 6000 <= f.details["stable_tokens"] <= 6040  # "first 6000 tokens" never reusable
    assert f.line == 2
    fixed = copy.deepcopy(second)
    stable, dynamic = fixed["system"][0]["text"].split("\n## Session context", 1)
    first_fixed = copy.deepcopy(first)
    first_fixed["system"] = [{"type": "text", "text": stable, "cache_control": {"type": "ephemeral"}},
                             {"type": "text", "text": "## Session context" +
                              first["system"][0]["text"].split("\n## Session context", 1)[1]}]
    fixed["system"] = [{"type": "text", "text": stable, "cache_control": {"type": "ephemeral"}},
                       {"type": "text", "text": "## Session context" + dynamic}]
    (tmp_path / "log.jsonl").unlink()
    result = lint_paths([_write_log(tmp_path, [first_fixed, fixed])])
    assert "PC307" not in codes(result.findings)


# ------------------------------------------------------------------ BR-12 (builder case)
def _br12(step_blocks: int, extra_breakpoint: int | None = None, result_tokens: int = 370
          ) -> tuple[dict[str, Any], dict[str, Any]]:
    system = [{"type": "text", "text": filler(12000, "br12"), "cache_control": {"type": "ephemeral"}}]
    history: list[dict[str, Any]] = []
    for i in range(10):  # blocks #0..#9
        role = "user" if i % 2 == 0 else "assistant"
        history.append({"role": role, "content": [{"type": "text", "text": filler(3000, f"h{i}")}]})
    prev: dict[str, Any] = {"model": "claude-sonnet-4-5", "system": system,
                            "messages": copy.deepcopy(history)}
    prev["messages"][9]["content"][0]["cache_control"] = {"type": "ephemeral"}
    cur_msgs = copy.deepcopy(history)
    for k in range(step_blocks // 2):
        cur_msgs.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{k:02d}", "name": "grep", "input": {"q": str(k)}}]})
        cur_msgs.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{k:02d}", "content": filler(result_tokens, f"r{k}")}]})
    cur_msgs[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    if extra_breakpoint is not None:
        cur_msgs[extra_breakpoint]["content"][0]["cache_control"] = {"type": "ephemeral"}
    cur = {"model": "claude-sonnet-4-5", "system": system, "messages": cur_msgs}
    return prev, cur


def test_br12_new_tail_breakpoint_beyond_lookback() -> None:
    exp = case("BR-12")["expected"]["lint_findings"][0]
    prev, cur = _br12(24)
    [f] = only(lint_request(cur, previous=prev), "PC302")
    assert f.severity.value == exp["severity"]
    assert (f.details["distance_blocks"], f.details["limit"]) == (exp["distance_blocks"], exp["limit"])


def test_br12_message_states_what_is_read_and_written() -> None:
    """The system breakpoint is still within reach: the naive request reads 12,000 (tools +
    system) and writes 39,000 (blocks 0..33), re-writing the 30,000 the previous request
    cached; the message says so instead of "reads nothing"."""
    from promptcache.prefix import render

    c = case("BR-12")
    counts, naive = c["input"]["token_counts"], c["expected"]["naive_usage"]
    # 12 tool_use + 12 tool_result blocks sized so blocks 10..33 hold 9,000 tokens
    prev, cur = _br12(24, result_tokens=744)
    view = render(cur)
    assert view.total_tokens == sum(counts.values()) == 51000
    [f] = only(lint_request(cur, previous=prev), "PC302")
    assert f.details["read_through"] == "system[0]"
    assert f.details["tokens_read"] == naive["cache_read_input_tokens"] == 12000
    assert f.details["tokens_written"] == naive["cache_creation_input_tokens"] == 39000
    assert f.details["tokens_rewritten"] == counts["messages_blocks_0_to_9"] == 30000
    assert "reads nothing" not in f.message
    assert "reads only about 12000 tokens" in f.message and "writes about 39000" in f.message


def test_br12_explain_agrees_with_the_lint_message() -> None:
    """``explain`` on the same pair: predicted read 12,000, 30,000 tokens lost."""
    from promptcache.diff import explain

    naive = case("BR-12")["expected"]["naive_usage"]
    prev, cur = _br12(24, result_tokens=744)
    report = explain([{"request": prev}, {"request": cur}])
    second = report.requests[1]
    assert second.cause == "breakpoint_moved"
    assert second.predicted_cache_read == naive["cache_read_input_tokens"] == 12000
    assert second.lost_tokens == 30000
    [f] = only(lint_request(cur, previous=prev), "PC302")
    assert second.lost_tokens == f.details["tokens_rewritten"]


def test_br12_with_prerendered_views() -> None:
    from promptcache.prefix import render

    prev, cur = _br12(24)
    [f] = only(lint_request(cur, previous=prev, view=render(cur), previous_view=render(prev)),
               "PC302")
    assert f.details["distance_blocks"] == 24


def test_br12_lagging_breakpoint_fixes_it() -> None:
    prev, cur = _br12(24, extra_breakpoint=29)  # "messages block #29"
    assert "PC302" not in codes(lint_request(cur, previous=prev))
    prev, cur = _br12(12)  # a short step stays inside the window
    assert "PC302" not in codes(lint_request(cur, previous=prev))
    assert "PC302" not in codes(lint_request(cur))  # no previous request: nothing to say


# ------------------------------------------------------------------ BR-22 (diff case)
def test_br22_identical_requests_have_no_findings(tmp_path: Path) -> None:
    body = {"model": "claude-sonnet-4-5",
            "system": [{"type": "text", "text": filler(1215, "br22"),
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "hello"}]}
    assert case("BR-22")["expected"]["lint_findings"] == []
    result = lint_paths([_write_log(tmp_path, [body, body])])
    assert codes(result.findings) == []


@pytest.mark.parametrize("code", sorted(set(CASE_RULES.values())))
def test_case_rules_exist(code: str) -> None:
    from promptcache.lint.rules import get_rule

    assert get_rule(code).code == code
