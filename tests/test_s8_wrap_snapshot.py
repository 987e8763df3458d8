"""The wrapper keeps what it sent, not the caller's live objects (new-user trial 13, F7).

An agent loop appends to one ``messages`` list and sometimes edits it in place. The wrapper
kept references: ``sent_requests()`` showed every request with the final list, the live diff
compared two identical bodies ("identical payloads ... provider side") for a real history edit,
and ``assert_cache_stable`` passed. Against the in-process local backend.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from promptcache.local.testing import SMALL_MODEL, LocalBackend
from promptcache.sdk import assert_cache_stable, sent_requests, wrap
from promptcache.usage import UsageTracker
from tests.cases import filler

SYSTEM = filler(1300, 4)


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as b:
        yield b


def _send(client: Any, provider: str, msgs: list[dict[str, Any]]) -> None:
    if provider == "openai":
        client.chat.completions.create(model="gpt-4o", max_tokens=2, messages=msgs)
    else:
        client.messages.create(model="claude-sonnet-4-6", max_tokens=2, system=SYSTEM,
                               messages=msgs, cache_control={"type": "ephemeral"})


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_in_place_history_edit_is_seen_as_one(backend: LocalBackend, provider: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    client = wrap(getattr(backend, provider)(), tracker=UsageTracker(), lint="off",
                  session="s")
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "task " + filler(40, 2)}]
    if provider == "openai":
        msgs.insert(0, {"role": "system", "content": SYSTEM})
    first_user = msgs[-1]
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        for step in range(3):
            if step == 2:  # the loop rewrites its first user message in place
                first_user["content"] = "task EDITED " + filler(40, 2)
            _send(client, provider, msgs)
            msgs += [{"role": "assistant", "content": "ok"},
                     {"role": "user", "content": f"more {step} " + filler(30, step)}]
    sent = sent_requests(client)
    assert [len(s.payload["messages"]) for s in sent] == [len(msgs) - 6 + 2 * i
                                                          for i in range(3)]
    assert "EDITED" not in str(sent[1].payload["messages"])  # as sent, not as edited later
    breaks = [r.getMessage() for r in caplog.records if "diverges" in r.getMessage()]
    assert len(breaks) == 1 and "message_rewritten" in breaks[0], breaks
    with pytest.raises(AssertionError, match="message_rewritten"):
        assert_cache_stable(client)


def test_clearing_an_old_tool_result_in_place_is_seen(backend: LocalBackend,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """Review 13: the snapshot stopped one level short of a tool_result's own blocks; an
    agent clearing an old tool output in place rewrote the kept request, and the live diff
    said "append_only, 0 lost" (the backend read nothing after the edit)."""
    client = wrap(backend.anthropic(), tracker=UsageTracker(), lint="off", session="s")
    inner = {"type": "text", "text": "big tool output " + filler(200, 3)}
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [inner]}]}]
    kw: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 2, "system": SYSTEM,
                          "cache_control": {"type": "ephemeral"}}
    client.messages.create(messages=msgs, **kw)
    inner["text"] = "[cleared]"  # context management: an old tool output cleared in place
    msgs += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        client.messages.create(messages=msgs, **kw)
    first = sent_requests(client)[0].payload["messages"][2]["content"][0]["content"][0]
    assert first["text"].startswith("big tool output")
    [brk] = [r.getMessage() for r in caplog.records if "diverges" in r.getMessage()]
    assert "append_only" not in brk and "message_rewritten" in brk, brk
