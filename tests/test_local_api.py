"""Acceptance: a 3-turn conversation under a 2,000-token system prompt, through the official
clients (sync, async, streaming; Anthropic and OpenAI) against the in-process local backend.

Expected numbers are computed here from the chat template's token spans (and, for OpenAI's
automatic caching, from the token-level common prefix and the 16-token block size), never from
promptcache.local.accounting: turn 1 writes, turns 2 and 3 read the system prompt and the earlier
turns, and every reported read was physically reused by the block cache.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import anyio
import openai
import pytest
from starlette.requests import ClientDisconnect

from promptcache.local.app import GenerationResponse, GenerationStream
from promptcache.local.template import TemplatedPrompt, apply_template
from promptcache.local.testing import SMALL_MODEL, LocalBackend
from tests.cases import filler

pytestmark = pytest.mark.local

SYSTEM = filler(2000, "local api system prompt")
EPH = {"type": "ephemeral"}
BLOCK = 16
TURNS = 3


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as b:
        yield b


def _user(i: int) -> str:
    return filler(60, f"user turn {i}")


def _assistant(i: int) -> str:
    return filler(40, f"assistant turn {i}")


# ---------------------------------------------------------------------------------- Anthropic
def anthropic_payload(turn: int, model: str = "claude-sonnet-5") -> dict[str, Any]:
    """Turn ``turn`` (1-based): the system prompt with a breakpoint, earlier turns, and the new
    user message with a breakpoint on its last block."""
    messages: list[dict[str, Any]] = []
    for i in range(1, turn):
        messages.append({"role": "user", "content": [{"type": "text", "text": _user(i)}]})
        messages.append({"role": "assistant", "content": _assistant(i)})
    messages.append(
        {"role": "user", "content": [{"type": "text", "text": _user(turn), "cache_control": EPH}]}
    )
    return {
        "model": model,
        "max_tokens": 4,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": EPH}],
        "messages": messages,
    }


def anthropic_expected(turn: int) -> dict[str, int]:
    prompt = apply_template(anthropic_payload(turn), "anthropic")
    assert prompt.span_of("system[0]").end >= 2000
    last = prompt.spans[-1].end  # the breakpoint on the new user message
    if turn == 1:
        read = 0
    else:
        # the previous request's last breakpoint (its user message), same tokens here
        previous = apply_template(anthropic_payload(turn - 1), "anthropic")
        read = previous.spans[-1].end
        path = f"messages[{2 * (turn - 2)}].content[0]"
        assert prompt.span_of(path).end == read  # append-stable template
        assert read > prompt.span_of("system[0]").end  # reads the system prompt AND turns
    write = last - read
    return {
        "input_tokens": prompt.total_tokens - last,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
        "ephemeral_5m_input_tokens": write,
        "ephemeral_1h_input_tokens": 0,
    }


def _anthropic_numbers(usage: Any) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "ephemeral_5m_input_tokens": usage.cache_creation.ephemeral_5m_input_tokens,
        "ephemeral_1h_input_tokens": usage.cache_creation.ephemeral_1h_input_tokens,
    }


def _no_violation(backend: LocalBackend) -> None:
    assert backend.metrics().get("promptcache_accounting_violations_total", 0) == 0


def test_anthropic_sync_three_turns(backend: LocalBackend) -> None:
    client = backend.anthropic(api_key="tenant-anthropic-sync")
    for turn in range(1, TURNS + 1):
        payload = anthropic_payload(turn)
        msg = client.messages.create(**payload)
        assert isinstance(msg, anthropic.types.Message)
        assert _anthropic_numbers(msg.usage) == anthropic_expected(turn), f"turn {turn}"
        assert msg.usage.output_tokens == 4 or msg.stop_reason == "end_turn"
        assert msg.role == "assistant" and msg.model == payload["model"]
    _no_violation(backend)


async def test_anthropic_async_three_turns(backend: LocalBackend) -> None:
    client = backend.async_anthropic(api_key="tenant-anthropic-async")
    for turn in range(1, TURNS + 1):
        msg = await client.messages.create(**anthropic_payload(turn))
        assert _anthropic_numbers(msg.usage) == anthropic_expected(turn), f"turn {turn}"
    await client.close()
    _no_violation(backend)


def test_anthropic_streaming_three_turns(backend: LocalBackend) -> None:
    client = backend.anthropic(api_key="tenant-anthropic-stream")
    for turn in range(1, TURNS + 1):
        expected = anthropic_expected(turn)
        with client.messages.stream(**anthropic_payload(turn)) as stream:
            events = list(stream)
            final = stream.get_final_message()
        kinds = [e.type for e in events if e.type != "text"]
        assert kinds[0] == "message_start" and kinds[1] == "content_block_start"
        assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
        start = next(e for e in events if e.type == "message_start")
        # input-side counts (with the TTL split) on message_start
        assert _anthropic_numbers(start.message.usage) == expected
        delta = next(e for e in events if e.type == "message_delta")
        # cumulative counts on message_delta
        assert delta.usage.input_tokens == expected["input_tokens"]
        assert delta.usage.cache_read_input_tokens == expected["cache_read_input_tokens"]
        assert delta.usage.cache_creation_input_tokens == expected["cache_creation_input_tokens"]
        assert delta.usage.output_tokens == final.usage.output_tokens
        assert _anthropic_numbers(final.usage) == expected
        text = "".join(e.text for e in events if e.type == "text")
        assert final.content and final.content[0].text == text  # type: ignore[union-attr]
    _no_violation(backend)


def test_anthropic_reads_were_not_recomputed(backend: LocalBackend) -> None:
    client = backend.anthropic(api_key="tenant-physical")
    before = backend.engine.metrics["reused_tokens_total"]  # type: ignore[union-attr]
    client.messages.create(**anthropic_payload(1))
    mid = backend.engine.metrics["reused_tokens_total"]  # type: ignore[union-attr]
    msg = client.messages.create(**anthropic_payload(2))
    after = backend.engine.metrics["reused_tokens_total"]  # type: ignore[union-attr]
    assert mid - before == 0  # a new tenant shares nothing
    assert after - mid >= msg.usage.cache_read_input_tokens > 0


# ---------------------------------------------------------------------------------- OpenAI chat
def chat_payload(turn: int, model: str = "gpt-4o") -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for i in range(1, turn):
        messages += [
            {"role": "user", "content": _user(i)},
            {"role": "assistant", "content": _assistant(i)},
        ]
    messages.append({"role": "user", "content": _user(turn)})
    return {"model": model, "messages": messages, "max_tokens": 4, "temperature": 0}


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def chat_expected(turn: int) -> dict[str, int]:
    """cached = 1024 + 128 * floor((M - 1024) / 128), M = the full 16-token blocks of the prompt
    shared with an earlier request (0 when below 1,024)."""
    prompt = apply_template(chat_payload(turn), "openai-chat")
    shared = 0
    for earlier in range(1, turn):
        prev = apply_template(chat_payload(earlier), "openai-chat")
        shared = max(shared, _common_prefix(prev.token_ids, prompt.token_ids))
    if turn > 1:
        # the earlier prompt is a prefix of this one (its generation header opens the
        # assistant turn), so the shared part covers the system prompt and the earlier turns
        assert shared == apply_template(chat_payload(turn - 1), "openai-chat").total_tokens
    reused = min(shared, prompt.total_tokens - 1) // BLOCK * BLOCK
    cached = 0 if reused < 1024 else 1024 + 128 * ((reused - 1024) // 128)
    return {"prompt_tokens": prompt.total_tokens, "cached_tokens": cached}


def _chat_numbers(usage: Any) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "cached_tokens": usage.prompt_tokens_details.cached_tokens,
    }


def test_openai_chat_sync_three_turns(backend: LocalBackend) -> None:
    client = backend.openai(api_key="tenant-chat-sync")
    for turn in range(1, TURNS + 1):
        resp = client.chat.completions.create(**chat_payload(turn))
        expected = chat_expected(turn)
        assert _chat_numbers(resp.usage) == expected, f"turn {turn}"
        assert (turn == 1) == (expected["cached_tokens"] == 0)
        assert resp.usage is not None
        assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
        assert resp.usage.prompt_tokens_details is not None
        assert resp.usage.prompt_tokens_details.cache_write_tokens is None  # no writes pre-5.6
        assert resp.choices[0].finish_reason in ("length", "stop")
    _no_violation(backend)


async def test_openai_chat_async_three_turns(backend: LocalBackend) -> None:
    client = backend.async_openai(api_key="tenant-chat-async")
    for turn in range(1, TURNS + 1):
        resp = await client.chat.completions.create(**chat_payload(turn))
        assert _chat_numbers(resp.usage) == chat_expected(turn), f"turn {turn}"
    await client.close()


def test_openai_chat_streaming_include_usage(backend: LocalBackend) -> None:
    client = backend.openai(api_key="tenant-chat-stream")
    for turn in range(1, TURNS + 1):
        chunks = list(
            client.chat.completions.create(
                **chat_payload(turn), stream=True, stream_options={"include_usage": True}
            )
        )
        *body, last = chunks
        assert last.choices == [] and last.usage is not None
        assert all(c.usage is None for c in body)
        assert _chat_numbers(last.usage) == chat_expected(turn), f"turn {turn}"
        assert body[0].choices[0].delta.role == "assistant"
        assert body[-1].choices[0].finish_reason in ("length", "stop")


# ---------------------------------------------------------------------------------- Responses
def responses_payload(turn: int, model: str = "gpt-5.6-sol") -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for i in range(1, turn):
        items += [
            {"role": "user", "content": _user(i)},
            {"role": "assistant", "content": _assistant(i)},
        ]
    items.append({"role": "user", "content": _user(turn)})
    return {"model": model, "instructions": SYSTEM, "input": items, "max_output_tokens": 4}


def responses_expected(turn: int) -> dict[str, int]:
    """GPT-5.6+: the implicit breakpoint on the newest message writes; the next turn reads the
    entry the previous turn wrote at its newest message (no lookback limit)."""
    prompt: TemplatedPrompt = apply_template(responses_payload(turn), "openai-responses")
    last = prompt.spans[-1].end
    read = 0
    if turn > 1:
        read = apply_template(responses_payload(turn - 1), "openai-responses").spans[-1].end
        assert prompt.span_of(f"input[{2 * (turn - 2)}].content").end == read
    return {
        "input_tokens": prompt.total_tokens,
        "cached_tokens": read,
        "cache_write_tokens": last - read,
    }


def _responses_numbers(usage: Any) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "cached_tokens": usage.input_tokens_details.cached_tokens,
        "cache_write_tokens": usage.input_tokens_details.cache_write_tokens,
    }


def test_openai_responses_three_turns_with_write_tokens(backend: LocalBackend) -> None:
    client = backend.openai(api_key="tenant-responses")
    for turn in range(1, TURNS + 1):
        resp = client.responses.create(**responses_payload(turn))
        assert resp.usage is not None
        assert _responses_numbers(resp.usage) == responses_expected(turn), f"turn {turn}"
        assert resp.usage.total_tokens == resp.usage.input_tokens + resp.usage.output_tokens
        assert resp.status in ("completed", "incomplete")
    _no_violation(backend)


def test_openai_responses_streaming(backend: LocalBackend) -> None:
    client = backend.openai(api_key="tenant-responses-stream")
    for turn in range(1, TURNS + 1):
        events = list(client.responses.create(**responses_payload(turn), stream=True))
        kinds = [e.type for e in events]
        assert kinds[0] == "response.created"
        assert [e.sequence_number for e in events] == list(range(len(events)))
        final = events[-1]
        # response.completed, or response.incomplete when max_output_tokens cut it short
        assert final.type in ("response.completed", "response.incomplete")
        assert final.response.usage is not None  # type: ignore[union-attr]
        assert _responses_numbers(final.response.usage) == responses_expected(turn)  # type: ignore[union-attr]
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        done = next(e for e in events if e.type == "response.output_text.done")
        assert done.text == text


async def test_openai_responses_async(backend: LocalBackend) -> None:
    client = backend.async_openai(api_key="tenant-responses-async")
    for turn in range(1, 3):
        resp = await client.responses.create(**responses_payload(turn))
        assert _responses_numbers(resp.usage) == responses_expected(turn)
    await client.close()


# ---------------------------------------------------------------------------------- others
def test_count_tokens_matches_the_prompt(backend: LocalBackend) -> None:
    client = backend.anthropic()
    payload = anthropic_payload(2)
    count = client.messages.count_tokens(
        model=payload["model"], system=payload["system"], messages=payload["messages"]
    )
    assert count.input_tokens == apply_template(payload, "anthropic").total_tokens


def test_models_list_parses_in_both_sdks(backend: LocalBackend) -> None:
    a_ids = [m.id for m in backend.anthropic().models.list()]
    o_ids = [m.id for m in backend.openai().models.list()]
    assert "claude-sonnet-5" in a_ids and "gpt-4o" not in a_ids
    assert "gpt-4o" in o_ids and "claude-sonnet-5" not in o_ids
    assert backend.openai().models.retrieve("gpt-4o").id == "gpt-4o"


def test_metrics_endpoint_is_prometheus_text(backend: LocalBackend) -> None:
    backend.anthropic(api_key="tenant-metrics").messages.create(**anthropic_payload(1))
    response = backend.http_client().get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    lines = response.text.splitlines()
    assert "# TYPE promptcache_cache_write_tokens_total counter" in lines
    assert any(line.startswith("promptcache_engine_prefix_cache_hits ") for line in lines)
    values = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in lines
        if line and not line.startswith("#")
    }
    assert values["promptcache_cache_write_tokens_total"] > 0
    assert values["promptcache_accounting_violations_total"] == 0


def test_raw_message_json_shape(backend: LocalBackend) -> None:
    response = backend.http_client().post(
        "/v1/messages",
        headers={"x-api-key": "raw", "anthropic-version": "2023-06-01"},
        content=json.dumps(anthropic_payload(1)),
    )
    body = response.json()
    assert response.status_code == 200
    assert set(body["usage"]) >= {
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "cache_creation",
        "output_tokens",
    }
    anthropic.types.Message.model_validate(body)
    openai_usage = backend.openai(api_key="raw").chat.completions.create(**chat_payload(1)).usage
    assert openai_usage is not None
    assert isinstance(openai_usage, openai.types.CompletionUsage)


# ---------------------------------------------------------------------------------- GPT-5.6+
def gpt56_payload(turn: int, *, explicit_system: bool) -> dict[str, Any]:
    payload = chat_payload(turn, model="gpt-5.6-sol")
    part: dict[str, Any] = {"type": "text", "text": SYSTEM}
    if explicit_system:
        part["prompt_cache_breakpoint"] = {"mode": "explicit"}
    payload["messages"][0] = {"role": "system", "content": [part]}
    return payload


def _chat_cache(usage: Any) -> tuple[int, int, int | None]:
    details = usage.prompt_tokens_details
    return usage.prompt_tokens, details.cached_tokens, details.cache_write_tokens


def test_gpt56_chat_implicit_and_explicit_breakpoints(backend: LocalBackend) -> None:
    client = backend.openai(api_key="tenant-gpt56-implicit")
    previous_end = 0
    for turn in range(1, TURNS + 1):
        payload = gpt56_payload(turn, explicit_system=True)
        prompt = apply_template(payload, "openai-chat")
        last = prompt.spans[-1].end  # the implicit breakpoint: the newest message
        usage = client.chat.completions.create(**payload).usage
        assert _chat_cache(usage) == (prompt.total_tokens, previous_end, last - previous_end)
        previous_end = last


def test_gpt56_explicit_mode(backend: LocalBackend) -> None:
    # explicit mode with no breakpoint: no caching at all, no write charge
    off = backend.openai(api_key="tenant-gpt56-off")
    for _ in range(2):
        payload = gpt56_payload(1, explicit_system=False)
        usage = off.chat.completions.create(
            **payload, prompt_cache_options={"mode": "explicit"}
        ).usage
        assert _chat_cache(usage)[1:] == (0, 0)
    # explicit mode, breakpoint on the system part: only that prefix is written, then read
    on = backend.openai(api_key="tenant-gpt56-explicit")
    sys_end = apply_template(gpt56_payload(1, explicit_system=True), "openai-chat").spans[0].end
    for turn, expected in ((1, (0, sys_end)), (2, (sys_end, 0)), (3, (sys_end, 0))):
        payload = gpt56_payload(turn, explicit_system=True)
        usage = on.chat.completions.create(
            **payload, prompt_cache_options={"mode": "explicit"}
        ).usage
        assert _chat_cache(usage)[1:] == expected, f"turn {turn}"


def test_a_cached_block_is_read_when_it_comes_back_as_a_whole_message(
    backend: LocalBackend,
) -> None:
    # The builder's pattern: the stable question carries the breakpoint and a volatile tail
    # follows in the same message; the next turn replays only the question as history. The
    # hosted API caches block by block, so the prefix through the question is read.
    client = backend.anthropic(api_key="tenant-whole-message")
    system = [{"type": "text", "text": SYSTEM, "cache_control": EPH}]
    question = "Which plants need repotting this spring? " * 20
    first = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=1, system=system,
        messages=[{"role": "user", "content": [
            {"type": "text", "text": question, "cache_control": EPH},
            {"type": "text", "text": "Now: 2026-11-29T23:10:00Z"}]}])
    written = first.usage.cache_creation_input_tokens + first.usage.cache_read_input_tokens
    second = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=1, system=system,
        messages=[{"role": "user", "content": question},
                  {"role": "assistant", "content": "The ferns."},
                  {"role": "user", "content": [
                      {"type": "text", "text": "And the palms?", "cache_control": EPH}]}])
    prompt = apply_template({"model": "claude-sonnet-4-6", "max_tokens": 1, "system": system,
                             "messages": [{"role": "user", "content": question}]}, "anthropic")
    through_question = prompt.span_of("messages[0].content").end
    assert written == through_question
    assert second.usage.cache_read_input_tokens == through_question


# ---------------------------------------------------------------------------------- aborted streams
# A client that leaves a stream early (break + close()) must be counted like any other request:
# its prefill ran and wrote cache entries, so /metrics counts the request, its prompt, its cache
# read and write, and the output tokens the engine actually generated (the engine stops decoding
# once the SSE body is closed, so that is far fewer than max_tokens). Every counter that counts
# output agrees, and a stream read to the end is still counted exactly once.
ABORT_MAX_TOKENS = 256
_COUNTERS = (
    "promptcache_prompt_tokens_total",
    "promptcache_cache_read_tokens_total",
    "promptcache_cache_write_tokens_total",
    "promptcache_output_tokens_total",
    "promptcache_reused_tokens_total",
    "promptcache_computed_tokens_total",
    "engine.prompt_tokens_total",
    "engine.generated_tokens_total",
    "engine.requests_total",
)


@pytest.fixture
def fresh() -> Iterator[LocalBackend]:
    """A backend of its own, so the metric deltas below are this test's requests only."""
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as b:
        yield b


