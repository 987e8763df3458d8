"""Breakpoint planner: API limits, TTL order, lookback chain, reads, OpenAI options."""

from __future__ import annotations

import copy
import json
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache._errors import PlanError
from promptcache.builder import PromptBuilder, Thinking, ToolCall, ToolResult, assistant, user
from promptcache.catalog import get_policy
from promptcache.planner import (
    BreakpointPlan,
    ReuseModel,
    WrittenEntry,
    apply_plan,
    auto_cache,
    plan_breakpoints,
    prefix_digests,
    prompt_cache_key,
)
from promptcache.prefix import PrefixView, render
from tests.cases import filler

CLAUDE = "claude-sonnet-4-5"
LOOKBACK = 20
RANK = {"1h": 1, "5m": 0}


# ------------------------------------------------------------------ invariants
def check_plan(view: PrefixView, plan: BreakpointPlan, previous: BreakpointPlan | None) -> None:
    """The rules every Anthropic plan must satisfy."""
    assert plan.marker_count <= 4
    ttls = [b.ttl for b in plan.breakpoints]
    assert all(RANK[str(a)] >= RANK[str(b)] for a, b in pairwise(ttls)), ttls
    for b in plan.breakpoints:
        seg = view.segments[b.segment_index]
        assert seg.kind not in ("thinking", "redacted_thinking")
        assert seg.kind != "text" or (seg.text or "").strip()
        # under the minimum only where the estimate's upper end (+15 %) reaches it, and said so
        minimum = get_policy(CLAUDE).min_cacheable_tokens
        assert b.source != "planner" or b.prefix_tokens >= minimum or (
            b.prefix_tokens * 1.15 >= minimum and "estimate" in b.reason), b
    # chain: every planner breakpoint after the first lies within 20 positions after an
    # earlier breakpoint of this request or an entry the previous request wrote (still valid:
    # the chain over what the provider caches, thinking blocks a plain user turn strips left out)
    digests = prefix_digests(view, policy=get_policy(CLAUDE))
    anchors = []
    if previous is not None:
        anchors = [e for e in previous.written()
                   if e.segment_index < len(view.segments)
                   and digests[e.segment_index] == e.prefix_digest]
    bps = plan.breakpoints
    for k, b in enumerate(bps):
        if k == 0 or b.source != "planner":
            continue
        ok = any(0 <= b.position - a.position <= LOOKBACK for a in bps[:k]) or any(
            e.segment_index <= b.segment_index and 0 <= b.position - e.position <= LOOKBACK
            for e in anchors)
        assert ok, (k, [x.position for x in bps], [e.position for e in anchors])


# ------------------------------------------------------------------ random conversations
@st.composite
def conversations(draw: st.DrawFn) -> dict[str, Any]:
    n_turns = draw(st.integers(1, 60))
    turns = []
    call = 0
    for t in range(n_turns):
        rounds = []
        for _ in range(draw(st.integers(0, 3))):
            k = draw(st.integers(1, 6))
            think = draw(st.booleans())
            calls = []
            for _ in range(k):
                call += 1
                calls.append(call)
            rounds.append((think, calls, draw(st.integers(5, 300))))
        turns.append({"user": draw(st.integers(3, 400)), "rounds": rounds,
                      "answer": draw(st.integers(3, 200)), "salt": t})
    return {"system": draw(st.integers(200, 3000)), "tools": draw(st.integers(0, 6)),
            "turns": turns, "stable_ttl": draw(st.sampled_from([None, "1h"]))}


def _turn_messages(turn: dict[str, Any]) -> list[Any]:
    msgs: list[Any] = []
    for think, calls, size in turn["rounds"]:
        parts: list[Any] = []
        if think:
            parts.append(Thinking("reasoning " + str(calls[0]), "sig"))
        parts.extend(ToolCall(f"c{c}", "search", {"q": f"query {c}"}) for c in calls)
        msgs.append(assistant(*parts))
        msgs.append(user(*[ToolResult(f"c{c}", filler(size, f"r{c}")) for c in calls]))
    msgs.append(assistant(filler(turn["answer"], f"a{turn['salt']}")))
    return msgs


