"""Builder + planner against the local backend, through the official anthropic client.

A 10-turn agent loop whose every step appends more than the 20-position lookback (the assistant
interleaves a short note before each of 12 tool calls, so no tool_use run collapses): built
with the builder (lagging breakpoints from the previous plan), every turn after the first reads
at least 90 % of the previous request's prompt, as the backend reports it in ``usage``. The same
loop with one trailing breakpoint (the naive agent) reads far less.
"""

from __future__ import annotations

from typing import Any

import pytest

from promptcache.builder import Message, PromptBuilder, ToolCall, ToolResult, assistant, user
from promptcache.planner import BreakpointPlan
from tests.cases import filler

pytest.importorskip("torch")
testing = pytest.importorskip("promptcache.local.testing")

MODEL = "claude-sonnet-4-6"  # 1,024-token minimum; 4-5 warns as deprecated in anthropic 2.x
TURNS = 10
FANOUT = 12
pytestmark = [pytest.mark.local, pytest.mark.slow]


def _step(turn: int) -> list[Message]:
    """One agent step: an assistant message with FANOUT (note, tool_use) pairs, then results."""
    parts: list[Any] = []
    results: list[Any] = []
    for k in range(FANOUT):
        call = f"toolu_{turn:02d}_{k:02d}"
        parts.append(f"Checking file {turn}.{k}.")
        parts.append(ToolCall(call, "read_file", {"path": f"src/mod_{turn}_{k}.py"}))
        results.append(ToolResult(call, filler(12, f"file{turn}.{k}")))
    return [assistant(*parts), user(*results)]


def _request(turn: int, previous: BreakpointPlan | None, naive: bool) -> tuple[dict[str, Any],
                                                                           BreakpointPlan | None]:
    b = PromptBuilder(MODEL, previous=previous)
    b.tools([{"name": "read_file", "description": "Read a file from the repository.",
              "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                               "required": ["path"]}}])
    b.system("You are a coding agent." + filler(1100, "agent-system"))
    history: list[Message] = [user("Audit the repository for unsafe eval calls.")]
    for t in range(turn):
        history.extend(_step(t))
    step = _step(turn)
    history.append(step[0])
    b.history(*history)
    b.turn(*step[1].parts)
    payload = b.to_anthropic(max_tokens=1)
    if naive:  # one trailing breakpoint, nothing else (what LiteLLM / LangChain inject)
        for block in payload["system"]:
            block.pop("cache_control", None)
        for msg in payload["messages"]:
            for block in msg["content"]:
                block.pop("cache_control", None)
        payload["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        return payload, None
    return payload, b.last_plan


def _run_loop(backend: Any, naive: bool) -> list[tuple[int, int]]:
    client = backend.anthropic()
    previous: BreakpointPlan | None = None
    out: list[tuple[int, int]] = []
    for turn in range(TURNS):
        payload, plan = _request(turn, previous, naive)
        msg = client.messages.create(**payload)
        u = msg.usage
        total = u.input_tokens + (u.cache_creation_input_tokens or 0) + (
            u.cache_read_input_tokens or 0)
        out.append((u.cache_read_input_tokens or 0, total))
        previous = plan
        backend.clock.advance(5)  # seconds between turns, well inside the 5m TTL
    return out


def _read_ratios(usage: list[tuple[int, int]]) -> list[float]:
    """Cache reads of each turn over the previous turn's whole prompt (its earlier prefix)."""
    return [usage[i][0] / usage[i - 1][1] for i in range(1, len(usage))]


@pytest.fixture(scope="module")
def backend() -> Any:
    with testing.LocalBackend(hidden_size=64, layers=2, heads=4, kv_heads=2, pool_mb=64,
                              mode="fast", seed=0) as be:
        yield be


def test_builder_agent_loop_reads_most_of_its_earlier_prefix(backend: Any) -> None:
    usage = _run_loop(backend, naive=False)
    assert usage[0][0] == 0  # cold
    ratios = _read_ratios(usage)
    assert all(r >= 0.90 for r in ratios), ratios


def test_naive_single_trailing_breakpoint_falls_below(backend: Any) -> None:
    with testing.LocalBackend(hidden_size=64, layers=2, heads=4, kv_heads=2, pool_mb=64,
                              mode="fast", seed=0, api_key="naive-tenant") as be:
        usage = _run_loop(be, naive=True)
    ratios = _read_ratios(usage)
    assert all(r < 0.90 for r in ratios), ratios
    assert sum(r for r, _ in usage) < 0.5 * sum(t for _, t in usage[:-1])


def _openai_request(question: str, strip_explicit: bool) -> dict[str, Any]:
    b = PromptBuilder("gpt-5.6-sol")
    b.system("You answer questions about the handbook." + filler(1500, "handbook"))
    b.turn(question + filler(200, question))
    payload = b.to_openai_chat(max_completion_tokens=1)
    if strip_explicit:
        for msg in payload["messages"]:
            if isinstance(msg.get("content"), list):
                for part in msg["content"]:
                    part.pop("prompt_cache_breakpoint", None)
    return payload


@pytest.mark.parametrize("strip_explicit", [False, True])
def test_openai_explicit_breakpoint_lets_a_new_conversation_read_the_system(
        strip_explicit: bool) -> None:
    """GPT-5.6+: only breakpoints write. The planner's explicit marker at the system end is
    what a second conversation (same system, new question) reads; the implicit breakpoint on
    the newest message alone leaves it nothing to read."""
    with testing.LocalBackend(hidden_size=64, layers=2, heads=4, kv_heads=2, pool_mb=64,
                              mode="fast", seed=0, api_key=f"oa-{strip_explicit}") as be:
        client = be.openai()
        first = client.chat.completions.create(**_openai_request("Q1", strip_explicit))
        second = client.chat.completions.create(**_openai_request("Q2", strip_explicit))
    assert first.usage is not None and second.usage is not None
    details = second.usage.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details is not None else 0
    if strip_explicit:
        assert cached == 0
    else:
        assert cached >= 1500  # the whole system prompt, read by the other conversation
        assert cached < second.usage.prompt_tokens
