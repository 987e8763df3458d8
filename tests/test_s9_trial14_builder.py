"""Regression tests for new-user trial 14, finding F2: PromptBuilder.history() takes the SDKs'
own response objects (pydantic models), as the official docs append them to the conversation."""

from __future__ import annotations

from typing import Any

import pytest

from promptcache import PromptBuilder
from promptcache._errors import InvalidRequestError

anthropic_types = pytest.importorskip("anthropic.types")
openai_chat = pytest.importorskip("openai.types.chat")
openai_responses = pytest.importorskip("openai.types.responses")

CLAUDE = "claude-sonnet-4-6"
S = "Policy text. " * 600
TOOLS = [{"name": "get_weather", "description": "Weather for a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]


def _anthropic(history: list[Any]) -> dict[str, Any]:
    b = PromptBuilder(CLAUDE).tools(TOOLS).system(S).history(*history).turn("thanks")
    return b.to_anthropic(max_tokens=5)


def test_anthropic_response_content_blocks_in_history() -> None:
    blocks = [anthropic_types.TextBlock(type="text", text="checking"),
              anthropic_types.ToolUseBlock(type="tool_use", id="toolu_1", name="get_weather",
                                           input={"city": "Paris"})]
    as_dicts = [{"type": "text", "text": "checking"},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                 "input": {"city": "Paris"}}]
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                           "content": "sunny"}]}
    got = _anthropic([{"role": "user", "content": "weather?"},
                      {"role": "assistant", "content": blocks}, result])
    want = _anthropic([{"role": "user", "content": "weather?"},
                       {"role": "assistant", "content": as_dicts}, result])
    assert got == want
    assert got["messages"][1]["content"][1]["type"] == "tool_use"


def test_anthropic_whole_response_message_in_history() -> None:
    resp = anthropic_types.Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": CLAUDE,
        "content": [{"type": "text", "text": "Hello there", "citations": None}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 2}})
    got = _anthropic([{"role": "user", "content": "hi"}, resp])
    want = _anthropic([{"role": "user", "content": "hi"},
                       {"role": "assistant", "content": "Hello there"}])
    assert got == want


def test_openai_chat_completion_message_in_history() -> None:
    msg = openai_chat.ChatCompletionMessage.model_validate({
        "role": "assistant", "content": None, "refusal": None,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]})
    tool = {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}

    def chat(history: list[Any]) -> dict[str, Any]:
        b = PromptBuilder("gpt-5").tools(TOOLS).system(S).history(*history).turn("thanks")
        return b.to_openai_chat()

    got = chat([{"role": "user", "content": "weather?"}, msg, tool])
    want = chat([{"role": "user", "content": "weather?"},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": "call_1", "type": "function",
                      "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                 tool])
    assert got == want
    assert got["messages"][2]["tool_calls"][0]["id"] == "call_1"
    # the tool calls of a plain dict message may be the SDK's objects too
    mixed = chat([{"role": "user", "content": "weather?"},
                  {"role": "assistant", "content": None, "tool_calls": msg.tool_calls}, tool])
    assert mixed == want


def test_openai_responses_output_items_in_history() -> None:
    out_msg = openai_responses.ResponseOutputMessage.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "checking", "annotations": []}]})
    call = openai_responses.ResponseFunctionToolCall.model_validate({
        "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
        "arguments": '{"city": "Paris"}', "status": "completed"})
    b = (PromptBuilder("gpt-5").tools(TOOLS).system(S)
         .history({"role": "user", "content": "weather?"}, out_msg, call,
                  {"type": "function_call_output", "call_id": "call_1", "output": "sunny"})
         .turn("thanks"))
    items = b.to_openai_responses()["input"]
    assert {"role": "assistant", "content": "checking"} in items
    fc = [i for i in items if i.get("type") == "function_call"]
    assert fc == [{"type": "function_call", "call_id": "call_1", "name": "get_weather",
                   "arguments": '{"city":"Paris"}'}]
    out = [i for i in items if i.get("type") == "function_call_output"]
    assert len(out) == 1 and out[0]["call_id"] == "call_1" and out[0]["output"] == "sunny"


def test_responses_item_the_builder_cannot_carry_is_named() -> None:
    with pytest.raises(InvalidRequestError) as e:
        PromptBuilder("gpt-5").history({"type": "reasoning", "id": "rs_1", "summary": []})
    assert e.value.path == "history message 0.type"
    assert "'reasoning'" in str(e.value)


@pytest.mark.parametrize("bad,path", [
    (42, "history message 0"),
    ({"role": "assistant", "content": [object()]}, "history message 0.content[0]"),
    ({"role": "assistant", "content": None, "tool_calls": [42]},
     "history message 0.tool_calls[0]"),
    ({"role": "system", "content": "x"}, "history message 0.role"),
    ({"type": "text", "text": "a content block, not a message"}, "history message 0.role"),
    ({"type": "web_search_call", "id": "ws_1"}, "history message 0.type"),
])
def test_other_objects_still_refused_with_a_path(bad: Any, path: str) -> None:
    with pytest.raises(InvalidRequestError) as e:
        PromptBuilder(CLAUDE).history(bad)
    assert e.value.path == path
