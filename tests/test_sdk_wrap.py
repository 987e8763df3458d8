"""wrap(): the real anthropic / openai clients over httpx2.MockTransport (no SDK patching).

Each test builds the official client with ``http_client=httpx2.Client(transport=
httpx2.MockTransport(handler))`` (anthropic 2.x / openai 3.x use httpx2), where ``handler``
returns canned API JSON or SSE and records the request bodies it received.
"""

from __future__ import annotations

import json
import logging
import threading
import warnings
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import anthropic
import httpx2
import openai
import pydantic
import pytest

from promptcache import PromptCacheLintError
from promptcache.sdk import (
    PromptCacheWarning,
    assert_cache_stable,
    awarm_then_fanout,
    is_wrapped,
    keepalive,
    sent_requests,
    tracker_of,
    unwrap,
    warm_then_fanout,
    wrap,
)
from promptcache.usage import JsonlSink, MemorySink, UsageRecord, UsageTracker
from promptcache.usage.parse import INCOMPLETE_ANTHROPIC_FLAG
from tests._mockapi import (
    anthropic_client,
    async_anthropic_client,
    async_openai_client,
    openai_client,
)

SYSTEM = "You are a careful assistant for a plant nursery. " * 120
MODEL = "claude-sonnet-4-6"
OA_MODEL = "gpt-4o"

A_USAGE = {"input_tokens": 11, "cache_read_input_tokens": 1400,
           "cache_creation_input_tokens": 100,
           "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 0},
           "output_tokens": 5}
OA_USAGE = {"prompt_tokens": 1500, "completion_tokens": 5, "total_tokens": 1505,
            "prompt_tokens_details": {"cached_tokens": 1408}}


# ---------------------------------------------------------------------------- canned API
def _message(usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "msg_01", "type": "message", "role": "assistant", "model": MODEL,
            "content": [{"type": "text", "text": "Water twice a week."}],
            "stop_reason": "end_turn", "stop_sequence": None, "usage": usage or A_USAGE}


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        body = data if isinstance(data, str) else json.dumps(data)
        out.append(f"{head}data: {body}\n\n")
    return "".join(out).encode()


def _anthropic_sse() -> bytes:
    start = _message({**A_USAGE, "output_tokens": 1})
    start["content"] = []
    start["stop_reason"] = None
    return _sse([
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Water twice"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": " a week."}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ])


def _completion() -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": OA_MODEL,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Twice a week."}}],
            "usage": OA_USAGE}


def _chat_sse(include_usage: bool) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                "model": OA_MODEL, "choices": [{"index": 0, "delta": delta,
                                                "finish_reason": finish}]}
    events: list[tuple[str | None, Any]] = [
        (None, chunk({"role": "assistant", "content": ""})),
        (None, chunk({"content": "Twice"})),
        (None, chunk({"content": " a week."})),
        (None, chunk({}, "stop")),
    ]
    if include_usage:
        events.append((None, {"id": "chatcmpl-1", "object": "chat.completion.chunk",
                              "created": 1, "model": OA_MODEL, "choices": [],
                              "usage": OA_USAGE}))
    events.append((None, "[DONE]"))
    return _sse(events)


def _response() -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "created_at": 1, "model": OA_MODEL,
            "status": "completed", "output": [], "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 1500, "input_tokens_details": {"cached_tokens": 1408},
                      "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 1505}}


ANSWER = '{"answer": "Twice a week."}'  # a structured-output answer (parse helpers)


def _structured_response() -> dict[str, Any]:
    out = _response()
    out["output"] = [{"type": "message", "id": "msg_1", "role": "assistant",
                      "status": "completed",
                      "content": [{"type": "output_text", "text": ANSWER, "annotations": []}]}]
    return out


def _responses_sse() -> bytes:
    created = {**_response(), "status": "in_progress", "usage": None}
    return _sse([
        ("response.created", {"type": "response.created", "sequence_number": 0,
                              "response": created}),
        ("response.in_progress", {"type": "response.in_progress", "sequence_number": 1,
                                  "response": created}),
        ("response.completed", {"type": "response.completed", "sequence_number": 2,
                                "response": _response()}),
    ])


class Api:
    """A MockTransport handler speaking both providers; keeps every request body it got.

    A request asking for structured output (Anthropic ``output_config.format``, OpenAI
    ``response_format`` / ``text.format``) gets :data:`ANSWER` as its text; ``finish`` sets the
    chat completions' finish reason.
    """

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.fail_with: tuple[int, dict[str, Any]] | None = None
        self.finish = "stop"

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        self.bodies.append(body)
        if self.fail_with is not None:
            return httpx2.Response(self.fail_with[0], json=self.fail_with[1])
        path = request.url.path
        sse = {"content-type": "text/event-stream"}
        if path.endswith("/v1/messages"):
            if body.get("stream"):
                return httpx2.Response(200, content=_anthropic_sse(), headers=sse)
            msg = _message()
            if (body.get("output_config") or {}).get("format"):
                msg["content"] = [{"type": "text", "text": ANSWER}]
            return httpx2.Response(200, json=msg)
        if path.endswith("/chat/completions"):
            if body.get("stream"):
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return httpx2.Response(200, content=_chat_sse(usage), headers=sse)
            completion = _completion()
            choice = completion["choices"][0]
            choice["finish_reason"] = self.finish
            if body.get("response_format"):
                choice["message"]["content"] = ANSWER
            return httpx2.Response(200, json=completion)
        if path.endswith("/responses"):
            if body.get("stream"):
                return httpx2.Response(200, content=_responses_sse(), headers=sse)
            if (body.get("text") or {}).get("format"):
                return httpx2.Response(200, json=_structured_response())
            return httpx2.Response(200, json=_response())
        return httpx2.Response(404, json={"error": {"message": "not found"}})


@pytest.fixture
def api() -> Api:
    return Api()


@pytest.fixture
def raw_anthropic(api: Api) -> anthropic.Anthropic:
    return anthropic_client(api)


@pytest.fixture
def raw_openai(api: Api) -> openai.OpenAI:
    return openai_client(api)


@pytest.fixture
def async_anthropic(api: Api) -> anthropic.AsyncAnthropic:
    return async_anthropic_client(api)


@pytest.fixture
def async_openai(api: Api) -> openai.AsyncOpenAI:
    return async_openai_client(api)


@pytest.fixture(autouse=True)
def _quiet_expected_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the SDK's model deprecation notice
        warnings.simplefilter("ignore", PromptCacheWarning)
        yield


def a_request(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 64,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "How often do I water a fern?"}], **extra}


