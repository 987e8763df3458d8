"""Review 23: planner predictions against the local backend's usage, and one canonical form.

1. On OpenAI models that cache without markers (gpt-4o), ``expected_next_read`` was 0.0 for
   every plan although the next request of the conversation reads the shared prefix on the
   1,024 + 128 n grid (hosted-api-rules.md 2.1; the diff engine predicts it, the local backend
   reports it).
2. A content block given as a mapping in ``turn()`` (or in a :class:`Message`'s parts) was sent
   as given: a ``{"type": "text"}`` block went to the Responses API (a 400 there: "Invalid value:
   'text'. Supported values are: 'input_text', ..."), an ``input_text`` one to Anthropic, and
   the same block rendered differently once it was history on the next request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from promptcache.builder import PromptBuilder, ToolCall, ToolResult, assistant, user
from promptcache.catalog import get_policy
from promptcache.diff import diff
from promptcache.planner import ReuseModel, plan_breakpoints
from promptcache.prefix import render
from tests.cases import filler

CONTINUE = ReuseModel(continuation=1.0, new_conversation=0.0)
TOOLS = [{"name": "grep", "description": "Search files.",
          "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}}}]


def _chat(turns: int, system_tokens: int = 1100) -> dict[str, Any]:
    b = PromptBuilder("gpt-4o", reuse=CONTINUE)
    b.tools(TOOLS).system("You answer." + filler(system_tokens, "r23"))
    history: list[Any] = []
    for t in range(turns):
        history += [user(f"Task {t}" + filler(50, f"t{t}")),
                    assistant(ToolCall(f"call_{t}", "grep", {"pattern": str(t)})),
                    user(ToolResult(f"call_{t}", filler(70, f"r{t}"))), assistant("Done.")]
    if history:
        b.history(*history)
    b.turn(f"Task {turns}" + filler(50, f"t{turns}"))
    return b.to_openai_chat(max_completion_tokens=1)


def test_automatic_caching_predicts_the_next_read_as_diff_does() -> None:
    a, b = _chat(1), _chat(2)
    plan = plan_breakpoints(render(a, model="gpt-4o"), get_policy("gpt-4o"), reuse=CONTINUE)
    predicted = diff(a, b).predicted
    assert predicted is not None and predicted.cache_read >= 1024
    assert plan.expected_next_read == predicted.cache_read
    assert (plan.expected_next_read - 1024) % 128 == 0


def test_automatic_caching_under_the_minimum_predicts_no_read() -> None:
    payload = _chat(0, system_tokens=300)
    plan = plan_breakpoints(render(payload, model="gpt-4o"), get_policy("gpt-4o"))
    assert plan.total_tokens < 1024
    assert plan.expected_next_read == 0.0


@pytest.mark.local
def test_automatic_caching_prediction_matches_the_backend() -> None:
    """The backend frames messages with more tokens than the renderer's estimate, so its read
    may be a step or two above the prediction, never below it, and never 0 when the
    prediction is not."""
    pytest.importorskip("torch")
    testing = pytest.importorskip("promptcache.local.testing")
    with testing.LocalBackend(**testing.SMALL_MODEL, pool_mb=64, mode="fast",
                              api_key="review23-4o") as be:
        client = be.openai()
        prev = None
        for turns in range(3):
            payload = _chat(turns)
            r = client.chat.completions.create(**payload)
            assert r.usage is not None and r.usage.prompt_tokens_details is not None
            read = r.usage.prompt_tokens_details.cached_tokens or 0
            if prev is not None:
                assert prev.expected_next_read > 0
                assert prev.expected_next_read <= read <= prev.expected_next_read + 2 * 128
            prev = plan_breakpoints(render(payload, model="gpt-4o"), get_policy("gpt-4o"),
                                    reuse=CONTINUE)
            be.clock.advance(5)


def _block_turn(model: str, fmt: str, as_mapping: bool) -> dict[str, Any]:
    b = PromptBuilder(model)
    b.system("Rules." + filler(200, "blk"))
    b.history(user("Find eval."), assistant("Found one."))
    b.turn({"type": "input_text" if fmt == "anthropic" else "text", "text": "Fix it.  "}
           if as_mapping else "Fix it.")
    if fmt == "anthropic":
        return b.to_anthropic(max_tokens=4)
    if fmt == "openai-chat":
        return b.to_openai_chat(max_completion_tokens=4)
    return b.to_openai_responses(max_output_tokens=16)


@pytest.mark.parametrize(("model", "fmt", "part_type"), [
    ("claude-sonnet-4-6", "anthropic", "text"),
    ("gpt-5.6", "openai-chat", "text"),
    ("gpt-5.6", "openai-responses", "input_text"),
])
def test_a_text_block_mapping_renders_as_the_format_takes_it(model: str, fmt: str,
                                                            part_type: str) -> None:
    mapped, plain = _block_turn(model, fmt, True), _block_turn(model, fmt, False)
    assert json.dumps(mapped) == json.dumps(plain)  # byte-identical, keys in the same order
    key = "messages" if fmt != "openai-responses" else "input"
    last = mapped[key][-1]["content"][-1]
    assert last["type"] == part_type and last["text"] == "Fix it."


def test_a_turn_block_renders_the_same_once_it_is_history() -> None:
    """The turn's block, sent again as history on the next request, keeps its bytes (so the
    entry the first request wrote at the turn end is a prefix of the second)."""
    block = {"text": "Look at a.py.", "type": "text", "cache_control": {"type": "ephemeral"}}
    first = PromptBuilder("claude-sonnet-4-6")
    first.system("Rules." + filler(1100, "blk2")).turn(block)
    p1 = first.to_anthropic(max_tokens=4)
    second = PromptBuilder("claude-sonnet-4-6", previous=first.last_plan)
    second.system("Rules." + filler(1100, "blk2"))
    second.history({"role": "user", "content": [block]},  # stored as the API took it
                   {"role": "assistant", "content": "Done."})
    second.turn("And b.py?")
    p2 = second.to_anthropic(max_tokens=4)
    turn1 = {k: v for k, v in p1["messages"][0]["content"][0].items() if k != "cache_control"}
    assert p2["messages"][0]["content"][0] == turn1
    assert json.dumps(turn1) == json.dumps(p2["messages"][0]["content"][0])
    assert second.last_plan is not None and second.last_plan.read_tokens == \
        first.last_plan.breakpoints[-1].prefix_tokens
