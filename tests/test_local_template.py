"""Chat template of the local backend: append-stable tokens, spans that map back to blocks."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from promptcache.local.template import (
    IMAGE_TOKENS,
    TokenDecoder,
    apply_template,
    decode_tokens,
    encode_text,
)
from promptcache.tokens import encode


def _conversation() -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 16,
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather for a city.",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        ],
        "system": [{"type": "text", "text": "You are terse."}],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "tu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "tu_1", "content": "18C, sunny"}
                ],
            },
        ],
    }


def test_ids_are_o200k_base_ids() -> None:
    assert encode_text("Hello, world") == encode("Hello, world", "o200k_base")


def test_spans_are_contiguous_and_end_with_generation_header() -> None:
    prompt = apply_template(_conversation(), "anthropic")
    assert prompt.spans[0].start == 0
    for a, b in zip(prompt.spans, prompt.spans[1:], strict=False):
        assert a.end == b.start
    assert prompt.generation_start == prompt.spans[-1].end
    assert prompt.total_tokens > prompt.generation_start  # at least one token never cached
    assert [s.segment.path for s in prompt.spans] == [
        "tools[0]",
        "system[0]",
        "messages[0].content",
        "messages[1].content[0]",
        "messages[1].content[1]",
        "messages[2].content[0]",
    ]


def test_appending_turns_never_changes_earlier_tokens() -> None:
    first = _conversation()
    second = copy.deepcopy(first)
    second["messages"] += [
        {"role": "assistant", "content": "It is 18C."},
        {"role": "user", "content": [{"type": "text", "text": "And Rome?"}]},
    ]
    a = apply_template(first, "anthropic")
    b = apply_template(second, "anthropic")
    assert b.token_ids[: a.generation_start] == a.token_ids[: a.generation_start]
    assert [(s.start, s.end) for s in b.spans[: len(a.spans)]] == [
        (s.start, s.end) for s in a.spans
    ]


def test_cache_markers_do_not_change_tokens() -> None:
    plain = _conversation()
    marked = copy.deepcopy(plain)
    marked["tools"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    marked["system"][0]["cache_control"] = {"type": "ephemeral"}
    marked["messages"][2]["content"][0]["cache_control"] = {"type": "ephemeral"}
    marked["cache_control"] = {"type": "ephemeral"}
    assert (
        apply_template(marked, "anthropic").token_ids
        == apply_template(plain, "anthropic").token_ids
    )


def test_segment_at_maps_tokens_back_to_blocks() -> None:
    prompt = apply_template(_conversation(), "anthropic")
    for span in prompt.spans:
        for i in (span.start, span.content_start, span.end - 1):
            found = prompt.segment_at(i)
            assert found is not None and found.segment.path == span.segment.path
    assert prompt.segment_at(prompt.total_tokens - 1) is None
    with pytest.raises(IndexError):
        prompt.segment_at(prompt.total_tokens)
    assert prompt.span_of("system[0]").segment.kind == "text"
    system = prompt.span_of("system[0]")
    text = decode_tokens(list(prompt.token_ids[system.content_start : system.content_end]))
    assert text == "You are terse."


def _image(data: bytes) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(data).decode(),
        },
    }


def test_images_are_hashed_into_the_prefix() -> None:
    def prompt_with(data: bytes) -> tuple[int, ...]:
        payload = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1,
            "messages": [
                {"role": "user", "content": [_image(data), {"type": "text", "text": "What is it?"}]}
            ],
        }
        p = apply_template(payload, "anthropic")
        span = p.spans[0]
        assert span.content_end - span.content_start == IMAGE_TOKENS + len(encode_text("<|image|>"))
        return p.token_ids[span.content_start : span.content_end]

    one = prompt_with(b"\x89PNG first image bytes")
    assert one == prompt_with(b"\x89PNG first image bytes")
    assert one != prompt_with(b"\x89PNG other image bytes")


def test_openai_chat_and_responses_shapes() -> None:
    chat = apply_template(
        {
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
            ],
        },
        "openai-chat",
    )
    assert [s.segment.role for s in chat.spans] == ["system", "user"]
    resp = apply_template(
        {"model": "gpt-4o", "instructions": "Be brief.", "input": "Hi"}, "openai-responses"
    )
    assert [s.segment.path for s in resp.spans] == ["instructions", "input"]


def test_incremental_decoder_matches_batch_decode() -> None:
    ids = encode_text("naïve café — 日本語 ✓")
    dec = TokenDecoder()
    streamed = "".join(dec.feed(i) for i in ids) + dec.flush()
    assert streamed == decode_tokens(ids) == "naïve café — 日本語 ✓"


def test_tool_choice_changes_only_the_messages_tier() -> None:
    base = _conversation()
    auto = apply_template({**base, "tool_choice": {"type": "auto"}}, "anthropic")
    anyt = apply_template({**base, "tool_choice": {"type": "any"}}, "anthropic")
    system_end = auto.span_of("system[0]").end
    assert auto.token_ids[:system_end] == anyt.token_ids[:system_end]
    first_message = auto.span_of("messages[0].content")
    assert auto.token_ids[: first_message.end] != anyt.token_ids[: first_message.end]
    plain = apply_template(base, "anthropic")
    assert plain.token_ids[:system_end] == auto.token_ids[:system_end]