def oa_request(**extra: Any) -> dict[str, Any]:
    return {"model": OA_MODEL, "max_tokens": 64,
            "messages": [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": "How often do I water a fern?"}], **extra}


def counts(rec: UsageRecord) -> dict[str, Any]:
    """A record without its timing / id fields (what must match between stream and not)."""
    return rec.model_dump(exclude={"start", "end", "first_token", "request_id"})


# ---------------------------------------------------------------------------- transparency
def test_wrapped_client_is_the_client(raw_anthropic: anthropic.Anthropic) -> None:
    client = wrap(raw_anthropic, label="x")
    assert isinstance(client, anthropic.Anthropic)
    assert is_wrapped(client) and not is_wrapped(raw_anthropic)
    assert unwrap(client) is raw_anthropic
    assert client.api_key == "k" and str(client.base_url).startswith("http://api.test")
    assert client.messages.batches is raw_anthropic.messages.batches  # unobserved: passed through
    other = client.with_options(timeout=5.0)
    assert is_wrapped(other) and isinstance(other, anthropic.Anthropic)
    assert tracker_of(other) is tracker_of(client)


def test_wrap_rejects_other_objects() -> None:
    with pytest.raises(TypeError, match=r"anthropic\.Anthropic"):
        wrap(object())
    with pytest.raises(ValueError, match="lint"):
        wrap(anthropic.Anthropic(api_key="k"), lint="loud")  # type: ignore[arg-type]


def test_anthropic_response_unchanged_and_usage_tracked(api: Api,
                                                        raw_anthropic: anthropic.Anthropic
                                                        ) -> None:
    tracker = UsageTracker()
    client = wrap(raw_anthropic, tracker=tracker, label="default", lint="off")
    msg = client.messages.create(**a_request(), promptcache_label="faq",
                                 promptcache_session="s1")
    plain = raw_anthropic.messages.create(**a_request())
    assert type(msg) is anthropic.types.Message
    assert msg.model_dump() == plain.model_dump()
    assert api.bodies[0] == api.bodies[1]  # the overrides never reach the API
    assert "promptcache_label" not in api.bodies[0]
    [rec] = tracker.records
    assert (rec.label, rec.session, rec.provider, rec.model) == ("faq", "s1", "anthropic", MODEL)
    assert (rec.uncached_input, rec.cache_read, rec.cache_write, rec.output) == (11, 1400, 100, 5)
    assert rec.request_id is None or isinstance(rec.request_id, str)
    assert rec.start is not None and rec.end is not None and rec.start <= rec.end


def test_api_errors_propagate_unchanged(api: Api, raw_anthropic: anthropic.Anthropic) -> None:
    api.fail_with = (400, {"type": "error", "error": {"type": "invalid_request_error",
                                                      "message": "bad"}})
    client = wrap(raw_anthropic, lint="off")
    with pytest.raises(anthropic.BadRequestError) as wrapped_err:
        client.messages.create(**a_request())
    with pytest.raises(anthropic.BadRequestError) as plain_err:
        raw_anthropic.messages.create(**a_request())
    assert type(wrapped_err.value) is type(plain_err.value)
    assert wrapped_err.value.body == plain_err.value.body
    assert tracker_of(client).records == []


# ---------------------------------------------------------------------------- streams
def test_raw_stream_yields_the_sdk_events_and_records_usage(
        raw_anthropic: anthropic.Anthropic) -> None:
    client = wrap(raw_anthropic, lint="off")
    stream = client.messages.create(**a_request(), stream=True)
    assert isinstance(stream, anthropic.Stream)
    events = [e.model_dump() for e in stream]
    plain = [e.model_dump() for e in raw_anthropic.messages.create(**a_request(), stream=True)]
    assert events == plain
    client.messages.create(**a_request())
    streamed, non_streamed = tracker_of(client).records
    assert counts(streamed) == counts(non_streamed)  # issue 7: stream == non-stream
    assert streamed.first_token is not None


def test_early_break_records_what_was_seen(raw_anthropic: anthropic.Anthropic) -> None:
    client = wrap(raw_anthropic, lint="off")
    for event in client.messages.create(**a_request(), stream=True):
        if event.type == "content_block_delta":
            break
    [rec] = tracker_of(client).records
    assert (rec.cache_read, rec.cache_write, rec.uncached_input) == (1400, 100, 11)
    # only message_start's placeholder count had arrived: the output is unknown (review 15 F6)
    assert rec.output is None and INCOMPLETE_ANTHROPIC_FLAG in rec.flags


def test_stream_context_manager_and_close(raw_anthropic: anthropic.Anthropic) -> None:
    client = wrap(raw_anthropic, lint="off")
    with client.messages.create(**a_request(), stream=True) as stream:
        next(stream)
    stream2 = client.messages.create(**a_request(), stream=True)
    stream2.close()
    first, second = tracker_of(client).records
    assert first.cache_read == 1400
    assert second.cache_read is None and "stream_usage_missing" in second.flags


def test_message_stream_manager_get_final_message(raw_anthropic: anthropic.Anthropic) -> None:
    client = wrap(raw_anthropic, lint="off")
    with client.messages.stream(**a_request()) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(texts) == "Water twice a week."
    assert type(final).__name__ == "ParsedMessage"
    with client.messages.stream(**a_request()) as stream:
        kinds = [e.type for e in stream]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    client.messages.create(**a_request())
    a, b, c = tracker_of(client).records
    assert counts(a) == counts(b) == counts(c)


def test_openai_stream_without_include_usage_records_unknown_and_warns_once(
        api: Api, raw_openai: openai.OpenAI, caplog: pytest.LogCaptureFixture) -> None:
    client = wrap(raw_openai, lint="off")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PromptCacheWarning)
        for _ in range(2):
            chunks = list(client.chat.completions.create(**oa_request(), stream=True))
    assert len(chunks) == 4
    assert all("stream_options" not in body for body in api.bodies)  # never added for the user
    recs = tracker_of(client).records
    assert [r.cache_read for r in recs] == [None, None]
    assert tracker_of(client).summary().hit_rate is None  # unknown, never 0
    assert len([w for w in caught if "include_usage" in str(w.message)]) == 1


def test_openai_stream_with_usage_equals_non_stream(raw_openai: openai.OpenAI) -> None:
    client = wrap(raw_openai, lint="off")
    stream = client.chat.completions.create(**oa_request(), stream=True,
                                            stream_options={"include_usage": True})
    assert isinstance(stream, openai.Stream)
    list(stream)
    client.chat.completions.create(**oa_request())
    streamed, plain = tracker_of(client).records
    assert counts(streamed) == counts(plain)
    assert (plain.cache_read, plain.uncached_input) == (1408, 92)


def test_responses_create_tracked(raw_openai: openai.OpenAI) -> None:
    client = wrap(raw_openai, lint="off")
    resp = client.responses.create(model=OA_MODEL, input="hello", instructions=SYSTEM)
    assert type(resp).__name__ == "Response"
    [rec] = tracker_of(client).records
    assert (rec.provider, rec.cache_read, rec.input_total) == ("openai-responses", 1408, 1500)


def test_vllm_without_prompt_tokens_details_is_unknown_not_zero(api: Api) -> None:
    def vllm(request: httpx2.Request) -> httpx2.Response:
        body = _completion()
        body["usage"] = {"prompt_tokens": 1500, "completion_tokens": 5, "total_tokens": 1505}
        return httpx2.Response(200, json=body)

    raw = openai_client(vllm, "http://vllm.test:8000/v1", api_key="EMPTY")
    client = wrap(raw, lint="off")
    client.chat.completions.create(model="meta-llama/Llama-3.1-8B-Instruct",
                                   messages=[{"role": "user", "content": "hi"}])
    [rec] = tracker_of(client).records
    assert rec.cache_read is None and rec.output == 5


# ---------------------------------------------------------------------------- async
async def test_async_clients(api: Api, async_anthropic: anthropic.AsyncAnthropic,
                             async_openai: openai.AsyncOpenAI) -> None:
    tracker = UsageTracker()
    ac = wrap(async_anthropic, tracker=tracker, lint="off")
    oc = wrap(async_openai, tracker=tracker, lint="off")
    assert isinstance(ac, anthropic.AsyncAnthropic) and isinstance(oc, openai.AsyncOpenAI)
    msg = await ac.messages.create(**a_request())
    assert type(msg) is anthropic.types.Message
    stream = await ac.messages.create(**a_request(), stream=True)
    assert isinstance(stream, anthropic.AsyncStream)
    events = [e async for e in stream]
    assert events[0].type == "message_start"
    async with ac.messages.stream(**a_request()) as ms:
        final = await ms.get_final_message()
    assert final.usage.output_tokens == 5
    await oc.chat.completions.create(**oa_request())
    ostream = await oc.chat.completions.create(**oa_request(), stream=True,
                                               stream_options={"include_usage": True})
    async with ostream:
        async for _ in ostream:
            pass
    recs = tracker.records
    assert len(recs) == 5
    assert counts(recs[0]) == counts(recs[1]) == counts(recs[2])
    assert counts(recs[3]) == counts(recs[4])


# ---------------------------------------------------------------------------- auto_cache
def test_auto_cache_places_markers_and_keeps_the_callers(api: Api,
                                                         raw_anthropic: anthropic.Anthropic
                                                         ) -> None:
    client = wrap(raw_anthropic, auto_cache=True, lint="off")
    req = a_request()
    req["messages"] = [{"role": "user", "content": [{"type": "text", "text": "Q " * 50}]}]
    before = json.dumps(req, sort_keys=True)
    client.messages.create(**req)
    assert json.dumps(req, sort_keys=True) == before  # the caller's dict is not mutated
    sent = api.bodies[0]
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}  # the caller's marker
    assert "cache_control" in sent["messages"][-1]["content"][-1]  # the planner's turn end


