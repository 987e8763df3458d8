"""Calls through ``with_raw_response.create`` were not tracked (usage, lint, live diff), so the
tracker drifted from the provider's counts for apps that read rate-limit headers this way
(new-user trial 16)."""

from __future__ import annotations

import asyncio
import json

import httpx2

from promptcache.sdk import wrap
from promptcache.usage import UsageTracker
from tests._mockapi import anthropic_client, async_anthropic_client, openai_client

A_BODY = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
          "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
          "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 3,
                                           "cache_read_input_tokens": 2000,
                                           "cache_creation_input_tokens": 0}}
O_BODY = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1790000000,
          "model": "gpt-4o", "choices": [{"index": 0, "finish_reason": "stop", "message": {
              "role": "assistant", "content": "ok"}}],
          "usage": {"prompt_tokens": 2048, "completion_tokens": 3, "total_tokens": 2051,
                    "prompt_tokens_details": {"cached_tokens": 1024}}}


def _handler(body: dict):  # type: ignore[no-untyped-def]
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=json.dumps(body).encode(),
                               headers={"content-type": "application/json",
                                        "anthropic-ratelimit-requests-remaining": "99"})
    return handler


def test_anthropic_with_raw_response_is_recorded_and_returned_unchanged() -> None:
    tracker = UsageTracker(keep_records=True, warn=False)
    client = wrap(anthropic_client(_handler(A_BODY)), tracker=tracker)
    raw = client.messages.with_raw_response.create(
        model="claude-sonnet-4-6", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert raw.headers["anthropic-ratelimit-requests-remaining"] == "99"
    message = raw.parse()
    assert message.usage.cache_read_input_tokens == 2000
    [record] = tracker.records
    assert (record.cache_read, record.output) == (2000, 3)


def test_async_anthropic_with_raw_response_is_recorded() -> None:
    tracker = UsageTracker(keep_records=True, warn=False)
    client = wrap(async_anthropic_client(_handler(A_BODY)), tracker=tracker)

    async def go() -> int:
        raw = await client.messages.with_raw_response.create(
            model="claude-sonnet-4-6", max_tokens=5,
            messages=[{"role": "user", "content": "hi"}])
        return (await raw.parse()).usage.output_tokens

    assert asyncio.run(go()) == 3
    [record] = tracker.records
    assert record.cache_read == 2000


def test_openai_with_raw_response_is_recorded() -> None:
    tracker = UsageTracker(keep_records=True, warn=False)
    client = wrap(openai_client(_handler(O_BODY)), tracker=tracker)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert raw.parse().usage.prompt_tokens == 2048
    [record] = tracker.records
    assert (record.cache_read, record.uncached_input) == (1024, 1024)
