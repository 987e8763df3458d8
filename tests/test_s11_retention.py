"""The session checks take the idle lifetime of the prompt_cache_retention the request sent
(OpenAI before GPT-5.6): the wrapper puts it on the usage record, a request log's line carries
it. Before, the tracker always assumed the model's default retention, so a collapse after a
2 h gap on a 24h-retention request was called a likely expiry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

from promptcache.sdk import wrap
from promptcache.usage import UsageRecord, UsageTracker
from promptcache.usage.sinks import iter_usage_log
from tests._mockapi import openai_client

MODEL = "gpt-5"  # accepts in_memory and 24h; its default depends on the organisation


def _rec(start: float, read: int, retention: str | None) -> UsageRecord:
    return UsageRecord(provider="openai", model=MODEL, uncached_input=100, cache_read=read,
                       cache_write=0, output=5, start=start, end=start + 1, session="s1",
                       prompt_cache_retention=retention)


def _collapse(retention: str | None) -> Any:
    tracker = UsageTracker()
    tracker.add(_rec(0.0, 5000, retention))
    events = tracker.add(_rec(7200.0, 0, retention))  # two hours later, nothing read
    [ev] = [e for e in events if e.kind == "collapse"]
    return ev


def test_24h_retention_is_not_a_likely_expiry_after_two_hours() -> None:
    ev = _collapse("24h")
    assert ev.data["cause"] != "ttl_expired"
    assert ev.data["ttl_seconds"] == 86400.0 and ev.data["retention"] == "24h"


def test_in_memory_retention_is_certainly_expired_after_two_hours() -> None:
    ev = _collapse("in_memory")
    assert ev.data["cause"] == "ttl_expired"
    assert "likely" not in ev.message and ev.data["retention"] == "in_memory"


def test_unknown_retention_keeps_the_hedged_default() -> None:
    ev = _collapse(None)
    assert ev.data["cause"] == "ttl_expired" and "likely but not certain" in ev.message
    assert "no prompt_cache_retention is known" in ev.message


def _chat(usage: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1_760_000_000,
            "model": MODEL, "usage": usage,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "ok"}}]}


def test_wrapper_records_the_retention_the_request_sent() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=_chat({
            "prompt_tokens": 1500, "completion_tokens": 5, "total_tokens": 1505,
            "prompt_tokens_details": {"cached_tokens": 1408}}))

    tracker = UsageTracker()
    client = wrap(openai_client(handler), tracker=tracker, lint="off")
    msgs = [{"role": "user", "content": "hi"}]
    client.chat.completions.create(model=MODEL, messages=msgs,  # type: ignore[arg-type]
                                   prompt_cache_retention="24h")
    client.chat.completions.create(model=MODEL, messages=msgs)  # type: ignore[arg-type]
    first, second = tracker.records
    assert first.prompt_cache_retention == "24h"
    assert second.prompt_cache_retention is None


def test_request_log_line_carries_the_retention(tmp_path: Path) -> None:
    line = {"timestamp": 1_760_000_000, "model": MODEL,
            "request": {"model": MODEL, "prompt_cache_retention": "24h",
                        "messages": [{"role": "user", "content": "hi"}]},
            "response": {"usage": {"prompt_tokens": 1500, "completion_tokens": 5,
                                   "prompt_tokens_details": {"cached_tokens": 1024}}}}
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    [rec] = list(iter_usage_log(str(path)))
    assert rec.prompt_cache_retention == "24h"