def test_auto_cache_says_when_it_repairs_the_callers_marker(
        api: Api, raw_anthropic: anthropic.Anthropic, caplog: pytest.LogCaptureFixture) -> None:
    client = wrap(raw_anthropic, auto_cache=True, lint="warn")
    req = a_request()
    req["messages"] = [{"role": "user", "content": [
        {"type": "text", "text": "Q " * 50},
        {"type": "text", "text": "   ", "cache_control": {"type": "ephemeral"}}]}]
    with caplog.at_level(logging.WARNING, logger="promptcache"), \
            pytest.warns(PromptCacheWarning, match="cache marker at messages"):
        client.messages.create(**req)
    assert any("auto_cache" in r.getMessage() and "messages[0].content[1]" in r.getMessage()
               for r in caplog.records)
    sent = api.bodies[0]
    assert all(b.get("text", "x").strip() for b in sent["messages"][0]["content"])


def test_auto_cache_off_per_call(api: Api, raw_anthropic: anthropic.Anthropic) -> None:
    client = wrap(raw_anthropic, auto_cache=True, lint="off")
    req = a_request()
    client.messages.create(**req, promptcache_auto_cache=False)
    assert api.bodies[0] == json.loads(json.dumps(req))


def test_auto_cache_sets_prompt_cache_key_when_absent(api: Api, raw_openai: openai.OpenAI
                                                      ) -> None:
    client = wrap(raw_openai, auto_cache=True, lint="off")
    client.chat.completions.create(**oa_request())
    client.chat.completions.create(**oa_request(prompt_cache_key="mine"))
    key = api.bodies[0]["prompt_cache_key"]
    assert key.startswith("pc-") and api.bodies[1]["prompt_cache_key"] == "mine"
    client.chat.completions.create(**oa_request())
    assert api.bodies[2]["prompt_cache_key"] == key  # same stable prefix, same key


# ---------------------------------------------------------------------------- lint
def too_many_breakpoints() -> dict[str, Any]:
    blocks = [{"type": "text", "text": f"part {i} " + SYSTEM,
               "cache_control": {"type": "ephemeral"}} for i in range(5)]
    return {"model": MODEL, "max_tokens": 64, "system": blocks,
            "messages": [{"role": "user", "content": "hi"}]}


def test_lint_error_raises_before_sending(api: Api, raw_anthropic: anthropic.Anthropic) -> None:
    client = wrap(raw_anthropic, lint="error")
    with pytest.raises(PromptCacheLintError) as err:
        client.messages.create(**too_many_breakpoints())
    assert api.bodies == []
    assert "PC301" in {f.code for f in err.value.findings}


def test_lint_warn_reports_each_finding_once(raw_anthropic: anthropic.Anthropic,
                                             caplog: pytest.LogCaptureFixture) -> None:
    client = wrap(raw_anthropic)  # lint="warn" by default
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PromptCacheWarning)
        with caplog.at_level(logging.WARNING, logger="promptcache"):
            client.messages.create(**too_many_breakpoints())
            client.messages.create(**too_many_breakpoints())
    pc301 = [w for w in caught if "PC301" in str(w.message)]
    assert len(pc301) == 1
    assert len([r for r in caplog.records if "PC301" in r.getMessage()]) == 1


_NO_LOGGING_SCRIPT = """
import json, httpx2, anthropic
from promptcache.sdk import wrap
part = "You are a careful assistant for a plant nursery. " * 120
body = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}
http = httpx2.Client(transport=httpx2.MockTransport(
    lambda request: httpx2.Response(200, json=body)))
client = wrap(anthropic.Anthropic(api_key="k", base_url="http://t", http_client=http))
blocks = [{"type": "text", "text": f"part {i} " + part,
           "cache_control": {"type": "ephemeral"}} for i in range(5)]
client.messages.create(model="claude-sonnet-4-6", max_tokens=8, system=blocks,
                       messages=[{"role": "user", "content": "hi"}])  # THE CALL
"""


def test_lint_warn_prints_each_finding_once_without_a_logging_setup(tmp_path: Any) -> None:
    """With no logging configured, a finding shows once on stderr (as a warning pointing at the
    caller's line), not a second time through Python's last-resort log handler."""
    import subprocess
    import sys

    script = tmp_path / "app.py"
    script.write_text(_NO_LOGGING_SCRIPT)
    done = subprocess.run([sys.executable, "-W", "default", str(script)], capture_output=True,
                          text=True, timeout=120, check=True)
    lines = [ln for ln in done.stderr.splitlines() if "PC301" in ln]
    assert len(lines) == 1, done.stderr
    assert "app.py:" in lines[0] and "PromptCacheWarning" in lines[0], done.stderr


def test_lint_warn_only_logs_info_findings(raw_openai: openai.OpenAI,
                                           caplog: pytest.LogCaptureFixture) -> None:
    """A short OpenAI chat gets PC401 (info: under the 1,024-token minimum): advice, logged at
    info level, not a PromptCacheWarning on every short chat (new-user trial 9)."""
    client = wrap(raw_openai)  # lint="warn" by default
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PromptCacheWarning)
        with caplog.at_level(logging.INFO, logger="promptcache"):
            client.chat.completions.create(model="gpt-4o", max_tokens=8, messages=[
                {"role": "user", "content": "hi"}])
    assert not [w for w in caught if "PC401" in str(w.message)]
    [log] = [r for r in caplog.records if "PC401" in r.getMessage()]
    assert log.levelno == logging.INFO


def test_lint_off_skips(raw_anthropic: anthropic.Anthropic) -> None:
    client = wrap(raw_anthropic, lint="off")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PromptCacheWarning)
        client.messages.create(**too_many_breakpoints())


# ---------------------------------------------------------------------------- live diff
def test_live_diff_logs_the_cause_when_a_session_breaks_its_prefix(
        raw_anthropic: anthropic.Anthropic, caplog: pytest.LogCaptureFixture) -> None:
    client = wrap(raw_anthropic, session="chat-1", lint="off")
    first = a_request()
    second = a_request()
    second["system"] = [{"type": "text", "text": "Today is 2026-11-29. " + SYSTEM,
                         "cache_control": {"type": "ephemeral"}}]
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        client.messages.create(**first)
        client.messages.create(**first)  # identical: no divergence
        assert not [r for r in caplog.records if "diverges" in r.getMessage()]
        client.messages.create(**second)
    [log] = [r for r in caplog.records if "diverges" in r.getMessage()]
    assert "chat-1" in log.getMessage() and "system[0]" in log.getMessage()
    assert "cause " in log.getMessage()


