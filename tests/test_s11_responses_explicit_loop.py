"""GPT-5.6 Responses, explicit cache mode: a tool loop's ``function_call_output`` items carry
the explicit breakpoint (new-user trial 19, finding 2).

Explicit breakpoints sit on content parts; on Responses ``input_text``, ``input_image`` and
``input_file``, which ``function_call_output.output`` takes as a list (openai-python
``FunctionCallOutput.output: str | ResponseFunctionCallOutputItemListParam``); in explicit mode
only the latest 4 explicit breakpoints are written (hosted-api-rules.md 2.3). The planner
used to find no markable part in the loop and left the breakpoints on the system prompt and
the first user message: the tool history was never cached.

Now the renderer reads a breakpoint on an output part, the planner marks the newest output
(a string output becomes one ``input_text`` part, the same content), and the planner, the diff
engine and the local backend agree on where it sits.
"""

from __future__ import annotations

import json
import warnings
from itertools import pairwise
from typing import Any

import pytest

from promptcache import UsageTracker, wrap
from promptcache.catalog import get_policy
from promptcache.diff._engine import openai_written, prepare
from promptcache.local.accounting import openai_breakpoints
from promptcache.local.template import apply_template
from promptcache.local.testing import LocalBackend
from promptcache.planner import apply_plan, plan_breakpoints, prefix_digests, segment_digest
from promptcache.prefix import render
from tests.cases import filler

MODEL = "gpt-5.6-sol"
EXPLICIT = {"mode": "explicit"}
BP = {"mode": "explicit"}
TOOLS = [{"type": "function", "name": "lookup", "description": "Look up a key.",
          "parameters": {"type": "object", "properties": {"key": {"type": "string"}},
                         "required": ["key"]}}]


def _output(step: int, as_list: bool) -> Any:
    text = f"value {step} " + filler(150, f"out{step}")
    return [{"type": "input_text", "text": text}] if as_list else text


def _loop_input(steps: int, as_list: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent. " + filler(1500, "sys")},
        {"role": "user", "content": "Investigate: " + filler(30, "task")}]
    for step in range(steps):
        items.append({"type": "function_call", "call_id": f"call_{step}", "name": "lookup",
                      "arguments": json.dumps({"key": f"k{step}"})})
        items.append({"type": "function_call_output", "call_id": f"call_{step}",
                      "output": _output(step, as_list)})
    return items


def _payload(steps: int, as_list: bool = False) -> dict[str, Any]:
    return {"model": MODEL, "tools": TOOLS, "input": _loop_input(steps, as_list),
            "max_output_tokens": 16, "prompt_cache_options": dict(EXPLICIT)}


def _part_markers(payload: dict[str, Any]) -> list[tuple[int, str, int]]:
    """(item index, "content" / "output", part index) of every explicit breakpoint."""
    out = []
    for i, item in enumerate(payload["input"]):
        for key in ("content", "output"):
            parts = item.get(key)
            if isinstance(parts, list):
                out += [(i, key, j) for j, p in enumerate(parts)
                        if isinstance(p, dict) and "prompt_cache_breakpoint" in p]
    return out


# ------------------------------------------------------------------ renderer
def test_renderer_reads_a_breakpoint_on_a_function_output_part() -> None:
    payload = _payload(2, as_list=True)
    payload["input"][-1]["output"][0]["prompt_cache_breakpoint"] = dict(BP)
    view = render(payload, model=MODEL)
    last = view.segments[-1]
    assert (last.path, last.kind, last.cacheable) == ("input[5]", "tool_result", True)
    assert last.breakpoint is not None and last.breakpoint.source == "openai-explicit"
    assert [s.index for s in view.breakpoints()] == [last.index]
    assert view.find("input[5].output[0]").index == last.index


@pytest.mark.parametrize("output, markable", [
    ("some result", True), ("   ", False),
    ([{"type": "input_text", "text": ""}], False),
    ([{"type": "input_text", "text": "a"}, {"type": "input_text", "text": " "}], True),
    ([{"type": "input_image", "image_url": "https://x/y.png"}], True)])
def test_function_output_markable_when_a_part_can_carry_one(output: Any,
                                                            markable: bool) -> None:
    payload = {"model": MODEL, "input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": output}]}
    assert render(payload).segments[-1].cacheable is markable


def test_string_output_equals_one_marked_input_text_part() -> None:
    """Same tokens, same digests, same local-backend tokens: the planner's rewrite of a string
    output is not a prefix change (the caller's next request sends the string again)."""
    plain = _payload(2)
    listed = _payload(2)
    text = plain["input"][-1]["output"]
    listed["input"][-1] = {**listed["input"][-1], "output": [
        {"type": "input_text", "text": text, "prompt_cache_breakpoint": dict(BP)}]}
    a, b = render(plain, model=MODEL), render(listed, model=MODEL)
    assert [s.tokens for s in a] == [s.tokens for s in b]
    assert segment_digest(a.segments[-1]) == segment_digest(b.segments[-1])
    assert prefix_digests(a) == prefix_digests(b)
    assert apply_template(plain).token_ids == apply_template(listed).token_ids
    # a changed output is still a change
    other = _payload(2)
    other["input"][-1]["output"] = text + " more"
    assert segment_digest(render(other).segments[-1]) != segment_digest(a.segments[-1])