def _builder(conv: dict[str, Any], upto: int) -> PromptBuilder:
    b = PromptBuilder(CLAUDE, stable_ttl=conv["stable_ttl"])
    if conv["tools"]:
        b.tools([{"name": f"tool_{i}", "description": filler(40, f"t{i}"),
                  "input_schema": {"type": "object"}} for i in range(conv["tools"])])
    b.system(filler(conv["system"], "system"))
    history: list[Any] = []
    for t in conv["turns"][:upto]:
        history.append(user(filler(t["user"], f"u{t['salt']}")))
        history.extend(_turn_messages(t))
    if history:
        b.history(*history)
    nxt = conv["turns"][upto]
    b.turn(filler(nxt["user"], f"u{nxt['salt']}"))
    return b


@settings(max_examples=25)
@given(conversations())
def test_single_request_plans_obey_every_rule(conv: dict[str, Any]) -> None:
    b = _builder(conv, len(conv["turns"]) - 1)
    out = b.to_anthropic()
    plan = b.last_plan
    assert plan is not None
    view = render(out)
    check_plan(view, plan, None)
    # the payload carries exactly the plan's markers
    assert [s.path for s in view.breakpoints()] == plan.paths
    assert [s.breakpoint.ttl for s in view.breakpoints() if s.breakpoint] == \
        [b.ttl for b in plan.breakpoints]


