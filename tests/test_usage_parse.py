"""Parsing usage from real SDK objects (anthropic 2.x, openai 3.x) and provider dicts.

Streaming tests drive the real SDK clients over an ``httpx2.MockTransport`` (both SDKs use
httpx2) that replays a server-sent-event body, so the events we parse are exactly what the SDK
yields.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion
from openai.types.responses import Response, ResponseCompletedEvent

from promptcache._errors import InvalidRequestError
from promptcache.usage import (
    StreamUsage,
    UsageRecord,
    detect_provider,
    parse_stream,
    parse_usage,
)

ANTHROPIC_USAGE = {
    "input_tokens": 50, "cache_read_input_tokens": 2400, "cache_creation_input_tokens": 1120,
    "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 120},
    "output_tokens": 310, "output_tokens_details": {"thinking_tokens": 200},
}


def _message(usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": usage or ANTHROPIC_USAGE}


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        body = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {body}\n\n")
    return "".join(out).encode()


def _client_transport(body: bytes) -> httpx2.MockTransport:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    return httpx2.MockTransport(handler)


# ------------------------------------------------------------------------------- Anthropic


def test_anthropic_message_object_and_dict_agree() -> None:
    obj = Message.model_validate(_message())
    rec = parse_usage(obj, label="chat", session="s")
    assert rec == parse_usage(_message(), label="chat", session="s")
    assert rec.provider == "anthropic" and rec.model == "claude-sonnet-4-5"
    assert rec.request_id == "msg_01"
    assert (rec.uncached_input, rec.cache_read, rec.cache_write) == (50, 2400, 1120)
    assert (rec.cache_write_5m, rec.cache_write_1h) == (1000, 120)
    assert rec.output == 310 and rec.reasoning == 200
    assert rec.total_input == 50 + 2400 + 1120
    assert rec.input_total is None  # Anthropic reports no inclusive total
    # the bare Usage object parses the same counts
    bare = parse_usage(obj.usage)
    assert bare.cache_write_1h == 120 and bare.model is None


def test_anthropic_missing_cache_fields_are_unknown_not_zero() -> None:
    rec = parse_usage(Message.model_validate(_message({"input_tokens": 10, "output_tokens": 1})))
    assert rec.cache_read is None and rec.cache_write is None
    assert rec.total_input is None and rec.hit_rate is None


def test_anthropic_split_that_disagrees_with_total_is_flagged_and_dropped() -> None:
    usage = {**ANTHROPIC_USAGE, "cache_creation_input_tokens": 999}
    rec = parse_usage(_message(usage))
    assert "cache_write_split_mismatch" in rec.flags
    assert rec.cache_write == 999 and rec.cache_write_5m is None and rec.cache_write_1h is None


def _anthropic_stream_body(start_usage: dict[str, Any], delta_usage: dict[str, Any]) -> bytes:
    msg = {**_message(start_usage), "content": [], "stop_reason": None}
    return _sse([
        ("message_start", {"type": "message_start", "message": msg}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "hi"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                              "stop_sequence": None},
                           "usage": delta_usage}),
        ("message_stop", {"type": "message_stop"}),
    ])


def test_anthropic_stream_through_the_sdk_equals_the_non_streamed_record() -> None:
    start = {**ANTHROPIC_USAGE, "output_tokens": 1}
    start.pop("output_tokens_details")
    delta = {"output_tokens": 310, "input_tokens": 50, "cache_read_input_tokens": 2400,
             "cache_creation_input_tokens": 1120,
             "output_tokens_details": {"thinking_tokens": 200}}
    client = anthropic.Anthropic(api_key="test", base_url="http://test",
                                 http_client=httpx2.Client(transport=_client_transport(
                                     _anthropic_stream_body(start, delta))))
    stream = client.messages.create(model="claude-opus-5", max_tokens=10, stream=True,
                                    messages=[{"role": "user", "content": "hi"}])
    acc = StreamUsage(label="chat")
    kinds = []
    for event in stream:
        kinds.append(event.type)
        acc.feed(event)
    assert kinds[0] == "message_start" and "content_block_delta" in kinds
    streamed = acc.record()
    assert streamed == parse_usage(Message.model_validate(_message()), label="chat")
    assert streamed.cache_write_5m == 1000  # the TTL split comes from message_start only


def test_anthropic_stream_helper_events_and_final_message() -> None:
    start = {"input_tokens": 50, "cache_read_input_tokens": 2400,
             "cache_creation_input_tokens": 1120, "output_tokens": 1,
             "cache_creation": {"ephemeral_5m_input_tokens": 1000,
                                "ephemeral_1h_input_tokens": 120}}
    delta = {"output_tokens": 310}
    client = anthropic.Anthropic(api_key="test", base_url="http://test",
                                 http_client=httpx2.Client(transport=_client_transport(
                                     _anthropic_stream_body(start, delta))))
    with client.messages.stream(model="claude-opus-5", max_tokens=10,
                                messages=[{"role": "user", "content": "hi"}]) as stream:
        streamed = parse_stream(stream)  # helper events: text, message_stop with snapshot...
        final = parse_usage(stream.get_final_message())
    assert streamed == final
    assert (streamed.cache_read, streamed.cache_write_1h, streamed.output) == (2400, 120, 310)


def test_anthropic_stream_without_usage_raises() -> None:
    with pytest.raises(InvalidRequestError, match="no streamed event carried usage"):
        parse_stream([{"type": "ping"}, {"type": "message_stop"}])


def test_stream_untyped_usage_without_a_format_key_is_a_snapshot_of_the_known_format() -> None:
    # the first event fixes the format (anthropic); {"output_tokens": 16} names no format but is
    # an Anthropic counter: it used to be dropped (output None)
    rec = parse_stream([{"usage": {"input_tokens": 5105}}, {"usage": {"output_tokens": 16}}])
    assert (rec.provider, rec.uncached_input, rec.output, rec.flags) == (
        "anthropic", 5105, 16, ())
    # before the format is known: kept, read once a later event fixes it (order kept)
    early = parse_stream([{"usage": {"output_tokens": 16}}, {"type": "ping"},
                          {"usage": {"input_tokens": 5105}}])
    assert early == rec
    # an explicit provider fixes the format from the start; bare usage mappings too
    assert parse_stream([{"output_tokens": 16}], provider="anthropic").output == 16
    assert parse_stream([{"input_tokens": 5}, {"output_tokens": 16}]).output == 16
    # max-merge, never a sum (BR-30): a repeated cumulative count stays as it is
    repeated = parse_stream([{"usage": {"input_tokens": 50, "output_tokens": 1}},
                             {"usage": {"output_tokens": 16}}, {"usage": {"output_tokens": 16}}])
    assert (repeated.uncached_input, repeated.output) == (50, 16)
    # OpenAI chat: a later completion-only usage chunk
    chat = parse_stream([{"usage": {"prompt_tokens": 100,
                                    "prompt_tokens_details": {"cached_tokens": 64}}},
                         {"usage": {"completion_tokens": 7}}])
    assert (chat.provider, chat.cache_read, chat.uncached_input, chat.output) == (
        "openai", 64, 36, 7)


def test_stream_untyped_usage_without_counters_or_format_is_not_read() -> None:
    # a usage mapping with none of the format's counters adds nothing (and no bogus snapshot)
    rec = parse_stream([{"usage": {"input_tokens": 5}}, {"usage": {}},
                        {"usage": {"cache_read": 9}}, {"type": "content_block_delta",
                                                       "index": 0, "delta": {"text": "x"}}])
    assert (rec.uncached_input, rec.cache_read, rec.output) == (5, None, None)
    # a bad count in such an event is still an error
    with pytest.raises(InvalidRequestError, match="expected a token count"):
        parse_stream([{"usage": {"input_tokens": 5}}, {"usage": {"output_tokens": "ten"}}])
    # nothing ever names the format: say so rather than "no usage"
    with pytest.raises(InvalidRequestError, match=r"names its usage's wire format \(usage "
                                                   r"keys: output_tokens\); pass provider="):
        parse_stream([{"usage": {"output_tokens": 16}}])


def test_stream_untyped_hold_back_needs_a_counter_field_of_some_format() -> None:
    from promptcache.usage import parse

    # the fields are the mappers' own: meta and flag fields are not counters
    assert set(parse._COUNTER_FIELDS["anthropic"]) == {
        "input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
        "output_tokens", "cache_creation", "output_tokens_details"}
    assert "service_tier" not in parse._ANY_COUNTER_FIELDS
    assert "prompt_tokens_includes_cache" not in parse._ANY_COUNTER_FIELDS
    assert {"promptTokenCount", "cacheWriteInputTokens"} <= set(parse._ANY_COUNTER_FIELDS)
    # TGI-style events: a key merely containing "token" is no usage (review4 item 6)
    tgi = [{"token": {"id": 1, "text": "a"}, "generated_text": None, "details": None}] * 2
    with pytest.raises(InvalidRequestError, match="no streamed event carried usage"):
        parse_stream(tgi)
    with pytest.raises(InvalidRequestError, match="no streamed event carried usage"):
        parse_stream([{"usage": {"total_tokens": 9}}])
    assert parse_stream([*tgi, {"usage": {"input_tokens": 5}}]).uncached_input == 5
    # a counter field set to null holds nothing either
    with pytest.raises(InvalidRequestError, match="no streamed event carried usage"):
        parse_stream([{"usage": {"output_tokens": None}}])


def test_stream_content_events_skip_the_mapping_work(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptcache.usage.parse import StreamUsage

    def fail(self: Any, d: Any) -> bool:
        raise AssertionError(f"mapped {d}")

    monkeypatch.setattr(StreamUsage, "_add_untyped", fail)
    content = [{"type": "content_block_delta", "index": 0, "delta": {"text": "x"}},
               {"type": "x", "tokens": [1, 2]}, {"id": "c", "choices": [], "usage": None}]
    for provider in ("anthropic", "openai", "gemini", None):
        acc = StreamUsage(provider)
        for event in content:
            acc.feed(event)
        assert not acc.seen_usage
    acc = StreamUsage()
    for event in [{"usage": {"input_tokens": 5}}, *content]:
        acc.feed(event)
    assert acc.record().uncached_input == 5


def test_stream_event_not_shaped_like_usage_is_ignored() -> None:
    # a non-usage event with a counter-named field that holds no count: ignored, before and
    # after the format is known (review4 item 6)
    for other in ({"type": "x", "output_tokens": [1, 2]}, {"type": "x", "completion_tokens": "a"},
                  {"type": "x", "output_tokens": True},
                  {"type": "x", "output_tokens": 3, "cache_creation": [1]}):
        before = parse_stream([other, {"usage": {"input_tokens": 5}}])
        after = parse_stream([{"usage": {"input_tokens": 5}}, other])
        assert (before.uncached_input, before.output) == (after.uncached_input, after.output) == (
            5, None), other
    # a bare mapping shaped like usage is still read (whole float counts too)
    rec = parse_stream([{"input_tokens": 5}, {"output_tokens": 16.0,
                                              "cache_creation": {"ephemeral_5m_input_tokens": 2}}])
    assert (rec.output, rec.cache_write_5m) == (16, 2)
    # an explicit usage object is usage: a bad count raises as in a typed event, whether the
    # format is known already or fixed later
    for events in ([{"usage": {"input_tokens": 5}}, {"usage": {"output_tokens": [1, 2]}}],
                   [{"usage": {"output_tokens": "n/a"}}, {"usage": {"input_tokens": 5}}]):
        with pytest.raises(InvalidRequestError, match="expected a token count"):
            parse_stream(events)
    with pytest.raises(InvalidRequestError, match="negative token count"):
        parse_stream([{"input_tokens": 5}, {"type": "x", "output_tokens": -1}])


def test_br30_cumulative_summed_stream_is_max_merged_not_summed() -> None:
    from tests.cases import case

    c = case("BR-30")
    rec = parse_stream(c["input"]["cumulative_summed"])
    # LangChain's UsageMetadata, cache_read flattened to the top level (nu8 bug 5: it was read
    # as Anthropic, cache_read None and 5105 uncached): input_tokens is the inclusive total,
    # every counter is max-merged, never summed (5100, not the case's must_not 5100 * 3)
    exp = c["expected"]["cumulative_summed"]
    assert (rec.provider, rec.cache_read, rec.uncached_input, rec.output) == (
        "langchain", exp["cache_read"], 5, 16)
    assert rec.cache_read != exp["must_not"]
    assert rec.total_input == rec.input_total == 5105
    assert rec.flags == ("usage_decreased:input_tokens",)


def test_langchain_usage_metadata_is_inclusive_not_anthropic() -> None:
    # nu8 bug 5: read as Anthropic (uncached 5105, cache_read None, no flag)
    rec = parse_usage({"input_tokens": 5105, "output_tokens": 16,
                       "input_token_details": {"cache_read": 5100}})
    assert detect_provider({"input_tokens": 5105, "input_token_details": {}}) == "langchain"
    assert (rec.provider, rec.uncached_input, rec.cache_read, rec.input_total) == (
        "langchain", 5, 5100, 5105)
    assert rec.cache_write is None and rec.flags == ()  # no cache_creation key: not reported
    full = parse_usage({"input_tokens": 2000, "output_tokens": 30, "total_tokens": 2030,
                        "input_token_details": {"audio": 10, "cache_read": 1200,
                                                "cache_creation": 500,
                                                "ephemeral_5m_input_tokens": 400,
                                                "ephemeral_1h_input_tokens": 100},
                        "output_token_details": {"reasoning": 12, "audio": 0}},
                       model="claude-sonnet-4-5")
    assert (full.uncached_input, full.cache_read, full.cache_write) == (300, 1200, 500)
    assert (full.cache_write_5m, full.cache_write_1h, full.reasoning) == (400, 100, 12)
    assert full.total_input == 2000 and full.flags == ()
    # Anthropic's own usage (cache_creation is its TTL-split object) stays Anthropic
    assert detect_provider(ANTHROPIC_USAGE) == "anthropic"


def test_a_relays_copy_of_a_mapped_cache_count_is_not_an_unknown_field() -> None:
    """Review 7: relays that normalise usage add the same count under another name (LiteLLM's
    cache_read_input_tokens beside OpenAI's cached_tokens; prompt_tokens_details.cached_tokens
    beside DeepSeek's prompt_cache_hit_tokens): nothing is dropped, so no flag. A count the
    parser did not read and that differs (a write) is still flagged."""
    deepseek = parse_usage({"prompt_tokens": 2000, "completion_tokens": 5,
                            "prompt_cache_hit_tokens": 1920, "prompt_cache_miss_tokens": 80,
                            "prompt_tokens_details": {"cached_tokens": 1920}})
    assert (deepseek.provider, deepseek.cache_read, deepseek.flags) == ("deepseek", 1920, ())
    litellm = parse_usage({"prompt_tokens": 2000, "completion_tokens": 5,
                           "prompt_tokens_details": {"cached_tokens": 1920},
                           "cache_read_input_tokens": 1920})
    assert (litellm.provider, litellm.cache_read, litellm.flags) == ("openai", 1920, ())
    write = parse_usage({"prompt_tokens": 2000, "completion_tokens": 5,
                         "prompt_tokens_details": {"cached_tokens": 1920},
                         "cache_creation_input_tokens": 64})
    assert write.flags == ("unknown_cache_field:cache_creation_input_tokens",)


def test_a_dumped_langchain_ai_message_is_read_as_langchain_not_gemini() -> None:
    """Review 7: the object LangChain users hold is an AIMessage; its dump has a top-level
    ``usage_metadata``, which was taken for Gemini's and refused ("none of the gemini usage
    fields is present")."""
    message = {"content": "hi", "type": "ai", "id": "run-1",
               "response_metadata": {"model_name": "claude-sonnet-4-6"},
               "usage_metadata": {"input_tokens": 2006, "output_tokens": 30,
                                  "total_tokens": 2036,
                                  "input_token_details": {"cache_read": 1900,
                                                          "cache_creation": 100}}}
    rec = parse_usage(message)
    assert (rec.provider, rec.model, rec.request_id) == ("langchain", "claude-sonnet-4-6",
                                                         "run-1")
    assert (rec.uncached_input, rec.cache_read, rec.cache_write) == (6, 1900, 100)
    # Gemini's own usage_metadata still goes to the Gemini parser
    gem = parse_usage({"usage_metadata": {"prompt_token_count": 100,
                                          "cached_content_token_count": 50,
                                          "candidates_token_count": 3}})
    assert (gem.provider, gem.cache_read) == ("gemini", 50)


def test_unmapped_cache_fields_are_flagged_not_dropped() -> None:
    # an input_tokens shape with cache counts the parser cannot map: flagged, never silent
    rec = parse_usage({"input_tokens": 5105, "output_tokens": 16,
                       "prompt_details": {"cache_hits": 5100, "cache_misses": 0}})
    assert rec.provider == "anthropic" and rec.cache_read is None
    assert rec.flags == ("unknown_cache_field:prompt_details.cache_hits",)
    extra = parse_usage({"input_tokens": 10, "output_tokens": 1,
                         "input_token_details": {"cache_read": 5, "cache_read_over_200k": 3}})
    assert extra.cache_read == 5
    assert extra.flags == ("unknown_cache_field:input_token_details.cache_read_over_200k",)
    streamed = parse_stream([{"type": "message_start", "message": {"usage": {
        "input_tokens": 3, "output_tokens": 1, "cached_tokens": 40}}},
        {"type": "message_delta", "usage": {"output_tokens": 9}}])
    assert streamed.flags == ("unknown_cache_field:cached_tokens",)
    # known providers' full SDK dumps carry no unmapped cache count
    assert parse_usage(ANTHROPIC_USAGE).flags == ()


# ------------------------------------------------------------------------------- OpenAI chat


def _chat(usage: dict[str, Any] | None, model: str = "gpt-5.6-sol") -> dict[str, Any]:
    return {"id": "chatcmpl-9", "object": "chat.completion", "created": 1, "model": model,
            "choices": [], "usage": usage, "service_tier": "default"}


def test_openai_chat_completion_with_cache_writes() -> None:
    usage = {"prompt_tokens": 5000, "completion_tokens": 40, "total_tokens": 5040,
             "prompt_tokens_details": {"cached_tokens": 3072, "cache_write_tokens": 1800},
             "completion_tokens_details": {"reasoning_tokens": 12}}
    rec = parse_usage(ChatCompletion.model_validate(_chat(usage)))
    assert rec.provider == "openai" and rec.model == "gpt-5.6-sol"
    assert rec.cache_read == 3072 and rec.cache_write == 1800 and rec.cache_write_ttl == "30m"
    assert rec.uncached_input == 5000 - 3072 - 1800  # prompt_tokens includes both
    assert rec.total_input == rec.input_total == 5000
    assert rec.reasoning == 12 and rec.output == 40
    assert rec.service_tier == "default"


def test_openai_parts_exceeding_prompt_tokens_clamp_and_flag() -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 1, "total_tokens": 101,
             "prompt_tokens_details": {"cached_tokens": 90, "cache_write_tokens": 20}}
    rec = parse_usage(_chat(usage))
    assert rec.uncached_input == 0 and "input_parts_exceed_total" in rec.flags