def test_appending_turns_is_not_a_divergence(raw_anthropic: anthropic.Anthropic,
                                             caplog: pytest.LogCaptureFixture) -> None:
    client = wrap(raw_anthropic, session="chat-2", auto_cache=True, lint="off")
    req = a_request()
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        for turn in range(3):
            client.messages.create(**req)
            req = {**req, "messages": [*req["messages"],
                                       {"role": "assistant", "content": "Twice a week."},
                                       {"role": "user", "content": f"And in turn {turn}?"}]}
    assert not [r for r in caplog.records if "diverges" in r.getMessage()]
    assert_cache_stable(client)


# ---------------------------------------------------------------------------- faults
class ExplodingSink:
    def write(self, record: UsageRecord) -> None:
        raise RuntimeError("sink exploded")


@pytest.mark.parametrize("sink_factory", [lambda: ExplodingSink(),
                                          lambda: JsonlSink("/dev/full")],
                         ids=["raising-sink", "full-disk"])
def test_a_failing_sink_never_fails_the_call(raw_anthropic: anthropic.Anthropic,
                                             caplog: pytest.LogCaptureFixture,
                                             sink_factory: Callable[[], Any]) -> None:
    tracker = UsageTracker(sinks=[sink_factory()])
    client = wrap(raw_anthropic, tracker=tracker, lint="off")
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        msg = client.messages.create(**a_request())
    assert msg.model_dump() == raw_anthropic.messages.create(**a_request()).model_dump()
    text = caplog.text
    assert "usage tracking failed" in text
    assert "sink exploded" in text or "No space left on device" in text


def test_a_broken_catalog_entry_never_fails_the_call(raw_anthropic: anthropic.Anthropic,
                                                     caplog: pytest.LogCaptureFixture,
                                                     tmp_path: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "prices.toml"
    broken.write_text('[models."claude-sonnet-4-6"]\ninput = -3\n')  # a negative price
    monkeypatch.setenv("PROMPTCACHE_PRICES", str(broken))
    client = wrap(raw_anthropic, tracker=UsageTracker(), auto_cache=True)
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        msg = client.messages.create(**a_request())
    assert type(msg) is anthropic.types.Message
    assert "no prices for model 'claude-sonnet-4-6'" in caplog.text
    assert "prices.toml" in caplog.text  # the reason names the broken file
    [rec] = tracker_of(client).records
    assert rec.cache_read == 1400 and tracker_of(client).summary().cost is None


def test_an_unreadable_request_is_sent_unchanged(api: Api, raw_anthropic: anthropic.Anthropic,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    client = wrap(raw_anthropic, auto_cache=True)
    req = a_request()
    req["messages"] = [{"role": "user", "content": 42}]  # render() rejects it; the API decides
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        client.messages.create(**req)
    assert api.bodies[0]["messages"] == [{"role": "user", "content": 42}]
    # the caller's mistake, not promptcache's fault: one line naming it, no traceback
    assert "cannot read this request (messages[0].content" in caplog.text
    assert "request preparation failed" not in caplog.text
    assert all(r.exc_info is None for r in caplog.records)


def test_sdk_blocks_inside_a_tool_result_are_read(api: Api, raw_anthropic: anthropic.Anthropic,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """An SDK block object passed back inside a tool_result (two levels below the message's
    blocks) is dumped as the SDK dumps it, so the request is planned and linted."""
    client = wrap(raw_anthropic, auto_cache=True)
    req = a_request()
    req["messages"] += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "look",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            anthropic.types.TextBlock(type="text", text="Water weekly.")]}]}]
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        client.messages.create(**req)
    assert "cannot read this request" not in caplog.text
    sent = api.bodies[0]["messages"][2]["content"][0]
    assert sent["content"][0]["text"] == "Water weekly."
    assert "cache_control" in sent  # planned: the marker on the new turn


def test_a_sink_fault_inside_a_stream_never_fails_the_stream(
        raw_anthropic: anthropic.Anthropic, caplog: pytest.LogCaptureFixture) -> None:
    client = wrap(raw_anthropic, tracker=UsageTracker(sinks=[ExplodingSink()]), lint="off")
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        events = list(client.messages.create(**a_request(), stream=True))
    assert len(events) == 7 and "sink exploded" in caplog.text  # the SDK drops ping


# ---------------------------------------------------------------------------- assert_cache_stable
def test_assert_cache_stable_explains_the_break() -> None:
    first = a_request()
    second = a_request(tools=[{"name": "lookup", "description": "Find a plant",
                               "input_schema": {"type": "object", "properties": {}}}])
    assert_cache_stable([first, first])
    with pytest.raises(AssertionError, match=r"request 1 breaks the prefix request 0 cached"
                       ) as err:
        assert_cache_stable([first, second])
    assert "cause " in str(err.value) and "tools" in str(err.value)


def test_assert_cache_stable_per_session(raw_anthropic: anthropic.Anthropic) -> None:
    client = wrap(raw_anthropic, lint="off")
    changed = a_request()
    changed["system"] = [{"type": "text", "text": SYSTEM + " v2",
                          "cache_control": {"type": "ephemeral"}}]
    client.messages.create(**a_request(), promptcache_session="a")
    client.messages.create(**changed, promptcache_session="b")  # another session: fine
    assert_cache_stable(client)
    client.messages.create(**changed, promptcache_session="a")
    assert [s.session for s in sent_requests(client)] == ["a", "b", "a"]
    with pytest.raises(AssertionError, match="session 'a'"):
        assert_cache_stable(client)


# ---------------------------------------------------------------------------- fan-out
def test_warm_then_fanout_sends_one_first(api: Api, raw_anthropic: anthropic.Anthropic) -> None:
    client = wrap(raw_anthropic, lint="off")
    calls = [lambda i=i: client.messages.create(**a_request(metadata={"user_id": f"u{i}"}),
                                                stream=(i == 0)) for i in range(4)]
    results = warm_then_fanout(calls)
    assert api.bodies[0]["metadata"] == {"user_id": "u0"}  # the warm-up went out first
    assert sorted(b["metadata"]["user_id"] for b in api.bodies[1:]) == ["u1", "u2", "u3"]
    first = results[0]
    assert isinstance(first, anthropic.Stream)
    kinds = [e.type for e in first]
    assert kinds[0] == "message_start" and len(kinds) == 7  # read-ahead events are replayed
    assert all(type(r) is anthropic.types.Message for r in results[1:])
    assert len(tracker_of(client).records) == 4


def test_warm_then_fanout_raw_stream_and_errors(api: Api, raw_anthropic: anthropic.Anthropic
                                                ) -> None:
    stream_call = lambda: raw_anthropic.messages.create(**a_request(), stream=True)  # noqa: E731
    [first] = warm_then_fanout([stream_call])
    assert len(list(first)) == 7  # the SDK drops the ping event
    with pytest.raises(TypeError, match="stream=True"):
        warm_then_fanout([lambda: raw_anthropic.messages.stream(**a_request())])

    def boom() -> Any:
        raise RuntimeError("boom")

    out = warm_then_fanout([lambda: raw_anthropic.messages.create(**a_request()), boom],
                           return_exceptions=True)
    assert isinstance(out[1], RuntimeError)
    with pytest.raises(RuntimeError):
        warm_then_fanout([lambda: raw_anthropic.messages.create(**a_request()), boom])