@settings(max_examples=8)
@given(conversations())
def test_conversation_sequence_reads_the_previous_entry_every_turn(conv: dict[str, Any]) -> None:
    previous: BreakpointPlan | None = None
    prev_top = 0
    step = max(1, len(conv["turns"]) // 12)  # at most ~12 requests per example (speed)
    for upto in range(0, len(conv["turns"]), step):
        b = _builder(conv, upto)
        b.previous = previous
        out = b.to_anthropic()
        plan = b.last_plan
        assert plan is not None
        view = render(out)
        check_plan(view, plan, previous)
        if previous is not None and prev_top:
            # the longest entry the previous request wrote is read (the lookback reaches it)
            assert plan.read_tokens == prev_top
        written = [w.prefix_tokens for w in plan.written()
                   if w.prefix_tokens >= get_policy(CLAUDE).min_cacheable_tokens]
        prev_top = max(written, default=0)
        previous = plan


def test_appending_more_than_the_lookback_adds_lagging_breakpoints() -> None:
    conv = {"system": 1500, "tools": 0, "stable_ttl": None,
            "turns": [{"user": 20, "rounds": [], "answer": 20, "salt": 0},
                      {"user": 20, "rounds": [(False, [1], 10), (False, [2], 10),
                                              (False, [3], 10), (False, [4], 10),
                                              (False, [5], 10), (False, [6], 10),
                                              (False, [7], 10), (False, [8], 10),
                                              (False, [9], 10), (False, [10], 10),
                                              (False, [11], 10), (False, [12], 10),
                                              (False, [13], 10), (False, [14], 10),
                                              (False, [15], 10), (False, [16], 10)],
                       "answer": 20, "salt": 1},
                      {"user": 20, "rounds": [], "answer": 20, "salt": 2}]}
    first = _builder(conv, 1)
    first.to_anthropic()
    p1 = first.last_plan
    assert p1 is not None
    second = _builder(conv, 2)
    second.previous = p1
    out = second.to_anthropic()
    p2 = second.last_plan
    assert p2 is not None
    view = render(out)
    check_plan(view, p2, p1)
    end1 = max(p1.positions)
    assert max(p2.positions) - end1 > LOOKBACK  # the turn appended > 20 positions
    assert any(b.role == "lagging" for b in p2.breakpoints)
    assert p2.read_tokens == max(w.prefix_tokens for w in p1.written())


def test_cold_long_conversation_keeps_the_chain_and_the_end() -> None:
    turns = [{"user": 30, "rounds": [], "answer": 30, "salt": i} for i in range(60)]
    b = _builder({"system": 1500, "tools": 3, "stable_ttl": None, "turns": turns}, 59)
    out = b.to_anthropic()
    plan = b.last_plan
    assert plan is not None
    check_plan(render(out), plan, None)
    last = render(out).segments[-1]
    assert plan.breakpoints[-1].segment_index == last.index  # the new turn is written
    skipped = [d for d in plan.decisions if d.role == "system-end" and not d.placed]
    assert skipped  # system end too far from the end for the chain on a cold request


# ------------------------------------------------------------------ limits and repairs
def _payload(n_sys: int = 1500, **extra: Any) -> dict[str, Any]:
    return {"model": CLAUDE, "max_tokens": 100,
            "system": [{"type": "text", "text": filler(n_sys, "s")}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
            **extra}


def test_under_the_minimum_nothing_is_marked() -> None:
    out = auto_cache(_payload(200))
    assert "cache_control" not in json.dumps(out)
    view = render(_payload(200))
    plan = plan_breakpoints(view, get_policy(CLAUDE))
    assert plan.breakpoints == ()
    assert any("minimum" in d.reason for d in plan.decisions)
    # a 4,096-token model skips a 3,000-token prefix that a 1,024-token model caches
    p3000 = _payload(3000)
    assert "cache_control" in json.dumps(auto_cache(p3000))
    p3000["model"] = "claude-opus-4-5"
    assert "cache_control" not in json.dumps(auto_cache(p3000))


def test_automatic_slot_is_counted() -> None:
    payload = _payload(1500, cache_control={"type": "ephemeral"})
    view = render(payload)
    plan = plan_breakpoints(view, get_policy(CLAUDE))
    assert plan.marker_count <= 4
    assert any(b.source == "automatic" for b in plan.breakpoints)
    # the planner does not put a second marker on the block the automatic one covers
    auto = view.automatic_index
    assert sum(1 for b in plan.breakpoints if b.segment_index == auto) == 1


def test_user_ttl_order_is_repaired() -> None:
    payload = _payload(1500)
    payload["system"][0]["cache_control"] = {"type": "ephemeral"}
    payload["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    out = auto_cache(payload)
    ttls = [s.breakpoint.ttl for s in render(out).breakpoints() if s.breakpoint]
    assert ttls == ["1h", "1h"]
    assert payload["system"][0]["cache_control"] == {"type": "ephemeral"}  # input untouched


def test_marker_on_thinking_block_is_moved() -> None:
    payload = _payload(1500)
    payload["messages"] = [
        {"role": "user", "content": "question"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "partial"},
            {"type": "thinking", "thinking": "t", "signature": "s",
             "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": "next"},
    ]
    out = auto_cache(payload)
    view = render(out)
    assert all(s.kind != "thinking" for s in view.breakpoints())
    assert view.find("messages[1].content[0]").breakpoint is not None


def test_bad_ttl_options_are_plan_errors() -> None:
    view = render(_payload())
    with pytest.raises(PlanError):
        plan_breakpoints(view, get_policy(CLAUDE), ttl="30m")
    with pytest.raises(PlanError):
        plan_breakpoints(view, get_policy(CLAUDE), ttl="1h", stable_ttl="5m")
    with pytest.raises(PlanError):
        plan_breakpoints(view, get_policy("gpt-4o"))


def test_stale_previous_entries_are_ignored() -> None:
    a = render(_payload(1500))
    plan_a = plan_breakpoints(a, get_policy(CLAUDE))
    changed = _payload(1500)
    changed["system"][0]["text"] = filler(1500, "other")
    b = render(changed)
    plan_b = plan_breakpoints(b, get_policy(CLAUDE), previous=plan_a)
    assert plan_b.read_tokens == 0
    assert any("no longer a prefix" in d.reason for d in plan_b.decisions)
    entries = [WrittenEntry(0, 0, a.segments[0].end_token, prefix_digests(a)[0])]
    assert plan_breakpoints(a, get_policy(CLAUDE), previous=entries).read_tokens == \
        a.segments[0].end_token


def test_reuse_model_changes_the_plan_when_slots_are_short() -> None:
    payload = _payload(1500)
    payload["messages"] = [{"role": "user", "content": filler(1500, "m0")},
                           {"role": "assistant", "content": "ok"},
                           {"role": "user", "content": "next"}]
    view = render(payload)
    one_slot = get_policy(CLAUDE).model_copy(update={"max_breakpoints": 1})
    cont = plan_breakpoints(view, one_slot, reuse=ReuseModel(continuation=1.0,
                                                              new_conversation=0.0))
    newc = plan_breakpoints(view, one_slot, reuse=ReuseModel(continuation=0.0,
                                                              new_conversation=1.0))
    assert cont.paths == ["messages[2].content"]
    assert newc.paths == ["system[0]"]
    # string content gets converted to a block to carry the marker
    out = apply_plan(payload, cont)
    assert out["messages"][2]["content"] == [{"type": "text", "text": "next",
                                              "cache_control": {"type": "ephemeral"}}]
    assert payload["messages"][2]["content"] == "next"


def test_apply_plan_is_pure() -> None:
    payload = _payload(1500)
    before = copy.deepcopy(payload)
    plan = plan_breakpoints(render(payload), get_policy(CLAUDE))
    out = apply_plan(payload, plan)
    assert payload == before and out != before


# ------------------------------------------------------------------ OpenAI
def _chat(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [
        {"role": "system", "content": filler(1500, "s")},
        {"role": "user", "content": filler(1200, "u")},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "next question"}], **extra}


def test_openai_key_and_breakpoints() -> None:
    old = auto_cache(_chat("gpt-4o"))
    assert old["prompt_cache_key"].startswith("pc-")
    assert "prompt_cache_options" not in old and "prompt_cache_breakpoint" not in json.dumps(old)
    new = auto_cache(_chat("gpt-5.6-sol"))
    assert new["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m"}
    view = render(new)
    explicit = [s for s in view.segments if s.breakpoint is not None]
    assert 1 <= len(explicit) <= 3
    assert explicit[0].path == "messages[0].content[0]"  # the system prompt's end
    assert all(s.role != "assistant" for s in explicit)
    # the caller's key and options are kept
    kept = auto_cache(_chat("gpt-5.6-sol", prompt_cache_key="mine",
                            prompt_cache_options={"mode": "explicit"}))
    assert kept["prompt_cache_key"] == "mine"
    assert kept["prompt_cache_options"] == {"mode": "explicit"}


def test_prompt_cache_key_ignores_markers_and_the_dynamic_tail() -> None:
    a = render(_chat("gpt-4o"))
    marked = _chat("gpt-4o")
    marked["messages"][0]["content"] = [{"type": "text", "text": filler(1500, "s"),
                                         "prompt_cache_breakpoint": {"mode": "explicit"}}]
    b = render(marked)
    tail = _chat("gpt-4o")
    tail["messages"][-1]["content"] = "a different question"
    assert prompt_cache_key(a) == prompt_cache_key(b) == prompt_cache_key(render(tail))


# ------------------------------------------------------------------ SDK kwargs as the wrapper sends them
def test_auto_cache_accepts_sdk_kwargs_with_sentinels_and_tuples() -> None:
    import anthropic
    import httpx2

    timeout = httpx2.Timeout(5.0)
    kwargs: dict[str, Any] = {
        "model": CLAUDE, "max_tokens": 10, "system": _payload()["system"],
        "messages": tuple(_payload()["messages"]), "tools": anthropic.NOT_GIVEN,
        "temperature": anthropic.omit, "timeout": timeout, "extra_headers": {"x-a": "1"}}
    out = auto_cache(kwargs)
    assert out["tools"] is anthropic.NOT_GIVEN and out["temperature"] is anthropic.omit
    assert out["timeout"] is timeout  # not copied
    assert isinstance(out["messages"], list)
    assert "cache_control" in json.dumps(out["system"])
    assert isinstance(kwargs["messages"], tuple)  # the caller's kwargs are untouched


def test_responses_payload_gets_explicit_markers_on_input_parts() -> None:
    payload = {"model": "gpt-5.6-sol", "instructions": "Be brief.", "input": [
        {"role": "developer", "content": [{"type": "input_text", "text": filler(1500, "d")}]},
        {"role": "user", "content": [{"type": "input_text", "text": "question"}]}]}
    out = auto_cache(payload)
    view = render(out)
    marked = [s.path for s in view.segments if s.breakpoint is not None]
    assert marked == ["input[0].content[0]"]
    assert out["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m"}
    assert out["prompt_cache_key"].startswith("pc-")


def test_openai_user_markers_count_against_the_three_explicit_writes() -> None:
    payload = _chat("gpt-5.6-sol")
    payload["messages"] = [
        {"role": "system", "content": [{"type": "text", "text": filler(1500, f"s{i}"),
                                        "prompt_cache_breakpoint": {"mode": "explicit"}}
                                       for i in range(3)]},
        {"role": "user", "content": "q"}]
    view = render(payload)
    plan = plan_breakpoints(view, get_policy("gpt-5.6-sol"))
    assert [b.source for b in plan.breakpoints] == ["user", "user", "user", "implicit"]


def _marked_system(model: str, n: int, **extra: Any) -> dict[str, Any]:
    payload = _chat(model, **extra)
    payload["messages"] = [
        {"role": "system", "content": [{"type": "text", "text": filler(400, f"s{i}"),
                                        "prompt_cache_breakpoint": {"mode": "explicit"}}
                                       for i in range(n)]},
        {"role": "user", "content": "q"}]
    return payload


def test_gpt56_written_lists_only_the_breakpoints_the_api_writes() -> None:
    # six caller markers: all kept in the request, but GPT-5.6 writes only the latest 3 beside
    # the implicit one (implicit mode) or the latest 4 (explicit mode); hosted-api-rules.md 2.3
    implicit = plan_breakpoints(render(_marked_system("gpt-5.6-sol", 6)),
                                get_policy("gpt-5.6-sol"))
    assert [b.source for b in implicit.breakpoints] == ["user"] * 6 + ["implicit"]
    assert implicit.explicit_writes == 3
    assert [e.segment_index for e in implicit.written()] == [3, 4, 5, 6]
    explicit = plan_breakpoints(
        render(_marked_system("gpt-5.6-sol", 6, prompt_cache_options={"mode": "explicit"})),
        get_policy("gpt-5.6-sol"))
    assert explicit.explicit_writes == 4
    assert [e.segment_index for e in explicit.written()] == [2, 3, 4, 5]
    # the next plan's previous entries are the written ones, not every marker: with the 4th
    # block edited, nothing written before it survives (blocks 0-2 were never written)
    edited = _marked_system("gpt-5.6-sol", 6)
    edited["messages"][0]["content"][3]["text"] += " (edited)"
    nxt = plan_breakpoints(render(edited), get_policy("gpt-5.6-sol"), implicit)
    assert nxt.read_entry is None
    same = plan_breakpoints(render(_marked_system("gpt-5.6-sol", 6)),
                            get_policy("gpt-5.6-sol"), implicit)
    assert same.read_entry is not None and same.read_entry.segment_index == 6
    # Anthropic: every breakpoint writes
    assert plan_breakpoints(render(_payload(1500)), get_policy(CLAUDE)).explicit_writes is None


# ------------------------------------------------------------------ never a request the API rejects
@st.composite
def marked_payloads(draw: st.DrawFn) -> dict[str, Any]:
    """Anthropic payloads with random caller markers, some on blocks that cannot carry one."""
    blocks: list[dict[str, Any]] = []
    n = draw(st.integers(2, 14))
    messages: list[dict[str, Any]] = []
    for m in range(n):
        role = "user" if m % 2 == 0 else "assistant"
        content: list[dict[str, Any]] = []
        for j in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["text", "text", "blank", "thinking"] if role ==
                                        "assistant" else ["text", "text", "blank"]))
            if kind == "thinking":
                block: dict[str, Any] = {"type": "thinking", "thinking": "t", "signature": "s"}
            else:
                block = {"type": "text",
                         "text": filler(draw(st.integers(5, 700)), f"b{m}.{j}") if kind == "text"
                         else draw(st.sampled_from(["", " ", "\n\n"]))}
            content.append(block)
            blocks.append(block)
        messages.append({"role": role, "content": content})
    system = [{"type": "text", "text": filler(draw(st.integers(100, 2000)), f"s{i}")}
              for i in range(draw(st.integers(1, 3)))]
    blocks.extend(system)
    for block in draw(st.lists(st.sampled_from(blocks), max_size=7)):
        ttl = draw(st.sampled_from([None, "5m", "1h"]))
        block["cache_control"] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    payload: dict[str, Any] = {"model": CLAUDE, "max_tokens": 10, "system": system,
                               "messages": messages}
    auto = draw(st.sampled_from([None, "5m", "1h"]))
    if auto is not None and draw(st.booleans()):
        payload["cache_control"] = {"type": "ephemeral", "ttl": auto}
    return payload


