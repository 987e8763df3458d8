"""explain across conversations (review 26 of e6d610f): a conversation's first request that
missed another conversation's shared system prompt because it sent its own
``prompt_cache_key`` (another route) stays a miss with that cause: a stable key per shared
prefix is the advice (hosted-api-rules.md 2.1); only an uncertain gap is downgraded."""

from __future__ import annotations

from typing import Any

from promptcache.diff import explain
from tests.cases import filler


def _chat(session: str, key: str, question: str, at: float, read: int) -> dict[str, Any]:
    total = 2400
    return {"session_id": session, "timestamp": at, "request": {
        "model": "gpt-4o", "max_tokens": 8, "prompt_cache_key": key, "messages": [
            {"role": "system", "content": filler(3000)},
            {"role": "user", "content": question}]},
        "response": {"id": f"chatcmpl-{session}", "object": "chat.completion", "model": "gpt-4o",
                     "usage": {"prompt_tokens": total, "completion_tokens": 4,
                               "total_tokens": total + 4,
                               "prompt_tokens_details": {"cached_tokens": read}}}}


def test_first_request_with_another_conversations_key_is_a_routing_miss() -> None:
    t0 = 1_780_315_255.0
    report = explain([_chat("conv-A", "user-a", "Where is my order 1001?", t0, 0),
                      _chat("conv-B", "user-b", "A warranty question.", t0 + 30, 0)])
    row = report.requests[1]
    assert row.status == "miss_explained", row
    assert row.cause == "prompt_cache_key_changed", row


def test_same_key_that_read_is_no_miss() -> None:
    t0 = 1_780_315_255.0
    report = explain([_chat("conv-A", "shared", "Where is my order 1001?", t0, 0),
                      _chat("conv-B", "shared", "A warranty question.", t0 + 30, 2304)])
    assert report.requests[1].status not in ("miss_explained", "unexplained_miss")