async def test_awarm_then_fanout(api: Api, async_anthropic: anthropic.AsyncAnthropic) -> None:
    client = wrap(async_anthropic, lint="off")
    calls = [lambda i=i: client.messages.create(**a_request(metadata={"user_id": f"u{i}"}),
                                                stream=(i == 0)) for i in range(3)]
    results = await awarm_then_fanout(calls)
    assert api.bodies[0]["metadata"] == {"user_id": "u0"}
    events = [e async for e in results[0]]
    assert len(events) == 7 and events[0].type == "message_start"
    assert len(results) == 3


# ---------------------------------------------------------------------------- keepalive
class FakeTime:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def clock(self) -> float:
        return self.now


def test_keepalive_pings_are_prewarms_bounded_by_max_pings(api: Api,
                                                           raw_anthropic: anthropic.Anthropic
                                                           ) -> None:
    t = FakeTime()
    handle = keepalive(raw_anthropic, a_request(stream=True), every=240, max_pings=3,
                       max_usd=None, sleep=t.sleep, clock=t.clock, start=False)
    handle.run()
    assert handle.stopped == "max_pings" and handle.pings == 3
    assert [b["max_tokens"] for b in api.bodies] == [0, 0, 0]
    assert all("stream" not in b for b in api.bodies)
    assert t.now == 1_800_000_000.0 + 3 * 240  # ends right after the last ping, no 4th wait
    assert handle.spent_usd is not None and handle.spent_usd > 0
    none = keepalive(raw_anthropic, a_request(), every=240, max_pings=0, max_usd=None,
                     sleep=t.sleep, clock=t.clock, start=False)
    none.run()
    assert none.stopped == "max_pings" and t.now == 1_800_000_000.0 + 3 * 240  # no wait


def test_keepalive_stop_landing_after_the_wait_sends_no_ping(
        api: Api, raw_anthropic: anthropic.Anthropic) -> None:
    """stop() called after the loop's wait returned, before the ping: no ping is sent."""
    t = FakeTime()
    handle = keepalive(raw_anthropic, a_request(), every=240, max_pings=3, max_usd=None,
                       sleep=t.sleep, clock=t.clock, start=False)

    def wait_then_stop() -> bool:  # the wait ends, then stop() lands from another thread
        stopper = threading.Thread(target=handle.stop)
        stopper.start()
        stopper.join()
        return False

    handle._wait = wait_then_stop  # type: ignore[method-assign]
    handle.run()
    assert handle.stopped == "stopped" and handle.pings == 0 and api.bodies == []


def test_keepalive_first_ping_estimate_covers_the_count_error_bound(
        api: Api, raw_anthropic: anthropic.Anthropic) -> None:
    """The spend cap's first-ping estimate is an upper bound: an Anthropic prompt count is an
    estimate (+-15 %), so the estimate prices the top of that range."""
    from promptcache.prefix import render
    from promptcache.sdk._keepalive import _first_estimate
    from promptcache.usage import UsageRecord

    body = a_request()
    tracker = UsageTracker()
    view = render(body, "anthropic", model=MODEL)
    at_count = tracker.cost_of(UsageRecord(
        provider="anthropic", model=MODEL, uncached_input=0, cache_read=0,
        cache_write=view.total_tokens, cache_write_5m=0, cache_write_1h=view.total_tokens,
        output=body["max_tokens"]))
    estimate = _first_estimate(tracker, "anthropic", body, "anthropic")
    assert at_count is not None and at_count.total is not None and estimate is not None
    assert estimate > at_count.total * Decimal("1.10")


def test_keepalive_spend_cap(api: Api, raw_anthropic: anthropic.Anthropic) -> None:
    t = FakeTime()
    one = keepalive(raw_anthropic, a_request(), max_pings=1, max_usd=None, sleep=t.sleep,
                    start=False)
    one.run()
    assert one.spent_usd is not None and one.pings == 1
    per_ping = one.spent_usd
    # below the first ping's worst case (the whole prompt written at the 1h rate): no ping
    tiny = keepalive(raw_anthropic, a_request(), max_pings=100, max_usd=per_ping * 3,
                     sleep=t.sleep, start=False)
    tiny.run()
    assert (tiny.stopped, tiny.pings) == ("spend_cap", 0)
    cap = Decimal("0.05")
    capped = keepalive(raw_anthropic, a_request(), max_pings=1000, max_usd=cap,
                       sleep=t.sleep, start=False)
    capped.run()
    assert capped.stopped == "spend_cap" and capped.pings >= 2
    assert capped.spent_usd is not None
    assert capped.spent_usd <= cap < capped.spent_usd + per_ping  # stopped at the last one
    assert capped.spent_usd == per_ping * capped.pings


def test_keepalive_stop_handle_and_openai_ping(api: Api, raw_openai: openai.OpenAI) -> None:
    t = FakeTime()
    handle: Any = None

    def sleep(seconds: float) -> None:
        t.sleep(seconds)
        if handle is not None and handle.pings == 2:
            handle.stop()

    handle = keepalive(raw_openai, oa_request(), max_pings=10, max_usd="5", sleep=sleep,
                       start=False)
    handle.run()
    assert handle.stopped == "stopped" and handle.pings == 2
    assert all(b["max_completion_tokens"] == 1 and "max_tokens" not in b for b in api.bodies)


def test_keepalive_refuses_what_the_api_rejects(raw_anthropic: anthropic.Anthropic) -> None:
    from promptcache import InvalidRequestError

    with pytest.raises(InvalidRequestError, match="thinking") as e:
        keepalive(raw_anthropic, a_request(thinking={"type": "enabled", "budget_tokens": 2048}),
                  start=False)
    assert e.value.path == "thinking.type"  # the catalog's prewarm_rejects, as the builder
    with pytest.raises(InvalidRequestError) as e:
        keepalive(raw_anthropic, a_request(tool_choice={"type": "any"}), start=False)
    assert e.value.path == "tool_choice.type"


def test_keepalive_ping_limits_come_from_the_catalog() -> None:
    from promptcache.catalog import provider_rules
    from promptcache.sdk._keepalive import _ping_request

    assert _ping_request("anthropic", {"model": "m", "stream": True})["max_tokens"] \
        == provider_rules("anthropic").prewarm_max_tokens == 0
    assert _ping_request("openai-responses", {"model": "m"})["max_output_tokens"] \
        == provider_rules("openai").min_max_output_tokens == 16


def test_keepalive_unpriced_model_stops_under_a_cap(api: Api) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        body = _completion()
        body["model"] = "my-private-model"
        return httpx2.Response(200, json=body)

    raw = openai_client(handler, "http://vllm.test/v1")
    t = FakeTime()
    handle = keepalive(raw, {"model": "my-private-model", "messages": [
        {"role": "user", "content": "hi"}]}, max_usd=Decimal("1"), sleep=t.sleep, start=False)
    handle.run()
    assert handle.stopped == "unpriced" and handle.pings == 1


def test_keepalive_thread_stops(raw_anthropic: anthropic.Anthropic) -> None:
    handle = keepalive(raw_anthropic, a_request(), every=30.0, max_usd=None)
    assert handle.running
    handle.stop()
    handle.join(5)
    assert handle.stopped == "stopped" and handle.pings == 0