@pytest.fixture
def results(fresh: LocalBackend, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The engine's GenerationResult of every request ``fresh`` runs, in order: shows whether
    a generation ended because it was cancelled (``stop_reason == "cancelled"``)."""
    seen: list[Any] = []
    generate = fresh.engine.generate

    def spy(*args: Any, **kwargs: Any) -> Any:
        res = generate(*args, **kwargs)
        seen.append(res)
        return res

    monkeypatch.setattr(fresh.engine, "generate", spy)
    return seen


def _assert_cancelled(results: list[Any], output: float) -> None:
    """The read-to-the-end request ran to its end; the aborted one was cancelled by the engine
    (``should_stop``), not stopped by itself, after generating what /metrics counts."""
    assert len(results) == 2
    assert results[0].stop_reason != "cancelled"
    assert results[1].stop_reason == "cancelled"
    assert len(results[1].output_ids) == output < ABORT_MAX_TOKENS


def _snapshot(backend: LocalBackend, endpoint: str) -> dict[str, float]:
    m = backend.metrics()
    out = {k: m.get(k, 0.0) for k in _COUNTERS}
    out["requests"] = m.get(f'promptcache_requests_total{{endpoint="{endpoint}",status="200"}}', 0)
    return out


def _delta_after_one(backend: LocalBackend, endpoint: str, before: dict[str, float]) -> Any:
    """The counters' change once the request's generation has finished (its worker may still be
    running the last decode step when close() returns)."""
    deadline = time.monotonic() + 60
    while True:
        now = _snapshot(backend, endpoint)
        if now["promptcache_output_tokens_total"] > before["promptcache_output_tokens_total"]:
            break
        assert time.monotonic() < deadline, "the aborted generation was never counted"
        time.sleep(0.05)
    time.sleep(0.2)  # nothing else may arrive: a second record would show up here
    return {k: _snapshot(backend, endpoint)[k] - before[k] for k in before}


def _assert_counted_once(
    d: dict[str, float], *, prompt: int, read: int, write: int, output: int | None = None
) -> None:
    assert d["requests"] == 1 and d["engine.requests_total"] == 1
    assert d["promptcache_prompt_tokens_total"] == prompt == d["engine.prompt_tokens_total"]
    assert d["promptcache_cache_read_tokens_total"] == read
    assert d["promptcache_cache_write_tokens_total"] == write
    assert d["promptcache_reused_tokens_total"] + d["promptcache_computed_tokens_total"] == prompt
    assert d["promptcache_reused_tokens_total"] >= read  # a reported read was really reused
    assert d["promptcache_output_tokens_total"] == d["engine.generated_tokens_total"] >= 1
    if output is not None:
        assert d["promptcache_output_tokens_total"] == output


def test_aborted_anthropic_stream_is_counted_once(
    fresh: LocalBackend, results: list[Any]
) -> None:
    client = fresh.anthropic(api_key="tenant-abort-anthropic")
    endpoint = "/v1/messages"
    # turn 1, read to the end: counted once, with what the client saw
    before = _snapshot(fresh, endpoint)
    with client.messages.stream(**anthropic_payload(1)) as stream:
        final = stream.get_final_message()
    exp = anthropic_expected(1)
    _assert_counted_once(
        _delta_after_one(fresh, endpoint, before),
        prompt=apply_template(anthropic_payload(1), "anthropic").total_tokens,
        read=exp["cache_read_input_tokens"],
        write=exp["cache_creation_input_tokens"],
        output=final.usage.output_tokens,
    )
    # turn 2 reads turn 1's entry; the client leaves after the first text delta
    payload = {**anthropic_payload(2), "max_tokens": ABORT_MAX_TOKENS}
    before = _snapshot(fresh, endpoint)
    events = client.messages.create(**payload, stream=True)
    start: Any = None
    for event in events:
        if event.type == "message_start":
            start = event
        if event.type == "content_block_delta":
            break
    events.close()
    d = _delta_after_one(fresh, endpoint, before)
    exp = anthropic_expected(2)
    assert exp["cache_read_input_tokens"] > 0
    assert _anthropic_numbers(start.message.usage) == exp  # what the client saw ...
    _assert_counted_once(  # ... is what /metrics counts
        d,
        prompt=apply_template(payload, "anthropic").total_tokens,
        read=exp["cache_read_input_tokens"],
        write=exp["cache_creation_input_tokens"],
    )
    _assert_cancelled(results, d["promptcache_output_tokens_total"])  # decoding stopped early
    _no_violation(fresh)


def test_aborted_chat_stream_is_counted_once(
    fresh: LocalBackend, results: list[Any]
) -> None:
    client = fresh.openai(api_key="tenant-abort-chat")
    endpoint = "/v1/chat/completions"
    before = _snapshot(fresh, endpoint)
    chunks = list(
        client.chat.completions.create(
            **chat_payload(1), stream=True, stream_options={"include_usage": True}
        )
    )
    usage = chunks[-1].usage
    assert usage is not None
    _assert_counted_once(
        _delta_after_one(fresh, endpoint, before),
        prompt=chat_expected(1)["prompt_tokens"],
        read=0,
        write=0,  # automatic caching (gpt-4o) reports no writes
        output=usage.completion_tokens,
    )
    payload = {**chat_payload(2), "max_tokens": ABORT_MAX_TOKENS}
    before = _snapshot(fresh, endpoint)
    stream = client.chat.completions.create(
        **payload, stream=True, stream_options={"include_usage": True}
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    stream.close()
    d = _delta_after_one(fresh, endpoint, before)
    exp = chat_expected(2)
    assert exp["cached_tokens"] > 0
    _assert_counted_once(d, prompt=exp["prompt_tokens"], read=exp["cached_tokens"], write=0)
    _assert_cancelled(results, d["promptcache_output_tokens_total"])


def test_aborted_responses_stream_is_counted_once(
    fresh: LocalBackend, results: list[Any]
) -> None:
    client = fresh.openai(api_key="tenant-abort-responses")
    endpoint = "/v1/responses"
    before = _snapshot(fresh, endpoint)
    events = list(client.responses.create(**responses_payload(1), stream=True))
    final: Any = events[-1].response  # type: ignore[union-attr]
    exp = responses_expected(1)
    _assert_counted_once(
        _delta_after_one(fresh, endpoint, before),
        prompt=exp["input_tokens"],
        read=exp["cached_tokens"],
        write=exp["cache_write_tokens"],
        output=final.usage.output_tokens,
    )
    payload = {**responses_payload(2), "max_output_tokens": ABORT_MAX_TOKENS}
    before = _snapshot(fresh, endpoint)
    stream = client.responses.create(**payload, stream=True)
    for event in stream:
        if event.type == "response.output_text.delta":
            break
    stream.close()
    d = _delta_after_one(fresh, endpoint, before)
    exp = responses_expected(2)
    assert exp["cached_tokens"] > 0
    _assert_counted_once(
        d, prompt=exp["input_tokens"], read=exp["cached_tokens"], write=exp["cache_write_tokens"]
    )
    _assert_cancelled(results, d["promptcache_output_tokens_total"])
    _no_violation(fresh)


def test_engine_stops_decoding_when_asked(fresh: LocalBackend) -> None:
    engine: Any = fresh.engine
    tokens = list(apply_template(anthropic_payload(1), "anthropic").token_ids)
    ref = engine.generate(tokens, max_tokens=8)
    # the (seeded, greedy) tiny model generates all 8 tokens: no EOS ends the run first
    assert ref.stop_reason == "max_tokens" and len(ref.output_ids) == 8
    before = engine.metrics["generated_tokens_total"]
    seen: list[int] = []
    res = engine.generate(
        tokens, max_tokens=8, on_token=seen.append, should_stop=lambda: len(seen) >= 3
    )
    assert res.stop_reason == "cancelled"
    assert res.output_ids == seen == ref.output_ids[:3]
    assert engine.metrics["generated_tokens_total"] - before == 3
    assert res.reused_tokens > 0  # the prompt's blocks were committed as usual


# A client that leaves before the first token (while its request waits for the engine lock or
# for its prefill) is not seen by the route handler, which servers do not cancel: the handler's
# disconnect watcher (app.first_event) cancels the generation, so it stops after one token.
def _asgi_request(path: str, api_key: str) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"testserver"),
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {api_key}".encode()),
            (b"x-api-key", api_key.encode()),
            (b"anthropic-version", b"2023-06-01"),
        ],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
    }


async def _leave_while_waiting(
    backend: LocalBackend, path: str, payload: dict[str, Any]
) -> list[dict[str, Any]]:
    """Send ``payload`` while the engine is busy (its lock held), disconnect, then free the
    engine; return what the app sent."""
    body = json.dumps(payload).encode()
    left = anyio.Event()
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    lock = backend.service.lock
    lock.acquire()  # another request is running: this one waits for the engine
    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                scope = _asgi_request(path, "tenant-leave")
                tg.start_soon(backend.app, scope, receive, send)
                await anyio.sleep(0.3)  # the request is parsed and its worker waits for the lock
                left.set()  # the client leaves before the first token
                await anyio.sleep(0.3)
                lock.release()
                lock = None
    finally:
        if lock is not None:
            lock.release()
    return sent


@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/v1/messages", {**anthropic_payload(1), "max_tokens": ABORT_MAX_TOKENS, "stream": True}),
        (
            "/v1/chat/completions",
            {**chat_payload(1), "max_tokens": ABORT_MAX_TOKENS, "stream": True},
        ),
        (
            "/v1/responses",
            {**responses_payload(1), "max_output_tokens": ABORT_MAX_TOKENS, "stream": True},
        ),
    ],
)
def test_a_client_that_leaves_before_the_first_token_stops_decoding(
    fresh: LocalBackend, results: list[Any], path: str, payload: dict[str, Any]
) -> None:
    anyio.run(_leave_while_waiting, fresh, path, payload)
    deadline = time.monotonic() + 60  # the worker may still be counting when the app returns
    while fresh.metrics().get("promptcache_output_tokens_total", 0) == 0:
        assert time.monotonic() < deadline, "the generation was never counted"
        time.sleep(0.05)
    assert len(results) == 1
    assert results[0].stop_reason == "cancelled"
    assert len(results[0].output_ids) == 1  # the token sampled from the prefill's logits
    m = fresh.metrics()  # counted once, like any other generation
    assert m["engine.requests_total"] == 1
    assert m["promptcache_output_tokens_total"] == m["engine.generated_tokens_total"] == 1
    assert m["promptcache_prompt_tokens_total"] == results[0].prompt_tokens
    _no_violation(fresh)


def test_a_response_never_started_still_cancels_its_generation() -> None:
    # The client leaves between the handler's return and the body's first chunk: sending the
    # headers fails, the body generator never runs (so its own finally never would), and the
    # response still cancels the generation.
    started = False

    async def body() -> Any:
        nonlocal started
        started = True
        yield b"data: {}\n\n"

    async def receive() -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        raise OSError("client gone")

    stream = GenerationStream()
    response = GenerationResponse(body(), stream)
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}}
    with pytest.raises(ClientDisconnect):  # what starlette makes of the OSError
        anyio.run(response, scope, receive, send)
    assert not started and stream._cancel.is_set()


# Sixth session (newuser7 bug 1): a non-streamed request whose client leaves is cancelled too,
# so a client timeout frees the engine instead of decoding to max_tokens.
@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/v1/messages", {**anthropic_payload(1), "max_tokens": ABORT_MAX_TOKENS}),
        ("/v1/chat/completions", {**chat_payload(1), "max_tokens": ABORT_MAX_TOKENS}),
        ("/v1/responses", {**responses_payload(1), "max_output_tokens": ABORT_MAX_TOKENS}),
    ],
)
def test_a_non_streamed_request_whose_client_leaves_stops_decoding(
    fresh: LocalBackend, results: list[Any], path: str, payload: dict[str, Any]
) -> None:
    assert "stream" not in payload
    anyio.run(_leave_while_waiting, fresh, path, payload)
    deadline = time.monotonic() + 60
    while fresh.metrics().get("promptcache_output_tokens_total", 0) == 0:
        assert time.monotonic() < deadline, "the generation was never counted"
        time.sleep(0.05)
    assert len(results) == 1
    assert results[0].stop_reason == "cancelled"
    assert len(results[0].output_ids) == 1
    m = fresh.metrics()
    assert m["engine.requests_total"] == 1
    assert m["promptcache_output_tokens_total"] == m["engine.generated_tokens_total"] == 1
    _no_violation(fresh)


@pytest.mark.timeout(120)  # the old backend decoded a 1e9-token request for hours
def test_max_tokens_beyond_the_local_context_is_a_400_up_front(backend: LocalBackend) -> None:
    huge = 10**9
    before = backend.metrics().get("engine.requests_total", 0)
    with pytest.raises(anthropic.BadRequestError) as a_err:
        backend.anthropic().messages.create(
            **{**anthropic_payload(1), "max_tokens": huge}, timeout=60  # the SDK wants a timeout
        )
    assert a_err.value.status_code == 400
    assert "exceed context limit" in str(a_err.value) and "> 32768" in str(a_err.value)
    assert "local" in str(a_err.value)  # the message says the bound is the local model's
    client = backend.openai()
    with pytest.raises(openai.BadRequestError) as c_err:
        client.chat.completions.create(**{**chat_payload(1), "max_completion_tokens": huge})
    body = c_err.value.body
    assert isinstance(body, dict)
    assert body["code"] == "context_length_exceeded" and body["param"] == "max_completion_tokens"
    with pytest.raises(openai.BadRequestError) as r_err:
        client.responses.create(**{**responses_payload(1), "max_output_tokens": huge})
    assert isinstance(r_err.value.body, dict)
    assert r_err.value.body["param"] == "max_output_tokens"
    assert backend.metrics().get("engine.requests_total", 0) == before  # nothing ran
    # the bound is prompt + max_tokens: one token over the context is rejected too
    prompt = backend.anthropic().messages.count_tokens(
        **{k: v for k, v in anthropic_payload(1).items() if k != "max_tokens"}
    ).input_tokens
    with pytest.raises(anthropic.BadRequestError, match=rf"{prompt} \+ {32768 - prompt + 1} > "):
        backend.anthropic().messages.create(
            **{**anthropic_payload(1), "max_tokens": 32768 - prompt + 1}, timeout=60
        )
    with pytest.raises(openai.BadRequestError) as c_err:
        client.chat.completions.create(**{**chat_payload(1), "max_tokens": 32768})
    assert isinstance(c_err.value.body, dict) and c_err.value.body["param"] == "messages"


def test_an_unset_max_uses_what_the_context_leaves() -> None:
    """Review 7: with no max tokens set, the OpenAI routes filled in the server's default (64)
    and refused a prompt within 64 tokens of the context, saying the client "requested 64 in
    the completion". As the API, an unset max is bounded by the room the prompt leaves; only a
    prompt that fills the context is refused (Responses: "in the input")."""
    with LocalBackend(**SMALL_MODEL, max_positions=2048) as small:
        assert small.service.context_tokens == 2048
        http = small.http_client()
        auth = {"authorization": "Bearer k"}

        def prompt_of(words: int) -> str:
            return "hello " * words

        def tokens(text: str) -> int:
            r = http.post("/v1/chat/completions", headers=auth, json={
                "model": "gpt-4o", "max_completion_tokens": 1,
                "messages": [{"role": "user", "content": text}]})
            assert r.status_code == 200, r.text
            return int(r.json()["usage"]["prompt_tokens"])

        near = prompt_of(2000)
        used = tokens(near)
        assert 2048 - 64 < used < 2048  # within the old default of the context
        r = http.post("/v1/chat/completions", headers=auth, json={
            "model": "gpt-4o", "messages": [{"role": "user", "content": near}]})
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] <= 2048 - used
        full = http.post("/v1/responses", headers=auth, json={
            "model": "gpt-4o", "input": prompt_of(2100)})
        assert full.status_code == 400
        err = full.json()["error"]
        assert err["code"] == "context_length_exceeded" and err["param"] == "input"
        assert "in the input" in err["message"]