@settings(max_examples=60)
@given(marked_payloads())
def test_auto_cache_never_emits_what_the_api_rejects(payload: dict[str, Any]) -> None:
    out = auto_cache(payload)
    view = render(out)
    bps = view.breakpoints()
    assert len(bps) <= 4
    ttls = [view.breakpoint_of(s).ttl for s in bps]  # type: ignore[union-attr]
    assert all(RANK[str(a)] >= RANK[str(b)] for a, b in pairwise(ttls)), ttls
    for s in view.segments:
        if s.breakpoint is not None:
            assert s.kind not in ("thinking", "redacted_thinking")
            assert (s.text or "").strip() or s.kind != "text"
    if view.automatic is not None and view.automatic_index is not None:
        seg = view.segments[view.automatic_index]
        assert seg.breakpoint is None or seg.breakpoint.ttl == view.automatic.ttl


def test_apply_plan_share_unchanged_equals_the_deep_copy_and_never_mutates() -> None:
    import copy as _copy

    from promptcache.catalog import get_policy
    from promptcache.planner import apply_plan, plan_breakpoints
    from promptcache.prefix import render

    body = {"model": "claude-sonnet-4-6", "max_tokens": 8, "system": "Rules. " * 400,
            "messages": [{"role": "user", "content": "q " * 300},
                         {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
                         {"role": "user", "content": "next"}]}
    snapshot = _copy.deepcopy(body)
    plan = plan_breakpoints(render(body), get_policy("claude-sonnet-4-6"))
    assert plan.breakpoints
    deep = apply_plan(body, plan)
    shared = apply_plan(body, plan, share_unchanged=True)
    assert shared == deep
    assert body == snapshot  # the input is untouched
    # unchanged nodes are shared, edited ones copied
    assert shared["messages"] is not body["messages"]
    untouched = [i for i, m in enumerate(body["messages"]) if m == shared["messages"][i]]
    assert any(shared["messages"][i] is body["messages"][i] for i in untouched)


def test_fast_constructors_build_what_the_dataclass_init_builds() -> None:
    import dataclasses

    from promptcache import planner as pl

    decision = pl._new_decision(3, "messages[1].content", "turn-end", True, "end of the turn")
    assert decision == pl.Decision(3, "messages[1].content", "turn-end", True, "end of the turn")
    bp = pl._new_breakpoint(3, "system", 2, 1500, "5m", "planner", "system-end", "why", "ab")
    expected = pl.PlannedBreakpoint(3, "system", 2, 1500, "5m", "planner", "system-end", "why",
                                    "ab")
    assert bp == expected and repr(bp) == repr(expected)
    assert pl._new_entry(1, 1, 90, None) == WrittenEntry(1, 1, 90, None)
    plan_args = ("anthropic", "m", (bp,), (decision,), (), 10, 20, 30, 1.5, None, None, 20,
                 ReuseModel())
    plan = pl._new_plan(*plan_args)  # type: ignore[arg-type]
    assert plan == BreakpointPlan(*plan_args)  # type: ignore[arg-type]
    assert list(vars(plan)) == [f.name for f in dataclasses.fields(BreakpointPlan)]
    for obj in (decision, bp, plan):
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.reason = "changed"  # type: ignore[misc,union-attr]


def test_many_previous_entries_keep_the_section_ends_and_the_slot_limit() -> None:
    msgs = [{"role": "user" if t % 2 == 0 else "assistant", "content": "word " * 200}
            for t in range(301)]
    view = render({"model": CLAUDE, "max_tokens": 5, "system": "s " * 1500, "messages": msgs})
    plan = plan_breakpoints(view, get_policy(CLAUDE), list(range(5, 300, 13)))
    roles = [d.role for d in plan.decisions]
    assert roles.count("lagging") > 16  # more candidates than the exhaustive search bound
    assert {"system-end", "history-end", "turn-end"} <= set(roles)
    assert plan.marker_count <= 4 and plan.breakpoints
    assert plan.read_tokens is not None and plan.read_tokens > 0


def test_prefix_digests_resumed_from_an_earlier_view_equal_a_fresh_chain() -> None:
    from promptcache.planner import prefix_digests
    from promptcache.prefix import render, render_cache_clear

    def chat(turns: int, edit: bool = False) -> dict[str, Any]:
        msgs: list[dict[str, Any]] = []
        for t in range(turns):
            msgs.append({"role": "user", "content": f"question {t} " * 30})
            msgs.append({"role": "assistant", "content": f"answer {t} " * 30})
        if edit:
            msgs[3] = {"role": "assistant", "content": "changed"}
        return {"model": "claude-sonnet-4-6", "max_tokens": 8, "system": "You help. " * 80,
                "messages": msgs}

    for later in (chat(6), chat(6, edit=True), chat(3), chat(4)):
        render_cache_clear()
        base = render(chat(4))
        prefix_digests(base)
        resumed = render(later)  # shares the unchanged segments with base (render memo)
        assert resumed.segments[0] is base.segments[0]
        got = prefix_digests(resumed, base)
        render_cache_clear()
        assert got == prefix_digests(render(later))  # a chain hashed from the start


def test_content_digest_ignores_a_marker_on_a_megabyte_text_block() -> None:
    """segment_digest parses a block with a marker (and strips it) at any size, but parses an
    unmarked block only below 1,000,000 bytes: the same text block of >= 1 MB digests apart
    with and without its marker. lint's content_key is segment_digest since 4abac12, so a
    marker moved off a big document block now reads as a content change: divergence() reports
    it and PC302 goes silent (both held at e9cc1e6)."""
    from promptcache.lint.api import lint_request
    from promptcache.planner import segment_digest

    big = "x" * 1_000_000
    cc = {"cache_control": {"type": "ephemeral"}}

    def turns(k: int) -> list[dict[str, Any]]:
        return [{"role": "assistant" if i % 2 == 0 else "user", "content": f"turn {i} " * 20}
                for i in range(k)]

    prev = {"model": "claude-sonnet-4-6", "max_tokens": 8, "messages": [
        {"role": "user", "content": [{"type": "text", "text": big, **cc}]}, *turns(3)]}
    cur = {"model": "claude-sonnet-4-6", "max_tokens": 8, "messages": [
        {"role": "user", "content": [{"type": "text", "text": big}]}, *turns(29),
        {"role": "assistant", "content": [{"type": "text", "text": "end", **cc}]}]}
    codes = [f.code for f in lint_request(cur, previous=prev, rules=["PC302"])]
    assert codes == ["PC302"]  # the marker at messages[30] is 30 positions past the entry
    # the cause (already so at e9cc1e6, where lint did not use it): the digests differ
    a, b = render(prev).segments[0], render(cur).segments[0]
    assert segment_digest(a) == segment_digest(b)


def test_auto_cache_on_deeply_nested_json_raises_only_invalid_request() -> None:
    """render() walks nesting iteratively since c6ad4f7 and now accepts up to ~990 levels
    (e9cc1e6 raised InvalidRequestError from about 335); apply_plan's copy.deepcopy then hits
    the recursion limit from about 495 levels, so auto_cache() lets a RecursionError escape
    where it is documented to raise InvalidRequestError (and did at e9cc1e6)."""
    from promptcache._errors import InvalidRequestError
    from promptcache.planner import auto_cache

    nested: Any = "leaf"
    for _ in range(600):
        nested = [nested]
    body = {"model": "claude-sonnet-4-6", "max_tokens": 8, "system": "S " * 2000,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "hi", "extra": nested,
                 "cache_control": {"type": "ephemeral"}}]}]}
    try:
        auto_cache(body)
    except InvalidRequestError:
        pass  # what e9cc1e6 raised; a successful plan is fine too