def test_cached_tokens_above_prompt_tokens_are_clamped_consistently() -> None:
    # nu7 bug 2: cached_tokens 5000 > prompt_tokens 100 kept cache_read=5000 (hit rate 50.0)
    rec = parse_usage({"prompt_tokens": 100, "completion_tokens": 1,
                       "prompt_tokens_details": {"cached_tokens": 5000}}, model="gpt-5")
    assert (rec.uncached_input, rec.cache_read, rec.input_total) == (0, 100, 100)
    assert rec.total_input == 100 and rec.hit_rate == 1.0
    assert rec.flags == ("input_parts_exceed_total",
                         "input_parts_reported:input_total=100,cache_read=5000,uncached_input=0")
    # writes are capped at what the read leaves; the uncached part at what both leave
    both = parse_usage(_chat({"prompt_tokens": 100, "completion_tokens": 1,
                              "prompt_tokens_details": {"cached_tokens": 90,
                                                        "cache_write_tokens": 20}}))
    assert (both.uncached_input, both.cache_read, both.cache_write) == (0, 90, 10)
    assert both.total_input == 100
    deepseek = parse_usage({"prompt_tokens": 10, "prompt_cache_hit_tokens": 8,
                            "prompt_cache_miss_tokens": 8})
    assert (deepseek.uncached_input, deepseek.cache_read, deepseek.total_input) == (2, 8, 10)
    # a hand-made or logged record is made consistent the same way, and stays so when re-read
    hand = UsageRecord(provider="openai", uncached_input=0, cache_read=5000, input_total=100)
    assert hand.cache_read == 100 and "input_parts_exceed_total" in hand.flags
    again = UsageRecord.model_validate(hand.model_dump())
    assert again == hand
    ok = UsageRecord(provider="openai", uncached_input=0, cache_read=100, input_total=100)
    assert ok.flags == ()
    # review 7: with the read unknown, writes and the uncached part are still capped (the read
    # stays unknown): a 5,000-token write on a 100-token prompt was kept, unflagged
    unread = UsageRecord(provider="openai", input_total=100, cache_write=5000)
    assert (unread.cache_read, unread.cache_write) == (None, 100)
    assert "input_parts_exceed_total" in unread.flags
    loose = UsageRecord(provider="openai", input_total=100, uncached_input=500)
    assert loose.uncached_input == 100 and "input_parts_exceed_total" in loose.flags


