"""The live diff said a model switch "diverges from the previous one at tools[0]" (the prefix
digests are seeded with the model) before naming the cause model_changed (trial 16)."""

from __future__ import annotations

import json
import logging

import httpx2
import pytest

from promptcache.sdk import wrap
from promptcache.usage import UsageTracker
from tests._mockapi import anthropic_client

SYSTEM = "You answer questions about ferns and their care. " * 150
TOOLS = [{"name": "lookup", "description": "Look up a care sheet.",
          "input_schema": {"type": "object", "properties": {}}}]


def _handler(request: httpx2.Request) -> httpx2.Response:
    model = json.loads(request.content)["model"]
    body = {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1,
                                             "cache_read_input_tokens": 0,
                                             "cache_creation_input_tokens": 2000}}
    return httpx2.Response(200, content=json.dumps(body).encode(),
                           headers={"content-type": "application/json"})


def test_a_model_switch_is_logged_as_one(caplog: pytest.LogCaptureFixture) -> None:
    client = wrap(anthropic_client(_handler), tracker=UsageTracker(keep_records=False),
                  session="chat", lint="off")
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        for model in ("claude-sonnet-4-6", "claude-opus-4-6"):
            client.messages.create(model=model, max_tokens=1, tools=TOOLS, system=system,
                                   messages=[{"role": "user", "content": "hi"}])
    lines = [r.getMessage() for r in caplog.records
             if r.getMessage().startswith("promptcache: session 'chat'")]
    assert len(lines) == 1
    assert "model changed (claude-sonnet-4-6 -> claude-opus-4-6)" in lines[0]
    assert "model_changed" in lines[0]
    assert "diverges" not in lines[0]