def test_a_read_entry_on_a_breakpoint_block_is_noted_once() -> None:
    """Review (4th session): when the entry a request read also carries one of its
    breakpoints (an identical retry), an invalidated entry gives one decision, not two."""
    system = "stable instructions " * 800
    body = {"model": "claude-sonnet-4-6", "max_tokens": 5, "system": system,
            "messages": [{"role": "user", "content": "q1"}]}
    policy = get_policy("claude-sonnet-4-6")
    first = plan_breakpoints(render(body), policy)
    retry = plan_breakpoints(render(body), policy, first)
    assert retry.read_entry is not None
    assert retry.read_entry.segment_index in [b.segment_index for b in retry.breakpoints]
    assert len(retry.written()) == len(retry.breakpoints)
    changed = dict(body, system=system + "changed")
    notes = [d for d in plan_breakpoints(render(changed), policy, retry).decisions
             if d.role == "previous"]
    assert len(notes) == len({d.segment_index for d in notes}) >= 1


def test_an_inferred_key_covers_the_first_minimum_tokens_only() -> None:
    """New-user trial 9: the wrapper's key hashed the whole system prompt, so a timestamp at
    its end gave every request a new key (routing them apart on the hosted API, where the
    unchanged start would still be read) and the live diff blamed prompt_cache_key_changed.
    A key inferred from a raw request covers the model's minimum cacheable prefix (1,024
    tokens); a change inside it still changes the key; the builder's key is unchanged."""
    def chat(system: str) -> dict[str, Any]:
        return {"model": "gpt-5", "messages": [{"role": "system", "content": system},
                                              {"role": "user", "content": "hi"}]}

    base = filler(3000, "s")
    late = [auto_cache(chat(base + f" Time: 2026-11-30 09:0{t}:00"))["prompt_cache_key"]
            for t in range(2)]
    assert late[0] == late[1]
    early = [auto_cache(chat(f"Time: 2026-11-30 09:0{t}:00 " + base))["prompt_cache_key"]
             for t in range(2)]
    assert early[0] != early[1]
    whole = [prompt_cache_key(render(chat(base + f" Time: 09:0{t}"))) for t in range(2)]
    assert whole[0] != whole[1]  # no window asked: the whole stable prefix