def test_memory_sink_gets_every_record(raw_anthropic: anthropic.Anthropic) -> None:
    sink = MemorySink()
    client = wrap(raw_anthropic, tracker=UsageTracker(sinks=[sink]), lint="off")
    client.messages.create(**a_request())
    list(client.messages.create(**a_request(), stream=True))
    assert len(sink) == 2


def test_auto_cache_on_an_unknown_model_sends_unchanged_and_warns_once(api: Api) -> None:
    raw = openai_client(api, "http://sglang.test:30000/v1", api_key="EMPTY")
    client = wrap(raw, auto_cache=True, lint="off")
    req = {"model": "Qwen/Qwen3-8B", "messages": [{"role": "system", "content": SYSTEM},
                                                  {"role": "user", "content": "hi"}]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PromptCacheWarning)
        client.chat.completions.create(**req)
        client.chat.completions.create(**req)
    assert api.bodies == [req, req]  # no prompt_cache_key for a server that may reject it
    assert len([w for w in caught if "Qwen/Qwen3-8B" in str(w.message)]) == 1


async def test_async_early_break_records_usage(async_anthropic: anthropic.AsyncAnthropic) -> None:
    import asyncio

    client = wrap(async_anthropic, lint="off")
    stream = await client.messages.create(**a_request(), stream=True)
    async for event in stream:
        if event.type == "content_block_delta":
            break
    for _ in range(3):  # the event loop closes the abandoned async generator
        await asyncio.sleep(0)
    [rec] = tracker_of(client).records
    assert (rec.cache_read, rec.output) == (1400, None)


def test_a_failing_usage_parser_never_fails_the_call(caplog: pytest.LogCaptureFixture) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        body = _message()
        body["usage"] = {"input_tokens": 11, "output_tokens": 5,
                         "cache_read_input_tokens": -7}  # a bad count the parser rejects
        return httpx2.Response(200, json=body)

    raw = anthropic_client(handler)
    client = wrap(raw, lint="off")
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        msg = client.messages.create(**a_request())
    assert msg.usage.cache_read_input_tokens == -7  # the SDK's object, unchanged
    assert "reading the response's usage failed" in caplog.text
    [rec] = tracker_of(client).records
    assert rec.cache_read is None and "usage_unparsable" in rec.flags


# new-user trial 10: an int session id was sent, then the usage record refused it and a raw
# pydantic ValidationError replaced the paid response
@pytest.mark.parametrize("how", ["anthropic-create", "anthropic-stream", "anthropic-raw-stream",
                                 "openai-create", "openai-stream", "responses-create"])
@pytest.mark.parametrize("override", ["promptcache_label", "promptcache_session"])
def test_a_non_string_label_or_session_raises_before_sending(
        api: Api, raw_anthropic: anthropic.Anthropic, raw_openai: openai.OpenAI, how: str,
        override: str) -> None:
    a, o = wrap(raw_anthropic, lint="off"), wrap(raw_openai, lint="off")
    bad = {override: 123}
    with pytest.raises(TypeError, match=f"{override} must be a str"):
        if how == "anthropic-create":
            a.messages.create(**a_request(), **bad)
        elif how == "anthropic-stream":
            with a.messages.stream(**a_request(), **bad) as st:
                st.get_final_message()
        elif how == "anthropic-raw-stream":
            list(a.messages.create(**a_request(stream=True), **bad))
        elif how == "openai-create":
            o.chat.completions.create(**oa_request(), **bad)
        elif how == "openai-stream":
            with o.chat.completions.stream(**oa_request(), **bad) as cs:
                cs.get_final_completion()
        else:
            o.responses.create(model=OA_MODEL, input="hi", **bad)
    assert api.bodies == []  # nothing was sent
    assert tracker_of(a).records == [] and tracker_of(o).records == []


def test_bad_setting_types_are_refused_when_given(api: Api,
                                                  raw_anthropic: anthropic.Anthropic) -> None:
    from promptcache.sdk import call_options

    with pytest.raises(TypeError, match="tracker"):
        wrap(raw_anthropic, tracker="t")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="auto_cache must be a bool"):
        wrap(raw_anthropic, auto_cache="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="label must be a str"):
        wrap(raw_anthropic, label=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="session must be a str"):
        wrap(raw_anthropic, session=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="label"), call_options(label=7):  # type: ignore[arg-type]
        pass
    with pytest.raises(TypeError, match="session"), \
            call_options(session=7):  # type: ignore[arg-type]
        pass
    client = wrap(raw_anthropic, lint="off")
    with pytest.raises(TypeError, match="promptcache_auto_cache must be a bool"):
        client.messages.create(**a_request(), promptcache_auto_cache="no")
    assert api.bodies == []
    # a duck-typed tracker (anything with add()) is accepted; None and str still are
    class Tracker:
        def add(self, record: UsageRecord) -> tuple[()]:
            return ()

    wrap(raw_anthropic, tracker=Tracker(), label=None, session="s")  # type: ignore[arg-type]
    client.messages.create(**a_request(), promptcache_label="ok", promptcache_session=None)
    assert tracker_of(client).records[-1].label == "ok"


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_record_that_cannot_be_built_never_fails_the_call(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        is_async: bool) -> None:
    import asyncio

    from promptcache.sdk._observe import Observer

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = _message()
        body["usage"] = {"input_tokens": 11, "output_tokens": 5,
                         "cache_read_input_tokens": -7}  # the parser rejects it
        return httpx2.Response(200, json=body)

    def broken(*args: Any, **kwargs: Any) -> UsageRecord:
        return UsageRecord(provider="anthropic", label=5)  # type: ignore[arg-type]

    monkeypatch.setattr(Observer, "unknown_record", broken)
    transport = httpx2.MockTransport(handler)
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        if is_async:
            araw = anthropic.AsyncAnthropic(api_key="k", base_url="http://api.test",
                                            max_retries=0,
                                            http_client=httpx2.AsyncClient(transport=transport))
            aclient = wrap(araw, lint="off")
            msg = asyncio.run(aclient.messages.create(**a_request()))
            records = tracker_of(aclient).records
        else:
            raw = anthropic.Anthropic(api_key="k", base_url="http://api.test", max_retries=0,
                                      http_client=httpx2.Client(transport=transport))
            client = wrap(raw, lint="off")
            msg = client.messages.create(**a_request())
            records = tracker_of(client).records
    assert msg.usage.output_tokens == 5  # the response comes back
    assert records == []
    assert "recording unknown usage failed" in caplog.text


def test_call_options_block(raw_anthropic: anthropic.Anthropic, api: Api) -> None:
    from promptcache.sdk import call_options

    client = wrap(raw_anthropic, label="default", lint="off")
    with call_options(session="chat-9", label="support"):
        client.messages.create(**a_request())
        with call_options(label="inner"):
            client.messages.create(**a_request())
        client.messages.create(**a_request(), promptcache_label="explicit")
    client.messages.create(**a_request())
    assert [(r.label, r.session) for r in tracker_of(client).records] == [
        ("support", "chat-9"), ("inner", "chat-9"), ("explicit", "chat-9"), ("default", None)]
    with pytest.raises(ValueError, match="lint"), call_options(lint="loud"):  # type: ignore[arg-type]
        pass


# ---------------------------------------------------------------------------- helpers
def test_first_divergence_over_chained_digests() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from promptcache.sdk._observe import first_divergence

    def chain(items: list[int]) -> list[str]:
        import hashlib

        h = hashlib.sha256()
        out = []
        for x in items:
            h.update(str(x).encode() + b"|")
            out.append(h.copy().hexdigest())
        return out

    @given(st.lists(st.integers(0, 3), max_size=12), st.lists(st.integers(0, 3), max_size=12))
    def check(a: list[int], b: list[int]) -> None:
        expected = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                        min(len(a), len(b)))
        assert first_divergence(chain(a), chain(b)) == expected

    check()


