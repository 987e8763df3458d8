"""New-user trial 23: faults a production async service meets behind ``wrap()``.

- a failing sink (a full disk) starved the sinks after it and the events' dispatch;
- a ``parse`` helper whose answer does not validate (``pydantic.ValidationError``) lost the
  billed request's usage;
- a response without a usage object logged a traceback on every call;
- an unknown cached count under the minimum became ``uncached = total`` beside it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import anthropic
import httpx2
import openai
import pydantic
import pytest

from promptcache.sdk import tracker_of, wrap
from promptcache.usage import MemorySink, UsageRecord, UsageTracker
from tests._mockapi import (
    anthropic_client,
    async_anthropic_client,
    async_openai_client,
    openai_client,
)


class Answer(pydantic.BaseModel):
    answer: str


class FullDisk:
    def write(self, record: UsageRecord) -> None:
        raise OSError(28, "No space left on device")


def _handler(answer: str = "not json", usage: bool = True, status: int = 200) -> Any:
    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if status != 200:
            return httpx2.Response(status, json={"type": "error", "error": {
                "type": "invalid_request_error", "message": "bad"}})
        if request.url.path.endswith("/messages"):
            return httpx2.Response(200, json={
                "id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                "content": [{"type": "text", "text": answer}], "stop_reason": "end_turn",
                "stop_sequence": None, "usage": {"input_tokens": 11, "output_tokens": 3,
                                                 "cache_read_input_tokens": 0,
                                                 "cache_creation_input_tokens": 0}})
        if request.url.path.endswith("/chat/completions"):
            out: dict[str, Any] = {
                "id": "c1", "object": "chat.completion", "created": 1, "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                             "finish_reason": "stop"}]}
            if usage:
                out["usage"] = {"prompt_tokens": 1500, "completion_tokens": 2,
                                "total_tokens": 1502,
                                "prompt_tokens_details": {"cached_tokens": 1408}}
            return httpx2.Response(200, json=out)
        return httpx2.Response(200, json={
            "id": "r1", "object": "response", "created_at": 1, "model": body["model"],
            "output": [{"type": "message", "id": "m", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": answer,
                                     "annotations": []}]}],
            "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "usage": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12,
                                   "input_tokens_details": {"cached_tokens": 0},
                                   "output_tokens_details": {"reasoning_tokens": 0}}})

    return handler


A_REQ: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 5,
                         "messages": [{"role": "user", "content": "hi"}]}
O_REQ: dict[str, Any] = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


# ---------------------------------------------------------------------------- sinks
def test_a_failing_sink_starves_neither_the_next_sink_nor_the_events() -> None:
    memory, seen = MemorySink(), []
    tracker = UsageTracker(sinks=[FullDisk(), memory], on_event=seen.append, warn=False)
    flagged = UsageRecord(provider="anthropic", model="claude-sonnet-4-6", uncached_input=1,
                          cache_read=0, cache_write=0, output=1, flags=("odd",))
    with pytest.raises(OSError, match="No space left"):  # the direct caller still sees it
        tracker.add(flagged)
    assert len(memory) == 1 and len(tracker.records) == 1
    assert [e.kind for e in seen] == ["usage_anomaly"]
    with pytest.raises(OSError):
        asyncio.run(tracker.aadd(flagged))
    assert len(memory) == 2 and [e.kind for e in seen] == ["usage_anomaly"] * 2


def test_wrapped_calls_reach_the_second_sink_when_the_first_fails(
        caplog: pytest.LogCaptureFixture) -> None:
    memory = MemorySink()
    tracker = UsageTracker(sinks=[FullDisk(), memory], warn=False)
    client = wrap(anthropic_client(_handler()), tracker=tracker, lint="off")
    aclient = wrap(async_anthropic_client(_handler()), tracker=tracker, lint="off")
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        msg = client.messages.create(**A_REQ)
        amsg = asyncio.run(aclient.messages.create(**A_REQ))
    assert type(msg) is anthropic.types.Message and type(amsg) is anthropic.types.Message
    assert len(memory) == 2 and len(tracker.records) == 2
    assert "No space left on device" in caplog.text


# ---------------------------------------------------------------------------- parse helpers
@pytest.mark.parametrize("how", ["anthropic", "chat", "responses", "async-anthropic",
                                 "async-chat"])
def test_a_parse_helper_refusing_the_answer_still_records_its_usage(how: str) -> None:
    handler = _handler("not json")
    if how == "anthropic":
        client: Any = wrap(anthropic_client(handler), lint="off")

        def call() -> Any:
            return client.messages.parse(**A_REQ, output_format=Answer)
    elif how == "chat":
        client = wrap(openai_client(handler), lint="off")

        def call() -> Any:
            return client.chat.completions.parse(**O_REQ, response_format=Answer)
    elif how == "responses":
        client = wrap(openai_client(handler), lint="off")

        def call() -> Any:
            return client.responses.parse(model="gpt-4o", input="hi", text_format=Answer)
    elif how == "async-anthropic":
        client = wrap(async_anthropic_client(handler), lint="off")

        def call() -> Any:
            return asyncio.run(client.messages.parse(**A_REQ, output_format=Answer))
    else:
        client = wrap(async_openai_client(handler), lint="off")

        def call() -> Any:
            return asyncio.run(client.chat.completions.parse(**O_REQ, response_format=Answer))
    with pytest.raises(pydantic.ValidationError):  # the SDK's own exception, unchanged
        call()
    [rec] = tracker_of(client).records
    assert rec.output == {"anthropic": 3, "async-anthropic": 3}.get(how, 2)
    assert rec.uncached_input == {"chat": 92, "async-chat": 92, "responses": 10}.get(how, 11)
    assert not rec.flags


def test_a_parse_helper_api_error_records_nothing() -> None:
    client = wrap(anthropic_client(_handler(status=400)), lint="off")
    with pytest.raises(anthropic.BadRequestError):
        client.messages.parse(**A_REQ, output_format=Answer)
    assert tracker_of(client).records == []
    oclient = wrap(openai_client(_handler(status=400)), lint="off")
    with pytest.raises(openai.BadRequestError):
        oclient.chat.completions.parse(**O_REQ, response_format=Answer)
    assert tracker_of(oclient).records == []


def test_a_parse_helper_success_is_recorded_once() -> None:
    client = wrap(openai_client(_handler('{"answer": "yes"}')), lint="off")
    out = client.chat.completions.parse(**O_REQ, response_format=Answer)
    assert out.choices[0].message.parsed == Answer(answer="yes")
    [rec] = tracker_of(client).records
    assert rec.cache_read == 1408


# ---------------------------------------------------------------------------- missing usage
def test_a_response_without_usage_is_logged_once_without_a_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    client = wrap(openai_client(_handler(usage=False)), lint="off")
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        for _ in range(3):
            out = client.chat.completions.create(**O_REQ)
            assert out.usage is None  # the SDK's object, unchanged
    lines = [r for r in caplog.records if "usage" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None
    assert "carries no usage object" in lines[0].getMessage()
    recs = tracker_of(client).records
    assert len(recs) == 3 and all("usage_unparsable" in r.flags for r in recs)


def test_an_unknown_cached_count_under_the_minimum_stays_unknown() -> None:
    tracker = UsageTracker(warn=False)
    tracker.add(UsageRecord(provider="openai", model="gpt-4o", input_total=10, output=2))
    [rec] = tracker.records
    assert (rec.uncached_input, rec.cache_read) == (None, None)
    # a known read of 0 under the minimum: the writes are known to be 0 (review 13)
    tracker.add(UsageRecord(provider="openai", model="gpt-4o", input_total=10, cache_read=0,
                            output=2))
    assert (tracker.records[1].uncached_input, tracker.records[1].cache_write) == (10, 0)
