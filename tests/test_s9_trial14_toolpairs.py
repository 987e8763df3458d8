"""Regression tests for new-user trial 14, finding F10: to_openai_chat() / to_openai_responses()
refuse tool calls and results that do not pair up (OpenAI answers them with a 400), as
to_anthropic() does; parallel calls from SDK histories are kept together."""

from __future__ import annotations

from typing import Any

import pytest

from promptcache import PromptBuilder
from promptcache._errors import InvalidRequestError
from promptcache.builder import ToolCall, ToolResult, assistant, user

GPT = "gpt-5"
S = "Policy text. " * 600
TOOLS = [{"name": "f", "description": "d", "input_schema": {"type": "object"}}]


def _builder(*history: Any, model: str = GPT) -> PromptBuilder:
    return PromptBuilder(model).tools(TOOLS).system(S).history(*history).turn("next")


def test_chat_refuses_a_call_without_its_result() -> None:
    b = _builder(user("q"), assistant(ToolCall(id="c1", name="f", input={})))
    with pytest.raises(InvalidRequestError) as e:
        b.to_openai_chat()
    assert e.value.path == "history message 1"
    assert "'c1'" in str(e.value) and "tool_calls" in str(e.value)


def test_chat_refuses_a_result_without_its_call() -> None:
    b = _builder(user("q"), user(ToolResult("c9", "res")))
    with pytest.raises(InvalidRequestError) as e:
        b.to_openai_chat()
    assert e.value.path == "history message 1 part 0"
    assert "'c9'" in str(e.value)


def test_chat_refuses_a_result_after_text() -> None:
    b = _builder(user("q"), assistant(ToolCall(id="c1", name="f", input={})),
                 user("here:", ToolResult("c1", "res")))
    with pytest.raises(InvalidRequestError) as e:
        b.to_openai_chat()
    assert e.value.path == "history message 2 part 1"


def test_responses_refuses_orphans_unless_the_calls_are_stored() -> None:
    b = _builder(user("q"), assistant(ToolCall(id="c1", name="f", input={})))
    with pytest.raises(InvalidRequestError) as e:
        b.to_openai_responses()
    assert e.value.path == "history message 1" and "function_call_output" in str(e.value)
    b = _builder(user("q"), user(ToolResult("c9", "res")))
    with pytest.raises(InvalidRequestError) as e:
        b.to_openai_responses()
    assert e.value.path == "history message 1 part 0" and "'c9'" in str(e.value)
    # continuing a stored response: its calls are on the server
    out = b.to_openai_responses(previous_response_id="resp_1")
    assert {"type": "function_call_output", "call_id": "c9", "output": "res"} in out["input"]


def test_chat_history_with_parallel_calls_passes_everywhere() -> None:
    calls = [{"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
             for c in ("c1", "c2")]
    b = _builder(*b_history(calls))
    chat = b.to_openai_chat()["messages"]
    assert [m["role"] for m in chat[1:]] == ["user", "assistant", "tool", "tool", "user"]
    b.to_openai_responses()
    _builder(*b_history(calls), model="claude-sonnet-4-6").to_anthropic()


def b_history(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": "c1", "content": "r1"},
            {"role": "tool", "tool_call_id": "c2", "content": "r2"}]


def test_responses_output_with_parallel_calls_is_one_turn() -> None:
    items = [{"role": "user", "content": "q"},
             {"type": "message", "role": "assistant",
              "content": [{"type": "output_text", "text": "checking"}]},
             {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
             {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "r1"},
             {"type": "function_call_output", "call_id": "c2", "output": "r2"}]
    b = _builder(*items)
    chat = b.to_openai_chat()["messages"]
    assert chat[2]["content"] == "checking"
    assert [c["id"] for c in chat[2]["tool_calls"]] == ["c1", "c2"]
    assert [m["role"] for m in chat[3:]] == ["tool", "tool", "user"]
    msgs = _builder(*items, model="claude-sonnet-4-6").to_anthropic()["messages"]
    assert [p["type"] for p in msgs[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert [p["type"] for p in msgs[2]["content"]][:2] == ["tool_result", "tool_result"]
    types = [i.get("type", i.get("role")) for i in b.to_openai_responses()["input"]]
    assert types[2:] == ["assistant", "function_call", "function_call",
                         "function_call_output", "function_call_output", "user"]
