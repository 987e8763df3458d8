"""Lint PC303 measures a breakpoint's prefix as the provider caches it: on an older Claude
model a plain user turn strips earlier thinking blocks, so a marked prefix of 1,206 tokens as
sent holds 504 (review 18: PC303 said nothing while the planner and diff predicted no write)."""

from __future__ import annotations

from typing import Any

from promptcache.catalog import get_policy
from promptcache.lint import lint_request
from promptcache.planner import plan_breakpoints
from promptcache.prefix import render
from tests.cases import filler

THINKING = {"type": "thinking", "thinking": "think " + filler(700, "th"), "signature": "sig"}


def _request(model: str, plain_turn: bool) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "task " + filler(150, "q")},
        {"role": "assistant", "content": [THINKING, {
            "type": "text", "text": "answer " + filler(150, "a"),
            "cache_control": {"type": "ephemeral"}}]}]
    if plain_turn:
        msgs.append({"role": "user", "content": "next question"})
    return {"model": model, "max_tokens": 100,
            "system": [{"type": "text", "text": filler(200, "s")}], "messages": msgs}


def _pc303(req: dict[str, Any]) -> list[Any]:
    return [f for f in lint_request(req, model=req["model"]) if f.code == "PC303"]


def test_a_stripped_thinking_block_can_put_the_prefix_under_the_minimum() -> None:
    req = _request("claude-sonnet-4-5", plain_turn=True)
    [f] = _pc303(req)
    assert f.severity.value == "warning"
    assert "once the plain user turn strips the thinking block at messages[1].content[0]" \
        in f.message
    tokens = f.details["prefix_tokens_at_breakpoint"]
    # the planner measures the same prefix
    plan = plan_breakpoints(render(req), get_policy("claude-sonnet-4-5"))
    assert [b.prefix_tokens for b in plan.breakpoints] == [tokens]


def test_no_plain_turn_or_a_model_that_keeps_thinking_is_unchanged() -> None:
    assert _pc303(_request("claude-sonnet-4-5", plain_turn=False)) == []  # tool loop: kept
    assert _pc303(_request("claude-sonnet-4-6", plain_turn=True)) == []   # keeps thinking