def test_vllm_missing_cached_tokens_is_unknown() -> None:
    usage = {"prompt_tokens": 3000, "completion_tokens": 10, "total_tokens": 3010}
    rec = parse_usage(ChatCompletion.model_validate(_chat(usage, "Qwen/Qwen3-8B")),
                      provider="vllm")
    assert rec.provider == "vllm"
    assert rec.cache_read is None and rec.uncached_input is None
    assert rec.input_total == 3000 and rec.total_input is None and rec.hit_rate is None
    with_details = parse_usage(_chat({**usage, "prompt_tokens_details": {"cached_tokens": 2048}}),
                               provider="vllm")
    assert with_details.hit_rate == pytest.approx(2048 / 3000)


def test_openai_chat_stream_with_include_usage_through_the_sdk() -> None:
    base = {"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4o"}
    usage = {"prompt_tokens": 2006, "completion_tokens": 2, "total_tokens": 2008,
             "prompt_tokens_details": {"cached_tokens": 1920}}
    body = _sse([
        (None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                     "finish_reason": None}], "usage": None}),
        (None, {**base, "choices": [{"index": 0, "delta": {"content": "ok"},
                                     "finish_reason": "stop"}], "usage": None}),
        (None, {**base, "choices": [], "usage": usage}),
        (None, "[DONE]"),
    ])
    client = openai.OpenAI(api_key="test", base_url="http://test/v1",
                           http_client=httpx2.Client(transport=_client_transport(body)))
    stream = client.chat.completions.create(model="gpt-4o", stream=True,
                                            stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": "hi"}])
    streamed = parse_stream(stream, label="x")
    plain = parse_usage(_chat(usage, "gpt-4o"), label="x")
    assert streamed.model_dump(exclude={"service_tier"}) == plain.model_dump(
        exclude={"service_tier"})
    assert streamed.cache_read == 1920 and streamed.uncached_input == 86


def test_openai_chat_stream_without_include_usage_raises() -> None:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
             "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}],
             "usage": None}
    acc = StreamUsage()
    acc.feed(chunk)
    assert not acc.seen_usage
    with pytest.raises(InvalidRequestError, match="include_usage"):
        acc.record()


