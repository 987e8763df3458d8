"""New-user trial 13, findings F6, F11 and F14 (lint rules PC301, PC304, PC307; the planner).

* F6: on GPT-5.6+ ``max_breakpoints`` (4) limits cache *writes*, not markers: more
  ``prompt_cache_breakpoint`` s are accepted (the implicit breakpoint plus the latest 3, or the
  latest 4 in ``mode: "explicit"``, write; earlier ones only read; reads look at the latest 80).
  PC301 called 5+ an HTTP 400 and ``auto_cache`` dropped the caller's earliest markers. Also
  ``mode: "explicit"`` with no breakpoint (caching silently off, pitfall 13) had no finding.
* F11: a top-level ``cache_control`` whose TTL differs from an explicit marker on the last
  cacheable block is a documented 400 that lint missed.
* F14: PC307 on a varying value at the *start* of a system block with a breakpoint said "its
  stable part (first 5 tokens) is never reusable" and advised a split under the minimum.

Facts: hosted-api-rules.md 1.1 (the two automatic-caching 400s), 1.4 (minimums), 2.3
(GPT-5.6+ writes and reads), 4 (pitfall 13); https://developers.openai.com/api/docs/guides/
prompt-caching, https://platform.claude.com/docs/en/build-with-claude/prompt-caching.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptcache.catalog import get_policy
from promptcache.lint import LintConfig, lint_paths, lint_request
from promptcache.lint.finding import Finding
from promptcache.planner import _fix_user_markers, auto_cache, plan_breakpoints
from promptcache.prefix import render
from tests.cases import filler

SYSTEM = "You are the support assistant of a plant nursery. " + filler(1500, "s8-rules")
BP = {"mode": "explicit"}


def codes(findings: list[Finding], code: str) -> list[Finding]:
    return [f for f in findings if f.code == code]


def g56_chat(turns: int, model: str = "gpt-5.6-sol", **extra: Any) -> dict[str, Any]:
    """The trial's g56_multi.json: a breakpoint on the system message and on every user turn,
    kept in the history (``turns`` user turns)."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": [
        {"type": "text", "text": SYSTEM, "prompt_cache_breakpoint": dict(BP)}]}]
    for i in range(turns):
        if i:
            msgs.append({"role": "assistant", "content": f"answer {i}"})
        msgs.append({"role": "user", "content": [
            {"type": "text", "text": f"question {i}: " + filler(40, f"q{i}"),
             "prompt_cache_breakpoint": dict(BP)}]})
    body: dict[str, Any] = {"model": model, "max_tokens": 2, "prompt_cache_key": "conv-1",
                            "messages": msgs}
    body.update(extra)
    return body


def n_markers(body: dict[str, Any]) -> int:
    return json.dumps(body).count("prompt_cache_breakpoint")


# ------------------------------------------------------------------ F6: PC301 on GPT-5.6+
@pytest.mark.parametrize("model", ["gpt-5.6-sol", "gpt-5.6"])
def test_pc301_more_than_four_breakpoints_on_gpt_5_6_is_no_error(model: str) -> None:
    body = g56_chat(5, model)  # 6 markers
    [f] = codes(lint_request(body), "PC301")
    assert f.severity.value == "info" and "HTTP 400" not in f.message
    assert f.details["reason"] == "writes_latest" and f.details["count"] == 6
    limit = get_policy(model).max_breakpoints
    # implicit mode (the default): the implicit breakpoint plus the latest limit - 1 write
    paths = f.details["paths_in_processing_order"]
    assert f.details["writes"] == limit - 1
    assert f.details["written_paths"] == paths[-(limit - 1):]
    assert f.details["read_only_paths"] == paths[:len(paths) - (limit - 1)]
    assert f.details["read_only_paths"][0] == "messages[0].content[0]"  # the system prompt
    assert "the API accepts the request" in f.message


def test_pc301_explicit_mode_writes_the_latest_four() -> None:
    body = g56_chat(4, prompt_cache_options={"mode": "explicit"})  # 5 markers
    [f] = codes(lint_request(body), "PC301")
    limit = get_policy("gpt-5.6-sol").max_breakpoints
    assert f.severity.value == "info" and f.details["writes"] == limit
    assert f.details["read_only_paths"] == ["messages[0].content[0]"]
    assert "the earliest marker (at messages[0].content[0]) only reads" in f.message


def test_pc301_silent_while_every_marker_writes() -> None:
    assert codes(lint_request(g56_chat(2)), "PC301") == []  # 3 markers + the implicit one
    body = g56_chat(3, prompt_cache_options={"mode": "explicit"})  # 4 markers, all written
    assert codes(lint_request(body), "PC301") == []


def test_pc301_past_the_read_window_says_the_earliest_are_never_read() -> None:
    window = get_policy("gpt-5.6-sol").read_breakpoint_window
    assert window
    body = g56_chat(window)  # window + 1 markers
    [f] = codes(lint_request(body), "PC301")
    assert f.severity.value == "info" and f.details["beyond_read_window"] == 1
    assert f"reads look at the latest {window} breakpoints only" in f.message


