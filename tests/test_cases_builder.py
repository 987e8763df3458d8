"""../shared/cases entries of kind ``builder`` (and the builder fixes of lint cases BR-09, BR-10).

Each test restates the case's input as a real payload (placeholders expanded to exactly the
stated number of tokens) and asserts the case's expected values: exact breakpoint positions,
the marker layout, and the usage the planner's model predicts.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from promptcache.builder import PromptBuilder, ToolCall, ToolResult
from promptcache.catalog import get_policy
from promptcache.planner import (
    ReuseModel,
    auto_cache,
    fanout_cost,
    plan_breakpoints,
    should_warm_first,
)
from promptcache.prefix import render
from promptcache.tokens import count_text
from promptcache.usage import UsageRecord, explicit_prices, price_record
from tests.cases import case, expand_placeholders, expand_text, filler, load_cases

MODEL = "claude-sonnet-4-5"  # 1,024-token minimum, 4 slots, 20-position lookback


def test_every_builder_case_is_covered() -> None:
    ids = {c["id"] for c in load_cases("builder")}
    assert ids == {"BR-08", "BR-12", "BR-21"}, "a new builder case needs a test here"


def _tool_of_tokens(n: int) -> dict[str, Any]:
    """An Anthropic tool definition whose rendered segment is exactly ``n`` tokens."""
    for k in range(n, 0, -1):
        tool = {"name": "search", "description": filler(k, "tool"),
                "input_schema": {"type": "object"}}
        got = count_text(json.dumps(tool, separators=(",", ":")), MODEL)
        if got == n:
            return tool
        if got < n:
            break
    raise AssertionError(f"no tool of exactly {n} tokens")


# ---------------------------------------------------------------------------------- BR-08
def _br08_system(files: str) -> tuple[str, str]:
    """(stable, dynamic) system text of BR-08 at the case's token counts.

    The stable part is 6,000 tokens and ends in ``.`` (``.\n`` is one token, so joining the
    parts with a newline adds none); the session section is 40 tokens on its own, and the
    joined block (the before-fix layout) is exactly 6,040.
    """
    counts = case("BR-08")["input"]["token_counts"]
    n_stable, n_dynamic = counts["system_stable"], counts["system_dynamic"]
    stable = filler(n_stable - 1, "<6000 tokens: stable instructions>") + "."
    assert count_text(stable, MODEL) == n_stable
    head = f"## Session context\nActive workspace: ws-3; open files: a.py, {files}"
    for k in range(n_dynamic):
        dynamic = head + filler(k, "br08-dynamic")
        if (count_text(dynamic, MODEL) == n_dynamic
                and count_text(stable + "\n" + dynamic, MODEL) == n_stable + n_dynamic):
            return stable, dynamic
    raise AssertionError("no session section of the wanted size")


def _br08_input_cost(c: dict[str, Any], read: int, write: int, uncached: int) -> Decimal:
    """Input cost (USD) of one request at the case's own prices (5-minute writes)."""
    prices = explicit_prices(**c["input"]["prices_usd_per_mtok"])
    record = UsageRecord(provider="anthropic", uncached_input=uncached, cache_read=read,
                         cache_write=write, cache_write_5m=write, cache_write_1h=0)
    cost = price_record(record, prices).input
    assert cost is not None
    return cost


def _br08_builder(files: str, c: dict[str, Any]) -> PromptBuilder:
    req = c["input"]["requests"][0]["body"]
    stable, dynamic = _br08_system(files)
    b = PromptBuilder(MODEL, reuse=ReuseModel(continuation=0.0, new_conversation=1.0))
    b.tools([_tool_of_tokens(c["input"]["token_counts"]["tools"])])
    b.system(stable + "\n" + dynamic, dynamic_from="## Session context")
    b.turn(expand_text(req["messages"]))
    return b


