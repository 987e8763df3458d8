"""Planner fixes from trial 17 (findings 1, 2 and 4).

1. GPT-5.6+ implicit breakpoint: on the newest input item whatever its type (a Responses
   ``function_call_output`` included), as the diff engine and the local backend place it
   (hosted-api-rules.md 2.3).
2. Older Claude models strip earlier thinking blocks on a plain user turn: the planner's
   readable entries and read/write figures follow (hosted-api-rules.md 1.7), as diff does.
3. An estimated Anthropic prefix just under the minimum whose error bound reaches it gets a
   marker (a marker under the minimum costs nothing, hosted-api-rules.md 1.4).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from promptcache import PromptBuilder, ToolResult, diff, planner
from promptcache.catalog import get_policy
from promptcache.diff._engine import openai_written, prepare
from promptcache.local.accounting import openai_breakpoints
from promptcache.local.template import apply_template
from promptcache.planner import ReuseModel, plan_breakpoints, prefix_digests
from promptcache.prefix import render
from tests.cases import filler

TOOLS = [{"name": "f", "description": "d", "input_schema": {"type": "object"}}]
CONTINUE = ReuseModel(continuation=1.0, new_conversation=0.0)


# ------------------------------------------------------------------ 1. implicit breakpoint
def _loop(fmt: str, steps: int = 3) -> list[dict[str, Any]]:
    """A GPT-5.6 agent loop whose new turn is a tool result each step."""
    out: list[dict[str, Any]] = []
    plan = None
    hist: list[Any] = [{"role": "user", "content": "go"}]
    turn: ToolResult | None = None
    for step in range(steps):
        b = PromptBuilder("gpt-5.6", previous=plan)
        b.tools(TOOLS).system(filler(1500, "s9")).history(*hist)
        if turn is not None:
            b.turn(turn)
        out.append(b.to_openai_chat(max_completion_tokens=8) if fmt == "chat"
                   else b.to_openai_responses(max_output_tokens=16))
        plan = b.last_plan
        if turn is not None:
            hist.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": turn.tool_use_id,
                 "content": turn.content}]})
        hist.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"c{step}", "name": "f", "input": {"i": step}}]})
        turn = ToolResult(f"c{step}", f"result {step} " + filler(200, f"r{step}"))
    return out


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_implicit_breakpoint_sits_on_the_newest_input_item(fmt: str) -> None:
    payload = _loop(fmt)[2]
    view = render(payload, model="gpt-5.6")
    last = view.segments[-1]
    assert last.kind == "tool_result"  # a function_call_output on Responses: no markable part
    plan = plan_breakpoints(view, get_policy("gpt-5.6"))
    implicit = [b for b in plan.breakpoints if b.source == "implicit"]
    assert [b.segment_index for b in implicit] == [last.index]
    assert implicit[0].prefix_tokens == view.total_tokens
    # no section end claims a marker that is not there
    for d in plan.decisions:
        if "already carries a marker" in d.reason:
            assert d.segment_index in {b.segment_index for b in plan.breakpoints}
    # the diff engine and the local backend write the implicit entry on the same item
    assert last.index in openai_written(prepare(payload))
    prompt = apply_template(payload, model="gpt-5.6")
    assert last.index in [bp.span_index for bp in openai_breakpoints(prompt, payload)]


def test_responses_loop_next_read_matches_diff() -> None:
    """expected_next_read under pure continuation is what diff() predicts the next request
    reads (the whole previous request, function_call_output included), on both APIs."""
    for fmt in ("chat", "responses"):
        reqs = _loop(fmt)
        plan = plan_breakpoints(render(reqs[1], model="gpt-5.6"), get_policy("gpt-5.6"),
                                reuse=CONTINUE)
        predicted = diff(reqs[1], reqs[2]).predicted
        assert predicted is not None
        assert plan.expected_next_read == predicted.cache_read, fmt


def test_builder_responses_plan_reads_the_loop_each_step() -> None:
    """Chained builder plans: each Responses request's implicit entry is the next one's read
    (the expected next read grows with the loop instead of staying at the first message)."""
    plans = []
    plan = None
    for payload in _loop("responses", 4):
        plan = plan_breakpoints(render(payload, model="gpt-5.6"), get_policy("gpt-5.6"), plan)
        plans.append(plan)
    reads = [p.expected_next_read for p in plans]
    assert reads == sorted(reads) and len(set(reads)) == len(reads)
    for prev, nxt in pairwise(plans):
        top = max(e.prefix_tokens for e in prev.written())
        assert nxt.read_entry is not None and nxt.read_entry.prefix_tokens == top


# ------------------------------------------------------------------ 2. thinking stripping
def _strip_pair(model: str) -> tuple[dict[str, Any], dict[str, Any], Any, Any]:
    th = {"type": "thinking", "thinking": "think " + filler(500, "th"), "signature": "sig"}
    h1 = [{"role": "user", "content": "task"},
          {"role": "assistant", "content": [th, {"type": "tool_use", "id": "c1", "name": "f",
                                                 "input": {}}]}]
    res = "res " + filler(300, "res")
    b = PromptBuilder(model)
    b.tools(TOOLS).system(filler(1500, "s")).history(*h1).turn(ToolResult("c1", res))
    p1 = b.to_anthropic(max_tokens=3000)
    plan1 = b.last_plan
    h2 = [*h1, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                                              "content": res}]},
          {"role": "assistant", "content": [{"type": "text", "text": "done"}]}]
    b = PromptBuilder(model, previous=plan1)
    b.tools(TOOLS).system(filler(1500, "s")).history(*h2).turn("thanks, next question")
    p2 = b.to_anthropic(max_tokens=3000)
    return p1, p2, plan1, b.last_plan


def test_plain_turn_stripping_thinking_matches_diff_on_older_claude() -> None:
    p1, p2, _plan1, plan2 = _strip_pair("claude-sonnet-4-5")
    d = diff(p1, p2)
    assert d.cause == "thinking_stripped"
    assert d.predicted is not None
    assert (plan2.read_tokens, plan2.write_tokens) == (d.predicted.cache_read,
                                                       d.predicted.cache_write)
    # the entry read is the system prompt's, before the stripped block
    assert plan2.read_entry is not None
    assert render(p2).segments[plan2.read_entry.segment_index].tier == "system"
    assert not any("reads the previous entry at messages" in d.reason for d in plan2.decisions)
    assert any("strips the thinking block" in d.reason for d in plan2.decisions
               if d.role == "previous")
    # the previous request as a view (the SDK wrapper's fallback) gives the same read
    again = plan_breakpoints(render(p2), get_policy("claude-sonnet-4-5"), render(p1))
    assert again.read_tokens == plan2.read_tokens


def test_models_that_keep_thinking_are_unchanged() -> None:
    p1, p2, plan1, plan2 = _strip_pair("claude-sonnet-4-6")
    d = diff(p1, p2)
    assert d.predicted is not None
    assert plan2.read_tokens == d.predicted.cache_read == max(
        e.prefix_tokens for e in plan1.written())
    assert not planner.stripped_thinking(render(p2), get_policy("claude-sonnet-4-6"))
    assert prefix_digests(render(p2), policy=get_policy("claude-sonnet-4-6")) == \
        prefix_digests(render(p2))


def test_entries_written_after_stripping_are_read_by_the_next_request() -> None:
    """The stripped request's entries carry the digests of what is cached (thinking left
    out), so the next request of the loop, which strips the same block, reads them."""
    model = "claude-sonnet-4-5"
    _p1, p2, _plan1, plan2 = _strip_pair(model)
    view2 = render(p2)
    policy = get_policy(model)
    p3 = dict(p2)
    p3["messages"] = [*p2["messages"], {"role": "assistant", "content": "an answer"},
                      {"role": "user", "content": "and one more " + filler(50, "m")}]
    plan3 = plan_breakpoints(render(p3), policy, plan2)
    top = max(e.prefix_tokens for e in plan2.written())
    assert plan3.read_tokens == top
    d = diff(p2, p3)
    assert d.predicted is not None and d.predicted.cache_read == plan3.read_tokens
    # the digests: the chain as cached repeats at the stripped block and differs after it
    stripped = planner.stripped_thinking(view2, policy)
    assert [view2.segments[i].path for i in stripped] == ["messages[1].content[0]"]
    cached = prefix_digests(view2, policy=policy)
    plain = prefix_digests(view2)
    first = min(stripped)
    assert cached[:first] == plain[:first] and cached[first] == cached[first - 1]
    assert cached[first + 1:] != plain[first + 1:]


# ------------------------------------------------------------------ 3. near the minimum
def _near(model: str, n: int) -> tuple[dict[str, Any], Any]:
    b = PromptBuilder(model)
    b.system(filler(n, "s")).turn("hi")
    return b.to_anthropic(max_tokens=8), b.last_plan


@pytest.mark.parametrize(("model", "n", "placed"), [
    ("claude-haiku-4-5", 4050, True),    # 4,050 * 1.15 >= 4,096
    ("claude-haiku-4-5", 3000, False),   # 3,450 < 4,096: nothing could be cached
    ("claude-sonnet-4-6", 1000, True),   # 1,150 >= 1,024
    ("claude-sonnet-4-6", 880, False),   # 1,012 < 1,024
])
def test_estimated_prefix_near_the_minimum_gets_a_free_marker(model: str, n: int,
                                                              placed: bool) -> None:
    payload, plan = _near(model, n)
    marked = [blk for blk in payload["system"] if "cache_control" in blk]
    assert bool(marked) is placed
    system_end = [d for d in plan.decisions if d.role == "system-end"]
    assert len(system_end) == 1 and system_end[0].placed is placed
    if placed:
        assert "estimate" in system_end[0].reason and "costs nothing" in system_end[0].reason
    else:
        assert "nothing would be cached" in system_end[0].reason
    # the figures stay those of the estimate, which is under the minimum (as diff says)
    assert (plan.read_tokens, plan.write_tokens, plan.expected_next_read) == (0, 0, 0.0)


def test_near_minimum_entry_is_not_predicted_as_a_read() -> None:
    model = "claude-haiku-4-5"
    p1, plan1 = _near(model, 4050)
    p2 = dict(p1)
    p2["messages"] = [*p1["messages"], {"role": "assistant", "content": "hello " +
                                        filler(300, "a")}, {"role": "user", "content": "more"}]
    plan2 = plan_breakpoints(render(p2), get_policy(model), plan1)
    d = diff(p1, p2)
    assert d.predicted is not None
    assert plan2.read_tokens == d.predicted.cache_read == 0
    assert plan2.write_tokens == plan2.total_tokens  # the end is over the minimum: written


def test_exact_counts_keep_the_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    import promptcache.tokens as tokens

    monkeypatch.setattr(tokens, "view_count_bound", lambda view: (True, 0.0))
    payload, plan = _near("claude-haiku-4-5", 4050)
    assert not any("cache_control" in blk for blk in payload["system"])
    assert plan.breakpoints == ()
    assert all("nothing would be cached" in d.reason for d in plan.decisions
               if d.role in ("system-end", "turn-end"))