def test_pc301_anthropic_five_markers_is_still_an_error() -> None:
    body = {"model": "claude-sonnet-4-5", "system": [
        {"type": "text", "text": c, "cache_control": {"type": "ephemeral"}} for c in "abcde"],
        "messages": [{"role": "user", "content": "x"}]}
    [f] = codes(lint_request(body), "PC301")
    assert f.severity.value == "error" and "HTTP 400" in f.message


def test_lint_log_of_a_growing_gpt_5_6_chat_reports_no_error(tmp_path: Path) -> None:
    """The trial's g56log5.jsonl: 5 turns, one breakpoint per user turn."""
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(g56_chat(t)) + "\n" for t in range(1, 6)),
                   encoding="utf-8")
    res = lint_paths([str(log)], LintConfig(select=("PC301",)))
    assert res.errors == []
    assert [f.severity.value for f in res.findings] == ["info"]


# ------------------------------------------------------------------ F6: mode explicit, no bp
def _no_bp(shape: str, **extra: Any) -> dict[str, Any]:
    if shape == "chat":
        body: dict[str, Any] = {"model": "gpt-5.6-sol", "messages": [
            {"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]}
    else:
        body = {"model": "gpt-5.6-sol", "input": [
            {"role": "developer", "content": SYSTEM}, {"role": "user", "content": "hi"}]}
    body["prompt_cache_options"] = {"mode": "explicit"}
    body.update(extra)
    return body


@pytest.mark.parametrize("shape", ["chat", "responses"])
def test_pc301_explicit_mode_without_a_breakpoint_is_an_info(shape: str) -> None:
    """An info, not a warning: the reference (2.3) calls it the documented way to turn caching
    off, so wrap(lint="error") must not refuse it (review 13)."""
    body = _no_bp(shape)
    [f] = codes(lint_request(body), "PC301")
    assert f.severity.value == "info" and f.path == "prompt_cache_options.mode"
    assert f.details["reason"] == "explicit_without_breakpoints"
    assert "caching is silently off" in f.message
    assert f"all {render(body).total_tokens} prompt tokens" in f.message


def test_pc301_explicit_mode_silent_with_a_breakpoint_or_a_stored_prompt() -> None:
    body = _no_bp("chat")
    body["messages"][0]["content"] = [{"type": "text", "text": SYSTEM,
                                       "prompt_cache_breakpoint": dict(BP)}]
    assert codes(lint_request(body), "PC301") == []
    chained = _no_bp("responses", previous_response_id="resp_1")
    assert codes(lint_request(chained), "PC301") == []
    implicit = _no_bp("chat", prompt_cache_options={"mode": "implicit"})
    assert codes(lint_request(implicit), "PC301") == []


# ------------------------------------------------------------------ F6: the planner
def test_auto_cache_keeps_every_marker_on_gpt_5_6() -> None:
    body = g56_chat(5)
    policy = get_policy("gpt-5.6-sol")
    fixed, edits = _fix_user_markers(render(body), policy, policy.max_breakpoints)
    assert edits == [] and len(fixed) == 6
    plan = plan_breakpoints(render(body), policy)
    assert plan.marker_edits == ()
    assert "messages[0].content[0]" in plan.paths
    new = auto_cache(body)
    assert n_markers(new) == n_markers(body) == 6
    assert "prompt_cache_breakpoint" in json.dumps(new["messages"][0])


def test_auto_cache_still_drops_the_earliest_on_anthropic() -> None:
    body = {"model": "claude-sonnet-4-5", "system": [
        {"type": "text", "text": c + SYSTEM, "cache_control": {"type": "ephemeral"}}
        for c in "abcde"], "messages": [{"role": "user", "content": "x"}]}
    policy = get_policy("claude-sonnet-4-5")
    _fixed, edits = _fix_user_markers(render(body), policy, policy.max_breakpoints)
    assert [(e.path, e.action) for e in edits] == [("system[0]", "drop")]


def test_pc301_explicit_mode_silent_under_the_minimum() -> None:
    body = {"model": "gpt-5.6", "input": [{"role": "user", "content": "hi"}],
            "prompt_cache_options": {"mode": "explicit"}}
    assert codes(lint_request(body), "PC301") == []


def test_wrap_lint_error_sends_six_breakpoints_on_gpt_5_6() -> None:
    """The trial's g56auto.py / g56multi.py: lint="error" blocked the request, auto_cache
    dropped the system prompt's marker."""
    import promptcache
    from promptcache.local.testing import SMALL_MODEL, LocalBackend
    from promptcache.sdk import sent_requests

    body = g56_chat(5)
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as backend:
        client = promptcache.wrap(backend.openai(), auto_cache=True, lint="error")
        client.chat.completions.create(**body)
        sent = sent_requests(client)[-1].payload
    assert n_markers(sent) == 6
    assert "prompt_cache_breakpoint" in json.dumps(sent["messages"][0])


# ------------------------------------------------------------------ F11: PC304 top-level TTL
def autottl(top: dict[str, Any] | None, block: dict[str, Any]) -> dict[str, Any]:
    """The trial's autottl.json: a top-level cache_control and a marker on the last block."""
    body: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 5,
                            "system": [{"type": "text", "text": SYSTEM}],
                            "messages": [{"role": "user", "content": [
                                {"type": "text", "text": "hi", "cache_control": block}]}]}
    if top is not None:
        body["cache_control"] = top
    return body


@pytest.mark.parametrize("top,block,ttls", [
    ({"type": "ephemeral", "ttl": "1h"}, {"type": "ephemeral"}, ("1h", "5m")),
    ({"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}, ("5m", "1h")),
    ({"type": "ephemeral", "ttl": "5m"}, {"type": "ephemeral", "ttl": "1h"}, ("5m", "1h")),
])
def test_pc304_top_level_ttl_differs_from_the_last_blocks_marker(
        top: dict[str, Any], block: dict[str, Any], ttls: tuple[str, str]) -> None:
    [f] = codes(lint_request(autottl(top, block)), "PC304")
    assert f.severity.value == "error" and f.path == "messages[0].content[0]"
    assert f.details["reason"] == "automatic_ttl_mismatch"
    assert (f.details["ttl"], f.details["block_ttl"]) == ttls
    assert "HTTP 400" in f.message and "the same TTL" in f.fix


@pytest.mark.parametrize("top,block", [
    ({"type": "ephemeral"}, {"type": "ephemeral"}),
    ({"type": "ephemeral", "ttl": "5m"}, {"type": "ephemeral"}),
    ({"type": "ephemeral", "ttl": "1h"}, {"type": "ephemeral", "ttl": "1h"}),
    (None, {"type": "ephemeral", "ttl": "1h"}),
])
def test_pc304_same_ttl_or_no_top_level_passes(top: dict[str, Any] | None,
                                               block: dict[str, Any]) -> None:
    assert codes(lint_request(autottl(top, block)), "PC304") == []


def test_pc304_top_level_ttl_on_another_block_is_not_the_mismatch() -> None:
    """The marker on an earlier block: the top-level one lands after it (the order rule)."""
    body = autottl({"type": "ephemeral", "ttl": "1h"}, {"type": "ephemeral"})
    body["messages"][0]["content"].append({"type": "text", "text": "more"})
    assert [f.details["reason"] for f in codes(lint_request(body), "PC304")] == ["ttl_order"]


# ------------------------------------------------------------------ F14: PC307 dynamic head
RULES = filler(1500, "s8-pc307")


def _log(tmp_path: Path, bodies: list[dict[str, Any]]) -> list[Finding]:
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"request": b}) + "\n" for b in bodies), encoding="utf-8")
    res = lint_paths([str(log)], LintConfig(select=("PC307",)))
    assert res.errors == []
    return res.findings


