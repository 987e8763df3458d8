"""New-user trial 12, findings 2 and 12: OpenAI counts that include role framing are estimates.

The renderer counts 3 tokens of framing per OpenAI message (the OpenAI cookbook's chat figure)
and none for the tools block, ``instructions`` or the reply header, so ``promptcache count``
said "1480 tokens, exact" for a gpt-5.6 Responses request that the reference backend bills
1,533 tokens, a chat count "+-2%" was 3.6 % off, and ``PromptBuilder.explain()`` totals were
53-105 tokens under the backend's without "(estimate)". Every OpenAI request count is now an
estimate with a per-request bound in tokens (:func:`promptcache.tokens.view_count_error`).

The bound's constants are checked here against the reference backend on the trial's requests
and on other shapes (many short turns, multi-part content, tool calls, instructions): the
difference never exceeds the stated bound, and the bound is not looser than one turn's framing
plus the renderer's own 3 tokens a message.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache import PromptBuilder
from promptcache.cli import main
from promptcache.local.template import apply_template
from promptcache.prefix import render
from promptcache.tokens import (
    OPENAI_FRAMING_TURN,
    count_tokens,
    view_count_bound,
    view_count_error,
)

SYSTEM = ("You are the support assistant of a plant nursery. Answer briefly, cite the care "
          "sheet, and never invent a species. ") * 60
TOOL_RESP = {"type": "function", "name": "lookup", "description": "Look up a plant",
             "parameters": {"type": "object", "properties": {"name": {"type": "string"}}}}
TOOL_CHAT = {"type": "function", "function": {
    "name": "lookup", "description": "Look up a plant",
    "parameters": {"type": "object", "properties": {"name": {"type": "string"}}}}}
BREAKPOINT = {"mode": "explicit"}


def resp_a() -> dict[str, Any]:
    """The trial's respA.json: gpt-5.6 Responses, developer text with a breakpoint, a tool."""
    return {"model": "gpt-5.6", "prompt_cache_key": "conv-1", "tools": [TOOL_RESP],
            "input": [{"role": "developer", "content": [
                {"type": "input_text", "text": SYSTEM, "prompt_cache_breakpoint": BREAKPOINT}]},
                {"role": "user", "content": "How do I water a fern?"}]}


