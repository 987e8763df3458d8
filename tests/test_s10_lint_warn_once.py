"""``lint="warn"`` warned on every request for a per-request value (the dedupe key held the
matched text) and the client's "reported" set grew by one key per request (trial 16)."""

from __future__ import annotations

import json
import warnings

import httpx2

from promptcache.sdk import PromptCacheWarning, wrap
from promptcache.sdk._wrap import observer_of
from promptcache.usage import UsageTracker
from tests._mockapi import anthropic_client

BODY = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1,
                                         "cache_read_input_tokens": 0,
                                         "cache_creation_input_tokens": 0}}
STABLE = "You answer questions about ferns. " * 200


def test_a_clock_in_the_system_prompt_is_warned_once() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=json.dumps(BODY).encode(),
                               headers={"content-type": "application/json"})

    client = wrap(anthropic_client(handler), tracker=UsageTracker(keep_records=False),
                  lint="warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for second in range(5):
            system = f"Current time: 2026-01-01T12:00:0{second}\n" + STABLE
            client.messages.create(model="claude-sonnet-4-6", max_tokens=1, system=[
                {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
                messages=[{"role": "user", "content": "x"}])
    lint = [w for w in caught if issubclass(w.category, PromptCacheWarning)
            and "PC101" in str(w.message)]
    assert len(lint) == 1
    assert sum(k.startswith("lint:") for k in observer_of(client).shared.reported) == 1