def _budget(credits: int, tools: bool = False) -> dict[str, Any]:
    """The trial's pc105a.jsonl: a varying value at the start of the marked system block."""
    body: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 5, "system": [
        {"type": "text", "text": f"Remaining budget: {credits} credits.\n" + RULES,
         "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hi"}]}
    if tools:
        body["tools"] = [{"name": "lookup", "description": filler(1200, "s8-tool"),
                          "input_schema": {"type": "object"},
                          "cache_control": {"type": "ephemeral"}}]
    return body


def test_pc307_dynamic_head_gives_the_rewritten_tokens_and_a_fix_that_fits(
        tmp_path: Path) -> None:
    bodies = [_budget(c) for c in (1234, 1190, 1150)]
    [f] = _log(tmp_path, bodies)
    block = render(bodies[1]).segments[0]
    assert f.details["advice"] == "move"
    assert f.details["tokens_rewritten"] == block.end_token  # nothing before it is read
    assert f"every request writes about {block.end_token} tokens again" in f.message
    assert f.details["stable_tail_tokens"] > 1400
    minimum = get_policy("claude-sonnet-4-6").min_cacheable_tokens
    assert f"under claude-sonnet-4-6's minimum of {minimum}" in f.message
    assert "never reusable" not in f.message
    assert "split" not in f.fix and "move the varying value after the stable text" in f.fix


def test_pc307_dynamic_head_after_a_readable_breakpoint(tmp_path: Path) -> None:
    """Marked tools before the block: only the block is written again."""
    bodies = [_budget(c, tools=True) for c in (1234, 1190)]
    [f] = _log(tmp_path, bodies)
    view = render(bodies[1])
    tools, block = view.segments[0], view.segments[1]
    assert f.details["advice"] == "move"  # the split would save 5 tokens of 1,500
    assert f.details["tokens_rewritten"] == block.end_token - tools.end_token
    assert "a breakpoint there would cache nothing" not in f.message


def test_pc307_dynamic_tail_keeps_the_split_advice(tmp_path: Path) -> None:
    bodies = [{"model": "claude-sonnet-4-6", "max_tokens": 5, "system": [
        {"type": "text", "text": RULES + f"\n## Session\nopen files: {files}",
         "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hi"}]} for files in ("a.py", "b.py, c.py")]
    [f] = _log(tmp_path, bodies)
    assert f.details["advice"] == "split" and f.fix.startswith("split the block")
    assert f.details["stable_tokens"] >= 1500
    assert f"every request writes about {f.details['tokens_rewritten']} tokens" in f.message
