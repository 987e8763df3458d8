"""Trial 11, backend: ``/v1/messages`` answers the API's 400s for client tool calls and results
that do not pair up (a ``tool_use`` without a ``tool_result`` in the next message, a
``tool_result`` answering no ``tool_use`` of the previous message), and still accepts valid tool
round trips, text after the results, server tools and a final assistant prefill."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from promptcache import PromptBuilder
from promptcache.builder import ToolCall, ToolResult, assistant, user
from promptcache.local.testing import SMALL_MODEL, LocalBackend

pytestmark = pytest.mark.local

MODEL = "claude-sonnet-4-6"


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as b:
        yield b


@pytest.fixture(scope="module")
def client(backend: LocalBackend) -> anthropic.Anthropic:
    return backend.anthropic(max_retries=0)


def _use(tid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "grep", "input": {"q": tid}}


def _result(tid: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": f"hit {tid}"}


def _create(client: anthropic.Anthropic, messages: list[dict[str, Any]]) -> Any:
    return client.messages.create(model=MODEL, max_tokens=2, messages=messages)  # type: ignore[arg-type]


def test_tool_use_without_tool_result_is_400(client: anthropic.Anthropic) -> None:
    # raw payloads: the builder itself refuses to emit these requests
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [_use("toolu_t1")]},
        {"role": "user", "content": "q"},
    ]
    with pytest.raises(anthropic.BadRequestError) as info:
        _create(client, messages)
    message = str(info.value)
    assert info.value.status_code == 400
    assert "tool_use ids were found without tool_result blocks immediately after" in message
    assert "toolu_t1" in message
    body = info.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "invalid_request_error"


def test_partial_results_name_only_the_missing_id(client: anthropic.Anthropic) -> None:
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [_use("toolu_a"), _use("toolu_b")]},
        {"role": "user", "content": [_result("toolu_a")]},
    ]
    with pytest.raises(anthropic.BadRequestError) as info:
        _create(client, messages)
    assert "toolu_b" in str(info.value) and "toolu_a" not in str(info.value)


def test_tool_result_without_tool_use_is_400(client: anthropic.Anthropic) -> None:
    messages = [{"role": "user", "content": [_result("nope"), {"type": "text", "text": "q"}]}]
    with pytest.raises(anthropic.BadRequestError) as info:
        _create(client, messages)
    message = str(info.value)
    assert "unexpected tool_use_id found in tool_result blocks" in message
    assert "nope" in message


def test_tool_result_with_a_wrong_id_is_400(client: anthropic.Anthropic) -> None:
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [_use("toolu_1")]},
        {"role": "user", "content": [_result("toolu_1"), _result("toolu_9")]},
    ]
    with pytest.raises(anthropic.BadRequestError) as info:
        _create(client, messages)
    assert "unexpected tool_use_id" in str(info.value) and "toolu_9" in str(info.value)


def test_count_tokens_applies_the_same_rule(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="toolu_c"):
        client.messages.count_tokens(
            model=MODEL,
            messages=[{"role": "user", "content": "a"},
                      {"role": "assistant", "content": [_use("toolu_c")]},
                      {"role": "user", "content": "next"}],
        )


def test_valid_tool_round_trip_is_200(client: anthropic.Anthropic) -> None:
    req = (PromptBuilder(MODEL)
           .history(user("a"), assistant("looking", ToolCall("toolu_ok", "x", {"q": 1})),
                    user(ToolResult("toolu_ok", "found")), assistant("done"))
           .turn("q").to_anthropic(max_tokens=2))
    reply = client.messages.create(**req)
    assert reply.type == "message"


def test_text_after_tool_results_is_200(client: anthropic.Anthropic) -> None:
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [{"type": "text", "text": "calling"},
                                          _use("toolu_1"), _use("toolu_2")]},
        {"role": "user", "content": [_result("toolu_2"), _result("toolu_1"),
                                     {"type": "text", "text": "and now summarise"}]},
    ]
    assert _create(client, messages).type == "message"


def test_server_tool_use_needs_no_tool_result(client: anthropic.Anthropic) -> None:
    messages = [
        {"role": "user", "content": "search"},
        {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
             "input": {"query": "x"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            {"type": "text", "text": "found nothing"},
        ]},
        {"role": "user", "content": "thanks"},
    ]
    assert _create(client, messages).type == "message"


def test_final_assistant_prefill_with_tool_use_is_not_checked(
    client: anthropic.Anthropic,
) -> None:
    # hosted-api-rules.md documents no rule for a trailing tool_use, so the backend keeps it
    messages = [{"role": "user", "content": "a"},
                {"role": "assistant", "content": [_use("toolu_pre")]}]
    assert _create(client, messages).type == "message"
