"""Review 24: regressions in this session's wrapper, builder and local-backend changes.

1. The wrapper called ``UsageTracker.add_collecting`` / ``aadd_collecting`` on any
   ``UsageTracker``, so a subclass overriding ``add`` / ``aadd`` (to forward each record to its
   metrics) was no longer called by a wrapped client.
2. ``turn()`` now reads a content-block mapping as ``history()`` does; an Anthropic ``image``
   block with a Files API source (``{"type": "file", "file_id": ...}``) became
   ``{"type": "url", "url": "None"}`` (in the history too).
3. The local backend refused a Responses ``service_tier="ultrafast"`` (openai-python 3.x
   ``types/responses/service_tier.py`` lists it; Chat Completions' Literal does not).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pytest

from promptcache.builder import PromptBuilder, user
from promptcache.sdk import wrap
from promptcache.usage import UsageRecord, UsageTracker
from tests._mockapi import anthropic_client, async_anthropic_client
from tests.cases import filler

A_REQ: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 5,
                         "messages": [{"role": "user", "content": "hi"}]}


def _anthropic(request: httpx2.Request) -> httpx2.Response:
    body = json.loads(request.content)
    return httpx2.Response(200, json={
        "id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 11, "output_tokens": 3,
                                         "cache_read_input_tokens": 0,
                                         "cache_creation_input_tokens": 0}})


class Forwarding(UsageTracker):
    def __init__(self) -> None:
        super().__init__(warn=False)
        self.forwarded: list[str] = []

    def add(self, record: UsageRecord) -> Any:
        self.forwarded.append("add")
        return super().add(record)

    async def aadd(self, record: UsageRecord) -> Any:
        self.forwarded.append("aadd")
        return await super().aadd(record)


def test_a_tracker_subclass_overriding_add_is_still_called() -> None:
    tracker = Forwarding()
    wrap(anthropic_client(_anthropic), tracker=tracker, lint="off").messages.create(**A_REQ)
    aclient = wrap(async_anthropic_client(_anthropic), tracker=tracker, lint="off")
    asyncio.run(aclient.messages.create(**A_REQ))
    assert tracker.forwarded == ["add", "aadd"]
    assert len(tracker.records) == 2


FILE_IMAGE = {"type": "image", "source": {"type": "file", "file_id": "file_abc"}}


def test_a_files_api_image_block_is_sent_as_given() -> None:
    b = PromptBuilder("claude-sonnet-4-6")
    b.system("Rules." + filler(1100, "r24"))
    b.history(user("Before:", dict(FILE_IMAGE)), {"role": "assistant", "content": "Seen."})
    b.turn("Now:", dict(FILE_IMAGE))
    msgs = b.to_anthropic(max_tokens=4)["messages"]
    for m in (msgs[0], msgs[-1]):
        [image] = [c for c in m["content"] if c["type"] == "image"]
        assert image["source"] == FILE_IMAGE["source"]


@pytest.fixture(scope="module")
def backend() -> Iterator[Any]:
    pytest.importorskip("torch")
    from promptcache.local.testing import SMALL_MODEL, LocalBackend

    with LocalBackend(mode="fast", pool_mb=4.0, **SMALL_MODEL) as b:
        yield b


def test_responses_takes_the_ultrafast_tier_chat_does_not(backend: Any) -> None:
    client = backend.openai()
    resp = client.responses.create(model="gpt-5", max_output_tokens=16, input="hi",
                                   service_tier="ultrafast")
    assert resp.service_tier == "ultrafast"
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(
            model="gpt-5", max_completion_tokens=1, messages=[{"role": "user", "content": "hi"}],
            extra_body={"service_tier": "ultrafast"})
    assert (exc.value.param, exc.value.code) == ("service_tier", "invalid_value")