def test_br08_stable_and_dynamic_system_split_marker_on_stable_block() -> None:
    c = case("BR-08")
    counts = c["input"]["token_counts"]
    b1 = _br08_builder("b.py", c)
    first = b1.to_anthropic()
    system = first["system"]
    stable, dynamic = _br08_system("b.py")
    assert system[0] == {"type": "text", "text": stable, "cache_control": {"type": "ephemeral"}}
    assert system[1] == {"type": "text", "text": dynamic}  # no cache_control
    assert system[1]["text"].startswith("## Session context")
    assert system[1]["text"].strip() == system[1]["text"]  # never a whitespace tail
    assert len(system) == 2

    b2 = _br08_builder("c.py", c)
    b2.previous = b1.last_plan
    second = b2.to_anthropic()
    assert second["system"][0] == system[0]  # the marked block is byte-identical
    assert second["tools"] == first["tools"]
    plan = b2.last_plan
    assert plan is not None
    # usage_second_request_after_fix: reads tools + stable system, writes nothing
    after = c["expected"]["usage_second_request_after_fix"]
    assert plan.read_tokens == after["cache_read_input_tokens"] == \
        counts["tools"] + counts["system_stable"]
    assert plan.write_tokens == after["cache_creation_input_tokens"] == 0
    uncached = plan.total_tokens - plan.read_tokens - plan.write_tokens
    assert uncached == after["input_tokens"] == counts["system_dynamic"] + counts["messages"]
    assert render(second, model=MODEL).find("system[1]").tokens == counts["system_dynamic"]
    assert _br08_input_cost(c, plan.read_tokens, plan.write_tokens, uncached) == \
        Decimal(str(c["expected"]["input_cost_usd_after"]))


def test_br08_without_the_split_the_marked_block_changes_every_request() -> None:
    """The 'before' layout: one marked block that changes; nothing is readable."""
    c = case("BR-08")
    counts = c["input"]["token_counts"]
    tool = _tool_of_tokens(counts["tools"])
    views = []
    for files, r in zip(("b.py", "c.py"), c["input"]["requests"], strict=True):
        body = expand_placeholders(r["body"])
        stable, dynamic = _br08_system(files)
        assert body["system"][0]["text"].endswith(f"open files: a.py, {files}")
        body["system"][0]["text"] = stable + "\n" + dynamic
        body = {**body, "model": MODEL, "tools": [tool],
                "messages": [{"role": "user", "content": body["messages"]}]}
        views.append(render(body))
    assert views[1].find("system[0]").tokens == counts["system_stable"] + counts["system_dynamic"]
    policy = get_policy(MODEL).model_copy(update={"max_breakpoints": 1})  # user marker only
    plan = plan_breakpoints(views[1], policy, previous=views[0])
    before = c["expected"]["usage_second_request_before_fix"]
    assert plan.read_tokens == before["cache_read_input_tokens"] == 0
    # the whole tools+system prefix is written again: 2,000 + 6,040
    assert plan.write_tokens == before["cache_creation_input_tokens"] == 8040
    assert plan.write_tokens == views[1].find("system[0]").end_token
    uncached = plan.total_tokens - plan.read_tokens - plan.write_tokens
    assert uncached == before["input_tokens"] == counts["messages"]
    assert _br08_input_cost(c, plan.read_tokens, plan.write_tokens, uncached) == \
        Decimal(str(c["expected"]["input_cost_usd_before"]))


# ---------------------------------------------------------------------------------- BR-12
def _tool_use_of_tokens(n: int, i: int) -> dict[str, Any]:
    for k in range(n, 0, -1):
        block = {"type": "tool_use", "id": f"toolu_{i:02d}", "name": "search",
                 "input": {"q": filler(k, f"q{i}")}}
        text = f"search({json.dumps(block['input'], separators=(',', ':'), ensure_ascii=False)})"
        got = count_text(text, MODEL)
        if got == n:
            return block
        if got < n:
            break
    raise AssertionError("no tool_use block of the wanted size")