# --------------------------------------------------------------------------- OpenAI Responses


def _response(usage: dict[str, Any]) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "created_at": 1.0, "model": "gpt-6-sol",
            "output": [], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "status": "completed", "usage": usage}


RESP_USAGE = {
    "input_tokens": 9000, "output_tokens": 300, "total_tokens": 9300,
    "input_tokens_details": {"cached_tokens": 6144, "cache_write_tokens": 2000,
                             "cache_write_tokens_details": {"ttl_30m_tokens": 0,
                                                            "ttl_12h_tokens": 2000}},
    "output_tokens_details": {"reasoning_tokens": 100},
}


def test_openai_responses_object_and_completed_event() -> None:
    obj = Response.model_validate(_response(RESP_USAGE))
    rec = parse_usage(obj)
    assert rec.provider == "openai-responses" and rec.request_id == "resp_1"
    assert (rec.uncached_input, rec.cache_read, rec.cache_write) == (856, 6144, 2000)
    assert rec.cache_write_ttl == "12h" and rec.reasoning == 100
    event = ResponseCompletedEvent.model_validate(
        {"type": "response.completed", "sequence_number": 7, "response": _response(RESP_USAGE)})
    created = {"type": "response.created", "sequence_number": 0,
               "response": {**_response(RESP_USAGE), "usage": None, "status": "in_progress"}}
    delta = {"type": "response.output_text.delta", "sequence_number": 3, "delta": "x",
             "item_id": "i", "output_index": 0, "content_index": 0}
    assert parse_stream([created, delta, event]) == rec
    assert detect_provider(event) == "openai-responses"
    assert detect_provider(obj.usage) == "openai-responses"


