"""Leaving ``messages.stream()`` before its ``message_delta`` recorded message_start's
placeholder output count (1) as exact, unflagged, where ``create(stream=True)`` records the
output as unknown with a flag (new-user trial 16)."""

from __future__ import annotations

import json

import httpx2

from promptcache.sdk import wrap
from promptcache.usage import UsageTracker
from tests._mockapi import anthropic_client

MODEL = "claude-sonnet-4-6"


def _sse(events: list[dict]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _events() -> list[dict]:
    start = {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": MODEL, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 30, "cache_read_input_tokens": 2000,
                  "cache_creation_input_tokens": 0, "output_tokens": 1}}}
    deltas = [{"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": f"w{i} "}} for i in range(3)]
    return [start, {"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}, *deltas,
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                "stop_sequence": None},
             "usage": {"output_tokens": 15}},
            {"type": "message_stop"}]


def _client() -> tuple[object, UsageTracker]:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=_sse(_events()),
                               headers={"content-type": "text/event-stream"})

    tracker = UsageTracker(keep_records=True, warn=False)
    return wrap(anthropic_client(handler), tracker=tracker), tracker


def test_leaving_messages_stream_early_records_the_output_as_unknown() -> None:
    client, tracker = _client()
    with client.messages.stream(model=MODEL, max_tokens=20,  # type: ignore[attr-defined]
                                messages=[{"role": "user", "content": "hi"}]) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                break
    [record] = tracker.records
    assert record.cache_read == 2000
    assert record.output is None
    assert any(f.startswith("stream_incomplete") for f in record.flags)


def test_a_stream_read_through_records_the_final_output() -> None:
    client, tracker = _client()
    with client.messages.stream(model=MODEL, max_tokens=20,  # type: ignore[attr-defined]
                                messages=[{"role": "user", "content": "hi"}]) as stream:
        stream.get_final_message()
    [record] = tracker.records
    assert record.output == 15
    assert record.flags == ()