def _br12_payload(c: dict[str, Any], *, step: bool) -> dict[str, Any]:
    counts = c["input"]["token_counts"]
    per_early = counts["messages_blocks_0_to_9"] // 10
    pairs = c["input"]["step"]["assistant_tool_use_blocks"]
    per_late = counts["messages_blocks_10_to_33"] // (2 * pairs)
    messages: list[dict[str, Any]] = []
    for k in range(10):  # blocks #0..#9, alternating user / assistant text
        role = "user" if k % 2 == 0 else "assistant"
        messages.append({"role": role, "content": [
            {"type": "text", "text": filler(per_early, f"early{k}")}]})
    if step:  # blocks #10..#33: sequential tool_use / tool_result pairs (one position each)
        for i in range(pairs):
            use = _tool_use_of_tokens(per_late, i)
            if i == 0:
                messages[-1]["content"].append(use)  # the assistant turn #9 calls the tool
            else:
                messages.append({"role": "assistant", "content": [use]})
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": use["id"],
                 "content": filler(per_late, f"result{i}")}]})
    return {"model": MODEL, "max_tokens": 1024,
            "system": [{"type": "text", "text": filler(counts["tools_and_system"], "sys")}],
            "messages": messages}


def _block_paths(payload: dict[str, Any]) -> list[str]:
    return [f"messages[{m}].content[{j}]" for m, msg in enumerate(payload["messages"])
            for j in range(len(msg["content"]))]


def test_br12_lagging_breakpoint_within_20_positions() -> None:
    c = case("BR-12")
    exp = c["expected"]
    prev = _br12_payload(c, step=False)
    prev["system"][0]["cache_control"] = {"type": "ephemeral"}
    prev["messages"][9]["content"][0]["cache_control"] = {"type": "ephemeral"}
    prev_view = render(prev)
    assert [s.path for s in prev_view.breakpoints()] == ["system[0]", "messages[9].content[0]"]

    cur = _br12_payload(c, step=True)
    blocks = _block_paths(cur)
    assert len(blocks) == 34
    view = render(cur)
    assert view.find(blocks[33]).position - view.find(blocks[9]).position == 24  # > 20

    plan = plan_breakpoints(view, get_policy(MODEL), previous=prev_view)
    # builder_output: system[-1], block #29 (the furthest block within 20 of #9), block #33
    assert plan.paths == ["system[0]", blocks[29], blocks[33]]
    assert len(plan.paths) == exp["builder_output"]["count"]
    assert view.find(blocks[29]).position - view.find(blocks[9]).position == 20
    fixed = exp["fixed_usage"]
    assert plan.read_tokens == fixed["cache_read_input_tokens"]
    assert plan.write_tokens == fixed["cache_creation_input_tokens"]
    assert plan.total_tokens == 12000 + 30000 + 9000

    # the naive request (one moving breakpoint) reads only the system prompt
    naive = json.loads(json.dumps(cur))
    naive["system"][0]["cache_control"] = {"type": "ephemeral"}
    last = naive["messages"][-1]["content"][-1]
    last["cache_control"] = {"type": "ephemeral"}
    no_slots = get_policy(MODEL).model_copy(update={"max_breakpoints": 2})
    naive_plan = plan_breakpoints(render(naive), no_slots, previous=prev_view)
    assert naive_plan.paths == ["system[0]", blocks[33]]
    assert naive_plan.read_tokens == exp["naive_usage"]["cache_read_input_tokens"]
    assert naive_plan.write_tokens == exp["naive_usage"]["cache_creation_input_tokens"]

    # the same through auto_cache on the raw payload: markers land on those blocks
    out = auto_cache(cur, previous=prev_view)
    marked = [p for p in ["system[0]", *blocks]
              if "cache_control" in _node(out, p)]
    assert marked == ["system[0]", blocks[29], blocks[33]]


def _node(payload: dict[str, Any], path: str) -> Any:
    node: Any = payload
    for part in path.replace("]", "").split("."):
        name, *idx = part.split("[")
        node = node[name]
        for i in idx:
            node = node[int(i)]
    return node


def test_br12_previous_given_as_positions() -> None:
    c = case("BR-12")
    cur = _br12_payload(c, step=True)
    view = render(cur)
    blocks = _block_paths(cur)
    positions = [view.find("system[0]").position, view.find(blocks[9]).position]
    plan = plan_breakpoints(view, get_policy(MODEL), previous=positions)
    assert plan.paths == ["system[0]", blocks[29], blocks[33]]
    assert plan.read_tokens == 42000


