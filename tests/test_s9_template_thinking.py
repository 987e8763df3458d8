"""Older Claude models strip earlier thinking blocks on a plain user turn (review 14 F5;
hosted-api-rules.md 1.7 notes, "Thinking blocks"; the catalog's ``strips_prior_thinking``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from promptcache.catalog import get_policy
from promptcache.local.template import apply_template
from promptcache.local.testing import SMALL_MODEL, LocalBackend
from tests.cases import filler

OLD, NEW = "claude-haiku-4-5", "claude-sonnet-4-6"
CC = {"type": "ephemeral"}
THINK = {"type": "thinking", "thinking": filler(300, "r"), "signature": "sig"}
TOOLS = [{"name": "weather", "description": "w", "input_schema": {"type": "object"}}]


def _turn1(model: str) -> dict[str, Any]:
    return {"model": model, "max_tokens": 2, "system": filler(get_policy(model).min_cacheable_tokens + 500, "s"), "tools": TOOLS,
            "messages": [
                {"role": "user", "content": "Look up the weather."},
                {"role": "assistant", "content": [
                    THINK, {"type": "tool_use", "id": "t1", "name": "weather", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                              "content": "sunny", "cache_control": CC}]}]}


def _turn2(model: str) -> dict[str, Any]:
    body = _turn1(model)
    body["messages"][2] = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]}
    body["messages"] += [
        {"role": "assistant", "content": "It is sunny."},
        {"role": "user", "content": [{"type": "text", "text": "And tomorrow?",
                                      "cache_control": CC}]}]
    return body


def test_catalog_flags() -> None:
    assert get_policy(OLD).strips_prior_thinking is True
    assert get_policy(NEW).strips_prior_thinking is False


def test_plain_user_turn_drops_earlier_thinking_on_older_models() -> None:
    thinking = "messages[1].content[0]"
    assert apply_template(_turn1(OLD)).span_of(thinking).tokens > 0  # tool loop: kept
    assert apply_template(_turn2(NEW)).span_of(thinking).tokens > 0  # newer model: kept
    old = apply_template(_turn2(OLD))
    assert old.span_of(thinking).tokens == 0
    kept = apply_template(_turn2(OLD), strip_prior_thinking=False)
    assert old.total_tokens < kept.total_tokens
    # the stripped prompt equals the request without the thinking block
    without = _turn2(OLD)
    without["messages"][1]["content"] = without["messages"][1]["content"][1:]
    assert old.token_ids == apply_template(without).token_ids


def test_current_tool_loop_keeps_its_thinking() -> None:
    body = _turn2(OLD)
    body["messages"][-1] = {"role": "user", "content": "And tomorrow?"}
    body["messages"] += [
        {"role": "assistant", "content": [
            THINK, {"type": "tool_use", "id": "t2", "name": "weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2",
                                      "content": "rain"}]}]
    prompt = apply_template(body)
    assert prompt.span_of("messages[1].content[0]").tokens == 0  # before the plain turn
    assert prompt.span_of("messages[5].content[0]").tokens > 0  # the current tool loop


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as b:
        yield b


@pytest.mark.parametrize("model", [OLD, NEW])
def test_backend_reports_the_miss(backend: LocalBackend, model: str) -> None:
    client = backend.anthropic()
    first = client.messages.create(**_turn1(model)).usage
    assert first.cache_creation_input_tokens
    second = client.messages.create(**_turn2(model)).usage
    if get_policy(model).strips_prior_thinking:
        # the only entry (at turn 1's tool_result) holds the thinking block: nothing is read
        assert second.cache_read_input_tokens == 0
        assert second.cache_creation_input_tokens == apply_template(_turn2(model)).span_of(
            "messages[4].content[0]").end
    else:
        assert second.cache_read_input_tokens == first.cache_creation_input_tokens