# ------------------------------------------------------------------------ other providers


def test_deepseek_hit_and_miss() -> None:
    resp = {"id": "d1", "model": "deepseek-chat", "object": "chat.completion",
            "usage": {"prompt_tokens": 1500, "completion_tokens": 20, "total_tokens": 1520,
                      "prompt_cache_hit_tokens": 1280, "prompt_cache_miss_tokens": 220}}
    rec = parse_usage(resp)
    assert rec.provider == "deepseek"
    assert (rec.uncached_input, rec.cache_read, rec.total_input) == (220, 1280, 1500)
    assert rec.cache_write is None  # no write category
    bad = parse_usage({"prompt_tokens": 10, "prompt_cache_hit_tokens": 8,
                       "prompt_cache_miss_tokens": 8})
    assert "input_parts_exceed_total" in bad.flags


def test_bedrock_converse_and_stream_metadata() -> None:
    usage = {"inputTokens": 30, "outputTokens": 200, "totalTokens": 5230,
             "cacheReadInputTokens": 4000, "cacheWriteInputTokens": 1000,
             "cacheDetails": [{"ttl": "1h", "inputTokens": 600}, {"ttl": "5m", "inputTokens": 400}]}
    resp = {"output": {"message": {"role": "assistant", "content": []}}, "stopReason": "end_turn",
            "usage": usage, "metrics": {"latencyMs": 900},
            "ResponseMetadata": {"RequestId": "req-7"}}
    rec = parse_usage(resp, model="anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert rec.provider == "bedrock" and rec.request_id == "req-7"
    assert (rec.uncached_input, rec.cache_read, rec.cache_write) == (30, 4000, 1000)
    assert (rec.cache_write_5m, rec.cache_write_1h) == (400, 600)
    assert rec.total_input == 5030
    streamed = parse_stream([{"messageStart": {"role": "assistant"}},
                             {"contentBlockDelta": {"delta": {"text": "x"}}},
                             {"metadata": {"usage": usage, "metrics": {"latencyMs": 9}}}],
                            model="anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert streamed.model_dump(exclude={"request_id"}) == rec.model_dump(exclude={"request_id"})
    no_split = parse_usage({"inputTokens": 1, "outputTokens": 1, "cacheWriteInputTokens": 7})
    assert no_split.cache_write == 7 and no_split.cache_write_5m is None


def test_normalized_relay_shape_subtracts_reads_and_writes() -> None:
    # relays/gateways that convert Anthropic usage to prompt_tokens + split fields (BR-25)
    usage = {"prompt_tokens": 2000, "cached_read_tokens": 500, "cache_creation_tokens": 300,
             "completion_tokens": 7, "prompt_tokens_includes_cache": True}
    assert detect_provider(usage) == "normalized"
    rec = parse_usage({"model": "claude-sonnet-4-5", "usage": usage})
    assert rec.provider == "normalized" and rec.model == "claude-sonnet-4-5"
    assert (rec.uncached_input, rec.cache_read, rec.cache_write) == (1200, 500, 300)
    assert (rec.cache_write_5m, rec.cache_write_1h) == (None, None)  # TTL not reported
    assert (rec.total_input, rec.input_total, rec.output, rec.flags) == (2000, 2000, 7, ())
    # the flag is usually absent: prompt_tokens is still the inclusive total
    unflagged = {k: v for k, v in usage.items() if k != "prompt_tokens_includes_cache"}
    assert parse_usage(unflagged).uncached_input == 1200
    # an explicitly exclusive prompt_tokens is the uncached bucket
    exclusive = parse_usage({**usage, "prompt_tokens_includes_cache": False})
    assert (exclusive.uncached_input, exclusive.total_input) == (2000, 2800)
    over = parse_usage({"prompt_tokens": 100, "cached_read_tokens": 90,
                        "cache_creation_tokens": 20})
    assert over.uncached_input == 0 and "input_parts_exceed_total" in over.flags
    with pytest.raises(InvalidRequestError):
        parse_usage({**usage, "prompt_tokens_includes_cache": "yes"})


def test_gemini_snake_and_camel_case() -> None:
    snake = {"model_version": "gemini-2.5-flash", "response_id": "g1",
             "usage_metadata": {"prompt_token_count": 5000, "cached_content_token_count": 4096,
                                "candidates_token_count": 50, "thoughts_token_count": 25}}
    camel = {"modelVersion": "gemini-2.5-flash", "responseId": "g1",
             "usageMetadata": {"promptTokenCount": 5000, "cachedContentTokenCount": 4096,
                               "candidatesTokenCount": 50, "thoughtsTokenCount": 25}}
    a, b = parse_usage(snake), parse_usage(camel)
    assert a == b
    assert a.provider == "gemini" and a.model == "gemini-2.5-flash"
    assert (a.uncached_input, a.cache_read, a.total_input) == (904, 4096, 5000)
    assert a.output == 75 and a.reasoning == 25
    # proto3 JSON omits zero counters: an absent cachedContentTokenCount is 0
    miss = parse_usage({"usageMetadata": {"promptTokenCount": 3000, "candidatesTokenCount": 5}})
    assert miss.cache_read == 0 and miss.hit_rate == 0.0


# ----------------------------------------------------------------------------- errors, misc


@pytest.mark.parametrize("bad", [
    {"id": "x", "choices": []},
    {"usage": {"prompt_tokens": -1}},
    {"usage": {"input_tokens": "many", "output_tokens": 1}},
    {"usage": {"prompt_tokens": 1.5}},
])
def test_bad_usage_raises_named_error(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequestError):
        parse_usage(bad)


def test_unknown_provider_and_unreadable_object() -> None:
    with pytest.raises(InvalidRequestError, match="unknown provider format"):
        parse_usage({"prompt_tokens": 1}, provider="mistral")
    with pytest.raises(InvalidRequestError, match="cannot read usage"):
        parse_usage(42)
    with pytest.raises(InvalidRequestError, match="none of the openai usage fields"):
        parse_usage(Response.model_validate(_response(RESP_USAGE)), provider="openai")


def test_responses_mixed_write_ttls_leave_ttl_unset() -> None:
    usage = json.loads(json.dumps(RESP_USAGE))
    usage["input_tokens_details"]["cache_write_tokens_details"] = {"ttl_30m_tokens": 1500,
                                                                   "ttl_12h_tokens": 500}
    rec = parse_usage(_response(usage))
    assert rec.cache_write == 2000 and rec.cache_write_ttl is None
    usage["input_tokens_details"].pop("cache_write_tokens_details")
    assert parse_usage(_response(usage)).cache_write_ttl == "30m"


def test_record_invariants() -> None:
    with pytest.raises(ValueError, match="cache_write_5m"):
        UsageRecord(provider="anthropic", cache_write=10, cache_write_5m=5, cache_write_1h=4)
    with pytest.raises(ValueError):
        UsageRecord(provider="anthropic", cache_read=-1)
    with pytest.raises(ValueError, match="exceed"):
        UsageRecord.from_inclusive_total("x", 100, cache_read=90, cache_write=20)
    rec = UsageRecord(provider="anthropic", uncached_input=0, cache_read=0, cache_write=0)
    assert rec.total_input == 0 and rec.hit_rate is None  # 0/0 is unknown, not 0
    assert UsageRecord.model_validate_json(rec.model_dump_json()) == rec


def test_sdk_objects_parse_like_their_dicts_without_dumping_the_content() -> None:
    import anthropic.types as at
    import openai.types.chat as oc

    msg = at.Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": "x" * 50_000}], "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 7, "cache_read_input_tokens": 2048,
                  "cache_creation_input_tokens": 0}})
    chat = oc.ChatCompletion.model_validate({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "service_tier": "default",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "y" * 50_000}}],
        "usage": {"prompt_tokens": 2100, "completion_tokens": 5, "total_tokens": 2105,
                  "prompt_tokens_details": {"cached_tokens": 1920}}})
    for obj in (msg, chat):
        assert parse_usage(obj) == parse_usage(obj.model_dump())


def test_time_fields_take_datetimes_and_bad_values_raise_the_documented_error() -> None:
    # nu7 nit: start=datetime(...) raised a raw pydantic ValidationError
    from datetime import UTC, datetime

    usage = {"input_tokens": 1, "output_tokens": 1}
    rec = parse_usage(usage, start=datetime(2026, 1, 1), end=datetime(2026, 1, 1, 0, 0, 2,
                                                                      tzinfo=UTC))
    assert rec.start == datetime(2026, 1, 1, tzinfo=UTC).timestamp() and rec.duration == 2.0
    streamed = parse_stream([{"type": "message_delta", "usage": usage}],
                            first_token=datetime(2026, 1, 1, tzinfo=UTC))
    assert streamed.first_token == rec.start
    with pytest.raises(InvalidRequestError, match="seconds since the epoch") as exc:
        parse_usage(usage, start="yesterday")
    assert exc.value.path == "start"
    with pytest.raises(InvalidRequestError) as bad:
        parse_usage(usage, label=5)
    assert bad.value.path == "label"