# ------------------------------------------------------------------ planner / apply_plan
@pytest.mark.parametrize("as_list", [False, True])
def test_explicit_mode_plan_marks_the_newest_function_output(as_list: bool) -> None:
    payload = _payload(3, as_list)
    view = render(payload, model=MODEL)
    plan = plan_breakpoints(view, get_policy(MODEL))
    newest = view.segments[-1]
    assert newest.path == "input[7]"
    assert newest.index in {b.segment_index for b in plan.breakpoints if b.source == "planner"}
    sent = apply_plan(payload, plan, share_unchanged=True)
    assert payload == _payload(3, as_list)  # the caller's request is not touched
    assert (7, "output", 0) in _part_markers(sent)
    assert sent["input"][7]["output"][0]["type"] == "input_text"
    assert sent["input"][7]["output"][0]["text"] == _payload(3)["input"][7]["output"]
    # the same with the deep-copying path
    assert apply_plan(payload, plan) == sent
    # planner, diff engine and local backend: the same written breakpoints
    sent_view = render(sent, model=MODEL)
    written = openai_written(prepare(sent))
    assert newest.index in written
    assert [b.span_index for b in openai_breakpoints(apply_template(sent), sent)] == written
    assert [b.segment_index for b in plan.breakpoints] == sorted(
        s.index for s in sent_view.breakpoints())


def test_list_output_marks_its_last_markable_part() -> None:
    payload = _payload(1)
    payload["input"][-1]["output"] = [{"type": "input_text", "text": "head " + filler(40, "h")},
                                      {"type": "input_text", "text": "tail " + filler(40, "t")},
                                      {"type": "input_text", "text": "  "}]
    plan = plan_breakpoints(render(payload, model=MODEL), get_policy(MODEL))
    sent = apply_plan(payload, plan, share_unchanged=True)
    assert (3, "output", 1) in _part_markers(sent)
    assert (3, "output", 2) not in _part_markers(sent)
    assert all("prompt_cache_breakpoint" not in p for p in payload["input"][3]["output"])


def test_caller_marker_on_an_output_part_is_kept_or_dropped() -> None:
    payload = _payload(1, as_list=True)
    payload["input"][-1]["output"][0]["prompt_cache_breakpoint"] = dict(BP)
    plan = plan_breakpoints(render(payload, model=MODEL), get_policy(MODEL))
    assert any(b.source == "user" and b.path == "input[3]" for b in plan.breakpoints)
    assert (3, "output", 0) in _part_markers(apply_plan(payload, plan))
    # a model that takes no marker (before GPT-5.6): the nested marker is removed (else 400)
    payload["model"] = "gpt-5"
    del payload["prompt_cache_options"]
    plan = plan_breakpoints(render(payload), get_policy("gpt-5"))
    for share in (False, True):
        sent = apply_plan(payload, plan, share_unchanged=share)
        assert _part_markers(sent) == []
    assert "prompt_cache_breakpoint" in payload["input"][-1]["output"][0]


# ------------------------------------------------------------------ end to end
@pytest.mark.parametrize("as_list", [False, True])
def test_wrapped_explicit_mode_tool_loop_reads_its_history(as_list: bool) -> None:
    """wrap(auto_cache=True) on a GPT-5.6 Responses agent loop in explicit mode against the
    local backend: each step reads what the previous step wrote at its newest tool output
    (it read the first user message only, 2303 tokens of a 3497-token prompt, on every step)."""
    reads: list[int] = []
    prompts: list[int] = []
    with LocalBackend(hidden_size=32, layers=1, heads=2, kv_heads=1) as backend:
        client = wrap(backend.openai(), tracker=UsageTracker(), auto_cache=True,
                      session="loop")
        items = _loop_input(0, as_list)
        for step in range(5):
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no warning on a well-cached loop
                r = client.responses.create(model=MODEL, max_output_tokens=4, tools=TOOLS,
                                            input=items, prompt_cache_options=dict(EXPLICIT))
            assert r.usage is not None
            reads.append(r.usage.input_tokens_details.cached_tokens)
            prompts.append(r.usage.input_tokens)
            items = [*items,
                     {"type": "function_call", "call_id": f"call_{step}", "name": "lookup",
                      "arguments": json.dumps({"key": f"k{step}"})},
                     {"type": "function_call_output", "call_id": f"call_{step}",
                      "output": _output(step, as_list)}]
    assert reads[0] == 0
    assert all(b > a for a, b in pairwise(reads[1:])), reads
    # from step 2 on, everything up to the previous request's newest tool output is read
    for prev, read in zip(prompts[1:], reads[2:], strict=False):
        assert read > prev - 40, (reads, prompts)