def chat_a() -> dict[str, Any]:
    """The trial's chatA.json: gpt-4o chat, a long system message, a tool, a user turn."""
    return {"model": "gpt-4o", "prompt_cache_key": "conv-1", "tools": [TOOL_CHAT],
            "messages": [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": "How do I water a fern?"}]}


def _history(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append({"role": "user", "content": f"q{i}?"})
        out.append({"role": "assistant", "content": "ok"})
    return out


def _shapes() -> list[tuple[str, dict[str, Any]]]:
    shapes: list[tuple[str, dict[str, Any]]] = [("respA", resp_a()), ("chatA", chat_a())]
    b = resp_a()
    b["input"][1:1] = _history(1)
    shapes.append(("respB_app", b))
    c = chat_a()
    c["messages"][1:1] = _history(1)
    shapes.append(("chatB_ok", c))
    # many short turns: the framing is most of the prompt
    shapes.append(("resp_short_turns", {"model": "gpt-5.6", "input": _history(40)}))
    shapes.append(("chat_short_turns", {"model": "gpt-4o", "messages": _history(40)}))
    shapes.append(("resp_instructions_string", {"model": "gpt-5.6", "instructions": SYSTEM,
                                                "input": "hi"}))
    shapes.append(("chat_multipart", {"model": "gpt-4o", "messages": [
        {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"},
                                       {"type": "text", "text": "c"}]},
        {"role": "user", "name": "ann", "content": [{"type": "text", "text": "x"},
                                                    {"type": "text", "text": "y"}]}]}))
    shapes.append(("chat_tool_calls", {"model": "gpt-4o", "tools": [TOOL_CHAT, TOOL_CHAT], "messages": [
        {"role": "user", "content": "fern?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "lookup", "arguments": "{\"name\":\"fern\"}"}},
            {"id": "c2", "type": "function",
             "function": {"name": "lookup", "arguments": "{\"name\":\"moss\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "water weekly"},
        {"role": "tool", "tool_call_id": "c2", "content": ""},
        {"role": "user", "content": ""}]}))
    shapes.append(("resp_function_items", {"model": "gpt-5.6", "tools": [TOOL_RESP], "input": [
        {"role": "user", "content": "fern?"},
        {"type": "function_call", "call_id": "c1", "name": "lookup",
         "arguments": "{\"name\":\"fern\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "water weekly"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Weekly."}]},
        {"role": "user", "content": [{"type": "input_text", "text": "moss?"},
                                     {"type": "input_text", "text": "and cactus?"}]}]}))
    shapes.append(("chat_schema", {"model": "gpt-4o", "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
        "messages": [{"role": "user", "content": "hi"}]}))
    return shapes


def _turns(payload: dict[str, Any]) -> int:
    segs = render(payload).segments
    return sum(1 for i, s in enumerate(segs)
               if i == 0 or (segs[i - 1].tier, segs[i - 1].message_index)
               != (s.tier, s.message_index))


@pytest.mark.parametrize(("name", "payload"), _shapes(), ids=[n for n, _ in _shapes()])
def test_openai_count_bound_holds_against_the_reference_backend(name: str,
                                                                payload: dict[str, Any]) -> None:
    result = count_tokens(payload)
    billed = apply_template(payload).total_tokens
    assert not result.exact
    assert result.error_tokens is not None
    gap = billed - result.tokens
    assert abs(gap) <= result.error_tokens, (name, billed, result)
    # the relative bound (what keepalive's cost cap multiplies by) covers it too
    assert result.tokens * (1 + result.error_bound) >= billed
    # measured, not padded: at most one turn's framing plus the renderer's 3 a turn above it
    assert result.error_tokens - gap <= OPENAI_FRAMING_TURN + 3 * _turns(payload), (name, gap)


def test_repro_requests_billed_by_the_backend_are_within_the_stated_bound() -> None:
    """End to end: the trial's respA / chatA sent to the LocalBackend (1,533 / 1,536 billed)."""
    from promptcache.local.testing import SMALL_MODEL, LocalBackend

    oc = LocalBackend(**SMALL_MODEL, mode="fast").openai()
    r = oc.responses.create(**resp_a(), max_output_tokens=1)
    c = oc.chat.completions.create(**chat_a(), max_completion_tokens=1)
    for payload, billed in ((resp_a(), r.usage.input_tokens), (chat_a(), c.usage.prompt_tokens)):
        assert billed == apply_template(payload).total_tokens
        result = count_tokens(payload)
        assert not result.exact and result.error_tokens is not None
        assert result.tokens < billed <= result.tokens + result.error_tokens


def test_count_cli_calls_an_openai_request_an_estimate_with_its_bound(tmp_path: Path) -> None:
    for name, payload in (("respA", resp_a()), ("chatA", chat_a())):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(payload))
        out = CliRunner().invoke(main, ["count", str(path)])
        assert out.exit_code == 0, out.output
        line = out.stdout.strip()
        assert ", exact" not in line and "estimate (+-" in line, line
        tokens = int(line.split()[0])
        bound = int(line.split("estimate (+-")[1].split()[0])
        billed = apply_template(payload).total_tokens
        assert tokens <= billed <= tokens + bound, line


def test_plain_text_counts_stay_exact(tmp_path: Path) -> None:
    result = count_tokens("hello world", "gpt-4o")
    assert result.exact and result.error_bound == 0.0 and result.error_tokens is None
    out = CliRunner().invoke(main, ["count", "--text", "-m", "gpt-5.6", "-"], input="hello world")
    assert out.exit_code == 0 and out.stdout.startswith("2 tokens, exact")


def test_views_of_openai_requests_are_not_exact_anthropic_unchanged() -> None:
    for payload in (resp_a(), chat_a(), {"model": "gpt-4o", "messages": []}):
        view = render(payload)
        assert not view.counter_exact
        assert not view_count_bound(view)[0]
    anthropic = render({"model": "claude-sonnet-4-5", "system": "x",
                        "messages": [{"role": "user", "content": "hi"}]})
    exact, bound = view_count_bound(anthropic)
    assert not exact and bound == pytest.approx(0.15)
    assert view_count_error(anthropic)[1] >= round(anthropic.total_tokens * 0.15)


@pytest.mark.parametrize("fmt", ["openai-responses", "openai-chat"])
def test_builder_explain_marks_openai_totals_as_estimates(fmt: str) -> None:
    """Trial 12 t6.py: predicted totals 1496 / 1510 / 1523 vs billed 1549 / 1589 / 1628."""
    tool = {"name": "lookup", "description": "Look up a plant care sheet",
            "input_schema": {"type": "object", "properties": {"name": {"type": "string"}},
                             "required": ["name"]}}
    hist: list[dict[str, Any]] = []
    for q in ("How do I water a fern?", "And a cactus?", "And orchids?"):
        b = PromptBuilder("gpt-5.6").tools([tool]).system(SYSTEM).history(*copy.deepcopy(hist)).turn(q)
        payload = (b.to_openai_responses(max_output_tokens=16) if fmt == "openai-responses"
                   else b.to_openai_chat(max_completion_tokens=4))
        ex = b.explain(fmt)
        billed = apply_template(payload).total_tokens
        assert ex.estimate
        assert ex.plan.total_tokens < billed <= ex.plan.total_tokens + ex.error_tokens
        assert f"(estimate, +-{ex.error_tokens} tokens)" in str(ex.table().title)
        hist += [{"role": "user", "content": q}, {"role": "assistant", "content": "ok"}]


def test_builder_explain_says_an_image_request_has_no_bound() -> None:
    """Review 12 follow-up: explain() stated "+-N tokens" for an OpenAI request with an image
    of unknown size (85 to 1,105+ tokens by OpenAI's tile rule): no bound holds there."""
    from promptcache.builder import Image, PromptBuilder

    b = PromptBuilder("gpt-4o").system("Stable rules. " * 300).turn(
        "What is in this picture?", Image(url="https://example.com/fern.png"))
    ex = b.explain("openai-chat")
    assert ex.estimate and ex.unbounded == "images: size unknown"
    assert "(estimate, images: size unknown)" in ex._estimate_note()
    plain = PromptBuilder("gpt-4o").system("Stable rules. " * 300).turn("hi").explain(
        "openai-chat")
    assert plain.unbounded is None and "+-" in plain._estimate_note()