def test_token_events() -> None:
    from promptcache.sdk._streams import is_token_event

    start = anthropic.types.RawMessageStartEvent.model_validate(
        {"type": "message_start", "message": {**_message(), "content": []}})
    delta = anthropic.types.RawContentBlockDeltaEvent.model_validate(
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "x"}})
    assert not is_token_event(start) and is_token_event(delta)
    role_only = openai.types.chat.ChatCompletionChunk.model_validate(
        {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": OA_MODEL,
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                      "finish_reason": None}]})
    text = role_only.model_copy(update={"choices": [role_only.choices[0].model_copy(
        update={"delta": role_only.choices[0].delta.model_copy(update={"content": "Hi"})})]})
    assert not is_token_event(role_only) and is_token_event(text)


# ---------------------------------------------------------------------------- SDK helpers
class Answer(pydantic.BaseModel):
    answer: str


def test_parse_helpers_are_observed(api: Api, raw_anthropic: anthropic.Anthropic,
                                    raw_openai: openai.OpenAI) -> None:
    ac = wrap(raw_anthropic, lint="off")
    msg = ac.messages.parse(**a_request(), output_format=Answer)
    assert type(msg).__name__.startswith("ParsedMessage") and msg.parsed_output == Answer(
        answer="Twice a week.")
    ac.messages.create(**a_request())
    parsed, plain = tracker_of(ac).records
    assert counts(parsed) == counts(plain)
    # the wrapper saw the body as sent: output_format as the SDK's JSON schema
    assert sent_requests(ac)[0].payload["output_config"] == api.bodies[0]["output_config"]
    assert "output_format" not in sent_requests(ac)[0].payload

    oc = wrap(raw_openai, lint="off")
    completion = oc.chat.completions.parse(**oa_request(), response_format=Answer)
    assert completion.choices[0].message.parsed == Answer(answer="Twice a week.")
    oc.chat.completions.create(**oa_request())
    response = oc.responses.parse(model=OA_MODEL, input="hello", instructions=SYSTEM,
                                  text_format=Answer)
    assert response.output_parsed == Answer(answer="Twice a week.")
    oc.responses.create(model=OA_MODEL, input="hello", instructions=SYSTEM)
    c_parsed, c_plain, r_parsed, r_plain = tracker_of(oc).records
    assert counts(c_parsed) == counts(c_plain) and c_parsed.cache_read == 1408
    assert counts(r_parsed) == counts(r_plain) and r_parsed.provider == "openai-responses"
    sent = sent_requests(oc)
    assert sent[0].payload["response_format"] == api.bodies[2]["response_format"]
    assert sent[2].payload["text"] == api.bodies[4]["text"]
    assert "text_format" not in sent[2].payload


def test_parse_helpers_get_auto_cache_lint_and_overrides(
        api: Api, raw_anthropic: anthropic.Anthropic, raw_openai: openai.OpenAI) -> None:
    ac = wrap(raw_anthropic, auto_cache=True, lint="off")
    req = a_request()
    req["messages"] = [{"role": "user", "content": [{"type": "text", "text": "Q " * 50}]}]
    ac.messages.parse(**req, output_format=Answer, promptcache_label="structured")
    assert "cache_control" in api.bodies[0]["messages"][-1]["content"][-1]
    assert "promptcache_label" not in api.bodies[0]
    assert tracker_of(ac).records[0].label == "structured"
    oc = wrap(raw_openai, auto_cache=True, lint="off")
    oc.chat.completions.parse(**oa_request(), response_format=Answer)
    oc.responses.parse(model=OA_MODEL, input="hello", instructions=SYSTEM, text_format=Answer)
    assert api.bodies[1]["prompt_cache_key"].startswith("pc-")
    assert api.bodies[2]["prompt_cache_key"].startswith("pc-")
    strict = wrap(raw_anthropic, lint="error")
    with pytest.raises(PromptCacheLintError):
        strict.messages.parse(**too_many_breakpoints(), output_format=Answer)
    assert len(api.bodies) == 3  # not sent


def test_parse_refusing_a_billed_completion_still_records_it(api: Api,
                                                             raw_openai: openai.OpenAI) -> None:
    api.finish = "length"
    client = wrap(raw_openai, lint="off")
    with pytest.raises(openai.LengthFinishReasonError):
        client.chat.completions.parse(**oa_request(), response_format=Answer)
    [rec] = tracker_of(client).records
    assert (rec.cache_read, rec.output) == (1408, 5)


def test_chat_completions_stream_manager(api: Api, raw_openai: openai.OpenAI) -> None:
    from openai.lib.streaming.chat import ChatCompletionStream, ChatCompletionStreamManager

    client = wrap(raw_openai, lint="off")
    manager = client.chat.completions.stream(**oa_request(),
                                             stream_options={"include_usage": True})
    assert isinstance(manager, ChatCompletionStreamManager)
    with manager as stream:
        assert isinstance(stream, ChatCompletionStream)
        kinds = [e.type for e in stream]
        final = stream.get_final_completion()  # after iterating: still one record
    assert kinds[0] == "chunk" and "content.delta" in kinds
    assert final.choices[0].message.content == "Twice a week."
    with client.chat.completions.stream(**oa_request(),
                                        stream_options={"include_usage": True}) as stream:
        stream.get_final_completion()
    with client.chat.completions.stream(**oa_request(),
                                        stream_options={"include_usage": True}) as stream:
        assert stream.until_done() is stream
    client.chat.completions.create(**oa_request())
    recs = tracker_of(client).records
    assert len(recs) == 4
    assert counts(recs[0]) == counts(recs[1]) == counts(recs[2]) == counts(recs[3])
    assert recs[0].first_token is not None and recs[0].first_token >= recs[0].start  # type: ignore[operator]
    assert api.bodies[0]["stream"] is True


def test_chat_completions_stream_without_usage_and_early_exit(
        api: Api, raw_openai: openai.OpenAI) -> None:
    client = wrap(raw_openai, lint="off")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PromptCacheWarning)
        with client.chat.completions.stream(**oa_request()) as stream:
            stream.get_final_completion()
    assert "stream_options" not in api.bodies[0]
    assert len([w for w in caught if "include_usage" in str(w.message)]) == 1
    with client.chat.completions.stream(**oa_request(),
                                        stream_options={"include_usage": True}) as stream:
        for _ in stream:
            break  # left early: recorded at once
        assert len(tracker_of(client).records) == 2
    with client.chat.completions.stream(**oa_request(),
                                        stream_options={"include_usage": True}) as stream:
        pass  # never read: recorded when the block exits
    with client.chat.completions.stream(**oa_request(),
                                        stream_options={"include_usage": True}) as stream:
        next(stream)
    unknown, broke, unread, one = tracker_of(client).records
    assert all(r.cache_read is None and "stream_usage_missing" in r.flags
               for r in (unknown, broke, unread, one))