# ---------------------------------------------------------------------------------- BR-21
def test_br21_warm_then_fanout_cost_arithmetic() -> None:
    c = case("BR-21")
    fo = c["input"]["fan_out"]
    prices = c["input"]["prices_usd_per_mtok"]
    cost = fanout_cost(fo["requests"], fo["shared_prefix_tokens"], fo["unique_suffix_tokens"],
                       input_per_mtok=prices["input"],
                       cache_write_per_mtok=prices["cache_write_5m"],
                       cache_read_per_mtok=prices["cache_read"])
    assert cost.naive_usd == Decimal(str(c["expected"]["input_cost_usd_naive"]))
    assert cost.warmed_usd == Decimal(str(c["expected"]["input_cost_usd_warmed"]))
    assert round(cost.saving_fraction, 2) == Decimal("0.78")
    assert "0.1548" in cost.arithmetic and "0.03405" in cost.arithmetic


def test_br21_warm_only_when_it_pays() -> None:
    c = case("BR-21")
    shared = c["input"]["fan_out"]["shared_prefix_tokens"]
    anthropic = get_policy(MODEL)
    assert should_warm_first(anthropic, c["input"]["fan_out"]["requests"], shared)
    assert not should_warm_first(anthropic, 1, shared)  # no concurrency: pure latency
    assert not should_warm_first(anthropic, 8, 500)  # under the 1,024 minimum
    assert not should_warm_first(get_policy("gpt-4o"), 8, shared)  # automatic caching


# ------------------------------------------------------------------ BR-09 / BR-10 builder fixes
def test_br09_builder_fix_drops_earliest_markers() -> None:
    c = case("BR-09")
    req = expand_placeholders(c["input"]["request"])
    req["model"] = MODEL
    out = auto_cache(req)
    view = render(out)
    fix = c["expected"]["builder_fix"]
    assert [s.path for s in view.breakpoints()] == fix["keep"]
    for path in fix["drop"]:
        assert view.find(path).breakpoint is None
    assert len(view.breakpoints()) <= 4


def test_br09_relay_variant_budget_for_user_markers_is_three() -> None:
    c = case("BR-09")
    req = expand_placeholders(c["input"]["request"])
    req["model"] = MODEL
    del req["messages"][2]["content"][0]["cache_control"]  # 4 user markers, not on the last block
    req["cache_control"] = {"type": "ephemeral"}  # the relay's (automatic) marker
    out = auto_cache(req)
    view = render(out)
    explicit = [s.path for s in view.segments if s.breakpoint is not None]
    assert explicit == ["system[0]", "system[1]", "messages[0].content[0]"]
    assert view.automatic_index == view.find("messages[2].content[0]").index
    assert len(view.breakpoints()) == 4


@pytest.mark.parametrize("blank", ["", "  \n"])
def test_br10_builder_fix_moves_marker_off_empty_block(blank: str) -> None:
    c = case("BR-10")
    req = expand_placeholders(c["input"]["request"])
    req["model"] = MODEL
    req["messages"][0]["content"][1]["text"] = blank
    out = auto_cache(req)
    fix = c["expected"]["builder_fix"]
    content = out["messages"][0]["content"]
    assert len(content) == 1  # the empty block is removed
    assert content[0]["type"] == "image"
    moved_to = _node(out, fix["move_cache_control_to"])
    assert moved_to["cache_control"] == {"type": "ephemeral"}
    assert req["messages"][0]["content"][1]["cache_control"]  # the input is not mutated


def test_builder_never_emits_blank_blocks() -> None:
    b = PromptBuilder(MODEL)
    b.system("stable " * 10 + "\n\n   \n")
    b.history({"role": "user", "content": [{"type": "text", "text": "   "},
                                            {"type": "text", "text": "question"}]})
    b.history({"role": "assistant", "content": [ToolCall("t1", "f", {"a": 1})]},
              {"role": "user", "content": [ToolResult("t1", "ok")]})
    b.turn("   ", "next")
    out = b.to_anthropic()
    texts = [blk.get("text") for m in out["messages"] for blk in m["content"]
             if blk["type"] == "text"] + [blk["text"] for blk in out["system"]]
    assert texts and all(t and t.strip() and t.rstrip() == t for t in texts)