def test_responses_stream_manager(api: Api, raw_openai: openai.OpenAI) -> None:
    from openai.lib.streaming.responses import ResponseStream, ResponseStreamManager

    client = wrap(raw_openai, lint="off")
    with client.responses.stream(model=OA_MODEL, input="hello", instructions=SYSTEM) as stream:
        assert isinstance(stream, ResponseStream)
        kinds = [e.type for e in stream]
    assert kinds == ["response.created", "response.in_progress", "response.completed"]
    with client.responses.stream(model=OA_MODEL, input="hello", instructions=SYSTEM,
                                 text_format=Answer) as stream:
        final = stream.get_final_response()
    assert type(final).__name__.startswith("ParsedResponse")
    with client.responses.stream(model=OA_MODEL, input="hello", instructions=SYSTEM) as stream:
        for _ in stream:
            break
    client.responses.create(model=OA_MODEL, input="hello", instructions=SYSTEM)
    looped, final_rec, broke, plain = tracker_of(client).records
    assert counts(looped) == counts(final_rec) == counts(plain)
    assert broke.cache_read is None and "stream_usage_missing" in broke.flags
    assert api.bodies[1]["text"]["format"]["type"] == "json_schema"
    assert sent_requests(client)[1].payload["text"] == api.bodies[1]["text"]
    # re-streaming a response created earlier sends no prompt: passed through, unobserved
    manager = client.responses.stream(response_id="resp_1", promptcache_label="x")  # type: ignore[call-arg]
    assert type(manager) is ResponseStreamManager
    assert len(sent_requests(client)) == 4


async def test_async_helpers(api: Api, async_anthropic: anthropic.AsyncAnthropic,
                             async_openai: openai.AsyncOpenAI) -> None:
    import asyncio

    tracker = UsageTracker()
    ac = wrap(async_anthropic, tracker=tracker, lint="off")
    oc = wrap(async_openai, tracker=tracker, lint="off")
    msg = await ac.messages.parse(**a_request(), output_format=Answer)
    assert msg.parsed_output == Answer(answer="Twice a week.")
    await ac.messages.create(**a_request())
    completion = await oc.chat.completions.parse(**oa_request(), response_format=Answer)
    assert completion.choices[0].message.parsed == Answer(answer="Twice a week.")
    async with oc.chat.completions.stream(**oa_request(),
                                          stream_options={"include_usage": True}) as stream:
        await stream.get_final_completion()
    async with oc.chat.completions.stream(**oa_request(),
                                          stream_options={"include_usage": True}) as stream:
        async for _ in stream:
            pass
    await oc.chat.completions.create(**oa_request())
    response = await oc.responses.parse(model=OA_MODEL, input="hello", instructions=SYSTEM,
                                        text_format=Answer)
    assert response.output_parsed == Answer(answer="Twice a week.")
    async with oc.responses.stream(model=OA_MODEL, input="hello",
                                   instructions=SYSTEM) as rstream:
        await rstream.get_final_response()
    await oc.responses.create(model=OA_MODEL, input="hello", instructions=SYSTEM)
    recs = tracker.records
    assert len(recs) == 9
    assert counts(recs[0]) == counts(recs[1])
    assert counts(recs[2]) == counts(recs[3]) == counts(recs[4]) == counts(recs[5])
    assert counts(recs[6]) == counts(recs[7]) == counts(recs[8])
    assert recs[3].first_token is not None
    async with oc.chat.completions.stream(**oa_request(),
                                          stream_options={"include_usage": True}) as stream:
        async for _ in stream:
            break
        for _ in range(3):  # the event loop closes the abandoned async generator
            await asyncio.sleep(0)
    async with oc.responses.stream(model=OA_MODEL, input="hello", instructions=SYSTEM):
        pass
    assert len(tracker.records) == 11
    api.finish = "length"
    with pytest.raises(openai.LengthFinishReasonError):
        await oc.chat.completions.parse(**oa_request(), response_format=Answer)
    assert tracker.records[-1].cache_read == 1408 and len(tracker.records) == 12


def test_auto_cache_warns_when_instructions_cannot_carry_a_breakpoint(
        api: Api, raw_openai: openai.OpenAI) -> None:
    """New-user trial 9: on GPT-5.6+ (writes and reads only at breakpoints) a Responses call
    whose shared prompt is `instructions` cannot be marked; every call wrote ~1.8k tokens at
    1.25x and read nothing, silently. auto_cache now says so, once per model."""
    client = wrap(raw_openai, auto_cache=True, lint="off")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PromptCacheWarning)
        for q in ("one", "two"):
            client.responses.create(model="gpt-5.6-sol", input=q, instructions=SYSTEM)
        client.responses.create(model="gpt-5.6-sol", input="short", instructions="Be brief.")
        client.responses.create(model=OA_MODEL, input="hello", instructions=SYSTEM)  # gpt-4o
    hits = [str(w.message) for w in caught if "cannot carry one" in str(w.message)]
    assert len(hits) == 1 and "gpt-5.6-sol" in hits[0], hits
    # the shared prompt as a leading developer message can be marked: no warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PromptCacheWarning)
        fresh = wrap(raw_openai, auto_cache=True, lint="off")
        fresh.responses.create(model="gpt-5.6-sol", input=[
            {"role": "developer", "content": [{"type": "input_text", "text": SYSTEM}]},
            {"role": "user", "content": "one"}])
    assert not [w for w in caught if "cannot carry one" in str(w.message)]


def test_unmarkable_instructions_reported_once_with_lint_on(raw_openai: openai.OpenAI) -> None:
    """With lint on, rule PC308 reports the unmarkable GPT-5.6+ instructions; auto_cache's own
    warning (for lint="off") does not say it a second time."""
    client = wrap(raw_openai, auto_cache=True, lint="warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PromptCacheWarning)
        for q in ("one", "two"):
            client.responses.create(model="gpt-5.6-sol", input=q, instructions=SYSTEM)
    said = [str(w.message) for w in caught if "cannot carry one" in str(w.message)]
    assert len(said) == 1 and "PC308" in said[0], said
    strict = wrap(raw_openai, auto_cache=True, lint="error")
    with pytest.raises(PromptCacheLintError) as err:
        strict.responses.create(model="gpt-5.6-sol", input="one", instructions=SYSTEM)
    assert [f.code for f in err.value.findings] == ["PC308"]


def test_a_none_auto_cache_or_lint_override_means_not_given(
        api: Api, raw_anthropic: anthropic.Anthropic) -> None:
    """Review 11: promptcache_auto_cache=None became a TypeError (it meant False before), while
    call_options(auto_cache=None) means "not given": None is "not given" for both now."""
    from promptcache.sdk import call_options

    client = wrap(raw_anthropic, auto_cache=True, lint="off")
    client.messages.create(**a_request(), promptcache_auto_cache=None, promptcache_lint=None)
    with call_options(auto_cache=False):
        client.messages.create(**a_request(), promptcache_auto_cache=None)
    planned, plain = api.bodies
    assert "cache_control" in json.dumps(planned["messages"]) and planned != plain
    assert plain == json.loads(json.dumps(a_request()))


def test_warm_then_fanout_refuses_a_wrapped_stream_manager_and_bad_calls(
        api: Api, raw_anthropic: anthropic.Anthropic) -> None:
    """New-user trial 11: a wrapped client's messages.stream manager (a proxy) slipped past the
    check, so nothing was sent and the caller got unsent managers back; a callable or a list of
    responses instead of calls failed with a raw TypeError after sending."""
    import functools

    client = wrap(raw_anthropic)
    managers = [functools.partial(client.messages.stream, **a_request()) for _ in range(3)]
    with pytest.raises(TypeError, match="MessageStreamManager, which sends its request only"):
        warm_then_fanout(managers)
    with pytest.raises(TypeError, match="calls must be a sequence"):
        warm_then_fanout(client.messages.create)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"calls\[1\] is a dict"):
        warm_then_fanout([lambda: None, a_request()])  # type: ignore[list-item]
    assert api.bodies == []  # nothing was sent by any of them
