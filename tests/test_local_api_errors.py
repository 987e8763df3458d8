"""Local backend through the official clients: TTL, lookback, minimum, pre-warm, isolation,
images, and every error path (400 / 404 / 413 / 529 / 503 / 500) in the provider's JSON shape.

Expected token numbers come from the chat template's spans, not from the accounting module.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from promptcache._errors import PoolExhaustedError
from promptcache.local.app import ServerOptions
from promptcache.local.engine import Engine
from promptcache.local.template import apply_template
from promptcache.local.testing import SMALL_MODEL, LocalBackend, shared_runner
from tests.cases import filler

pytestmark = pytest.mark.local

MODEL = "claude-sonnet-5"  # minimum cacheable prefix 1,024 tokens (catalog)
SYSTEM = filler(1500, "local api errors system")
EPH = {"type": "ephemeral"}
EPH_1H = {"type": "ephemeral", "ttl": "1h"}


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as b:
        yield b


def _engine(**kwargs: Any) -> Engine:
    return Engine(shared_runner(device="cpu", **SMALL_MODEL), mode="fast", **kwargs)


def _payload(
    messages: list[dict[str, Any]], *, system_cc: dict[str, Any] | None = EPH, **extra: Any
) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": SYSTEM}
    if system_cc is not None:
        block["cache_control"] = system_cc
    return {"model": MODEL, "max_tokens": 2, "system": [block], "messages": messages, **extra}


def _user(text: str, cc: dict[str, Any] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if cc is not None:
        block["cache_control"] = cc
    return {"role": "user", "content": [block]}


def _sys_end(payload: dict[str, Any]) -> int:
    return apply_template(payload, "anthropic").span_of("system[0]").end


# ---------------------------------------------------------------------------------- TTL
def test_five_minute_ttl_expires_on_the_clock(backend: LocalBackend) -> None:
    client = backend.anthropic(api_key="ttl-5m")
    payload = _payload([_user("What changed?")])
    sys_end = _sys_end(payload)
    first = client.messages.create(**payload)
    assert first.usage.cache_creation_input_tokens == sys_end
    backend.clock.advance(299)
    second = client.messages.create(**payload)
    assert second.usage.cache_read_input_tokens == sys_end  # and the read refreshes the TTL
    backend.clock.advance(299)
    assert client.messages.create(**payload).usage.cache_read_input_tokens == sys_end
    backend.clock.advance(300)
    expired = client.messages.create(**payload)
    assert expired.usage.cache_read_input_tokens == 0
    assert expired.usage.cache_creation_input_tokens == sys_end


def test_one_hour_ttl(backend: LocalBackend) -> None:
    client = backend.anthropic(api_key="ttl-1h")
    payload = _payload([_user("q")], system_cc=EPH_1H)
    sys_end = _sys_end(payload)
    first = client.messages.create(**payload)
    assert first.usage.cache_creation is not None
    assert first.usage.cache_creation.ephemeral_1h_input_tokens == sys_end
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == 0
    backend.clock.advance(3000)
    assert client.messages.create(**payload).usage.cache_read_input_tokens == sys_end
    backend.clock.advance(3601)
    assert client.messages.create(**payload).usage.cache_read_input_tokens == 0


# ---------------------------------------------------------------------------------- lookback
def _tool_pairs(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "grep", "input": {"q": i}}
                ],
            }
        )
        out.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"hit {i}"}
                ],
            }
        )
    return out


@pytest.mark.parametrize(("pairs", "hit"), [(10, True), (11, False)])
def test_lookback_of_20_positions(backend: LocalBackend, pairs: int, hit: bool) -> None:
    client = backend.anthropic(api_key=f"lookback-{pairs}")
    first = _payload([_user("Find the bug.", EPH)], system_cc=None)
    written = apply_template(first, "anthropic").spans[-1].end
    assert client.messages.create(**first).usage.cache_creation_input_tokens == written
    messages = [_user("Find the bug."), *_tool_pairs(pairs)]
    messages[-1]["content"][-1]["cache_control"] = EPH
    second = _payload(messages, system_cc=None)
    prompt = apply_template(second, "anthropic")
    assert prompt.spans[-1].segment.position - prompt.spans[1].segment.position == 2 * pairs
    usage = client.messages.create(**second).usage
    assert usage.cache_read_input_tokens == (written if hit else 0)
    assert usage.cache_creation_input_tokens == prompt.spans[-1].end - (written if hit else 0)


# ---------------------------------------------------------------------------------- minimum
def test_below_the_minimum_nothing_is_cached(backend: LocalBackend) -> None:
    client = backend.anthropic(api_key="minimum")
    short = {
        "model": MODEL,
        "max_tokens": 1,
        "system": [{"type": "text", "text": filler(300, "short"), "cache_control": EPH}],
        "messages": [_user("hi")],
    }
    total = apply_template(short, "anthropic").total_tokens
    for _ in range(2):
        usage = client.messages.create(**short).usage
        assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (0, 0)
        assert usage.input_tokens == total
    # 1,500 tokens is enough for Sonnet 5 (1,024) but not for Opus 4.6 (4,096)
    opus = _payload([_user("hi")], model="claude-opus-4-6")
    usage = client.messages.create(**opus).usage
    assert usage.cache_creation_input_tokens == 0


# ---------------------------------------------------------------------------------- pre-warm
def test_max_tokens_zero_prewarms(backend: LocalBackend) -> None:
    client = backend.anthropic(api_key="prewarm")
    warm = _payload([_user("warm")], max_tokens=0)
    msg = client.messages.create(**warm)
    sys_end = _sys_end(warm)
    assert msg.content == [] and msg.stop_reason == "max_tokens"
    assert msg.usage.output_tokens == 0
    assert msg.usage.cache_creation_input_tokens == sys_end
    real = client.messages.create(**_payload([_user("the real question")]))
    assert real.usage.cache_read_input_tokens == sys_end


@pytest.mark.parametrize(
    "extra",
    [
        {
            "tool_choice": {"type": "any"},
            "tools": [{"name": "t", "input_schema": {"type": "object"}}],
        }
    ],
)
def test_prewarm_rejects_forced_tool_choice(backend: LocalBackend, extra: dict[str, Any]) -> None:
    with pytest.raises(anthropic.BadRequestError) as err:
        backend.anthropic().messages.create(**_payload([_user("x")], max_tokens=0, **extra))
    assert err.value.status_code == 400
    assert err.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


def test_prewarm_rejects_stream(backend: LocalBackend) -> None:
    response = backend.http_client().post(
        "/v1/messages",
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
        json={**_payload([_user("x")], max_tokens=0), "stream": True},
    )
    assert response.status_code == 400
    assert response.json()["type"] == "error"


# ---------------------------------------------------------------------------------- isolation
def test_tenants_and_models_are_isolated(backend: LocalBackend) -> None:
    payload = _payload([_user("same prompt")])
    sys_end = _sys_end(payload)
    assert (
        backend.anthropic(api_key="tenant-a")
        .messages.create(**payload)
        .usage.cache_creation_input_tokens
        == sys_end
    )
    other = backend.anthropic(api_key="tenant-b").messages.create(**payload)
    assert other.usage.cache_read_input_tokens == 0
    again = backend.anthropic(api_key="tenant-a").messages.create(**payload)
    assert again.usage.cache_read_input_tokens == sys_end
    other_model = backend.anthropic(api_key="tenant-a").messages.create(
        **{**payload, "model": "claude-opus-4-8"}
    )
    assert other_model.usage.cache_read_input_tokens == 0


# ---------------------------------------------------------------------------------- automatic
def test_top_level_cache_control_moves_forward(backend: LocalBackend) -> None:
    client = backend.anthropic(api_key="automatic")
    turn1 = _payload([_user("first question")], system_cc=None, cache_control=EPH)
    end1 = apply_template(turn1, "anthropic").spans[-1].end
    assert client.messages.create(**turn1).usage.cache_creation_input_tokens == end1
    turn2 = copy.deepcopy(turn1)
    turn2["messages"] += [{"role": "assistant", "content": "ok"}, _user("second question")]
    p2 = apply_template(turn2, "anthropic")
    usage = client.messages.create(**turn2).usage
    assert usage.cache_read_input_tokens == end1
    assert usage.cache_creation_input_tokens == p2.spans[-1].end - end1
    assert usage.input_tokens == p2.total_tokens - p2.spans[-1].end


# ---------------------------------------------------------------------------------- images
def _image(data: bytes) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(data).decode(),
        },
    }


def test_images_are_part_of_the_prefix(backend: LocalBackend) -> None:
    client = backend.anthropic(api_key="images")

    def ask(img: bytes) -> tuple[Any, Any]:
        content = [_image(img), {"type": "text", "text": "Describe.", "cache_control": EPH}]
        payload = _payload([{"role": "user", "content": content}])
        return client.messages.create(**payload).usage, apply_template(payload, "anthropic")

    first, prompt = ask(b"\x89PNG one")
    end = prompt.spans[-1].end
    assert first.cache_creation_input_tokens == end
    assert ask(b"\x89PNG one")[0].cache_read_input_tokens == end
    changed, _ = ask(b"\x89PNG two")
    assert changed.cache_read_input_tokens == prompt.span_of("system[0]").end


# ---------------------------------------------------------------------------------- 400s
def test_five_breakpoints_is_the_api_400(backend: LocalBackend) -> None:
    messages = [_user(f"m{i}", EPH) for i in range(4)]
    with pytest.raises(anthropic.BadRequestError) as err:
        backend.anthropic().messages.create(**_payload(messages))
    body = err.value.body
    assert body["type"] == "error"  # type: ignore[index]
    assert body["error"] == {  # type: ignore[index]
        "type": "invalid_request_error",
        "message": "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    }


def test_automatic_counts_against_the_four(backend: LocalBackend) -> None:
    messages = [_user(f"m{i}", EPH) for i in range(3)] + [_user("last")]
    with pytest.raises(anthropic.BadRequestError, match="Found 5"):
        backend.anthropic().messages.create(**_payload(messages, cache_control=EPH))


def test_one_hour_after_five_minutes_is_the_api_400(backend: LocalBackend) -> None:
    with pytest.raises(anthropic.BadRequestError) as err:
        backend.anthropic().messages.create(**_payload([_user("x", EPH_1H)], system_cc=EPH))
    message = err.value.body["error"]["message"]  # type: ignore[index]
    assert message.startswith(
        "messages.0.content.0.cache_control.ttl: a ttl='1h' cache_control block must not come "
        "after a ttl='5m' cache_control block."
    )


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"model": MODEL, "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
        ({"model": MODEL, "max_tokens": 1, "messages": "x"}, "messages"),
        (
            {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": 3}]},
            "messages.0.content",
        ),
        ({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}, "model"),
    ],
)
def test_malformed_anthropic_requests(
    backend: LocalBackend, body: dict[str, Any], fragment: str
) -> None:
    response = backend.http_client().post(
        "/v1/messages", headers={"anthropic-version": "2023-06-01"}, json=body
    )
    assert response.status_code == 400
    data = response.json()
    assert data["type"] == "error" and data["error"]["type"] == "invalid_request_error"
    assert fragment in data["error"]["message"]


def test_invalid_json_gets_the_provider_shape(backend: LocalBackend) -> None:
    a = backend.http_client().post("/v1/messages", content=b"{not json")
    assert a.status_code == 400 and a.json()["type"] == "error"
    o = backend.http_client().post("/v1/chat/completions", content=b"[1, 2]")
    assert o.status_code == 400 and o.json()["error"]["type"] == "invalid_request_error"


def test_unknown_model_is_404(backend: LocalBackend) -> None:
    with pytest.raises(anthropic.NotFoundError):
        backend.anthropic().messages.create(**{**_payload([_user("x")]), "model": "claude-nope"})
    with pytest.raises(openai.NotFoundError):
        backend.openai().chat.completions.create(
            model="gpt-nope", messages=[{"role": "user", "content": "x"}], max_tokens=1
        )


def test_openai_malformed_and_unsupported_cache_params(backend: LocalBackend) -> None:
    client = backend.openai()
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="gpt-4o", messages=[], max_tokens=1)
    assert err.value.body["param"] == "messages"  # type: ignore[index]
    assert err.value.body["code"] == "empty_array"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError, match="prompt_cache_options"):
        client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "x"}],
            max_tokens=1,
            extra_body={"prompt_cache_options": {"mode": "implicit"}},
        )


# ---------------------------------------------------------------------------------- 413
def test_body_over_the_limit_is_413() -> None:
    small = LocalBackend(_engine(num_blocks=64), options=ServerOptions(max_body_bytes=20_000))
    big = filler(6000, "big body")
    with pytest.raises(anthropic.APIStatusError) as a_err:
        small.anthropic().messages.create(model=MODEL, max_tokens=1, messages=[_user(big)])
    assert a_err.value.status_code == 413
    assert a_err.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]
    with pytest.raises(openai.APIStatusError) as o_err:
        small.openai().chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": big}], max_tokens=1
        )
    assert o_err.value.status_code == 413
    assert o_err.value.body["type"] == "invalid_request_error"  # type: ignore[index]  # SDK unwraps "error"


# ---------------------------------------------------------------------------------- 529 / 503
def test_a_prompt_over_the_pool_is_served_and_pinned_blocks_are_529_and_503(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tiny = LocalBackend(_engine(num_blocks=8))  # 128 tokens of KV blocks
    payload = _payload([_user("x")])
    # a prompt longer than the pool is served (its first blocks cached), not refused
    served = tiny.anthropic().messages.create(**payload)
    assert served.usage.cache_creation_input_tokens > 128
    # blocks pinned outside the engine (no free block at all): 529 / 503, as before

    def exhausted(*args: Any, **kwargs: Any) -> Any:
        raise PoolExhaustedError("every block pinned")

    monkeypatch.setattr(tiny.engine, "generate", exhausted)
    with pytest.raises(anthropic.APIStatusError) as a_err:
        tiny.anthropic().messages.create(**payload)
    assert a_err.value.status_code == 529
    assert a_err.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    with pytest.raises(anthropic.APIStatusError) as s_err:  # streaming: before the stream starts
        with tiny.anthropic().messages.stream(**payload) as stream:
            list(stream)
    assert s_err.value.status_code == 529
    with pytest.raises(openai.InternalServerError) as o_err:
        tiny.openai().chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": SYSTEM}], max_tokens=1
        )
    assert o_err.value.status_code == 503


# ---------------------------------------------------------------------------------- 500
def test_an_unexpected_error_does_not_crash_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    local = LocalBackend(_engine(num_blocks=256))
    real = local.service.engine.generate

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulated engine fault")

    monkeypatch.setattr(local.service.engine, "generate", boom)
    with pytest.raises(anthropic.InternalServerError) as err:
        local.anthropic().messages.create(model=MODEL, max_tokens=1, messages=[_user("x")])
    assert err.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    with pytest.raises(openai.InternalServerError):
        local.openai().chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "x"}], max_tokens=1
        )
    monkeypatch.setattr(local.service.engine, "generate", real)
    msg = local.anthropic().messages.create(model=MODEL, max_tokens=1, messages=[_user("x")])
    assert msg.usage.output_tokens == 1
    statuses = {k: v for k, v in local.metrics().items() if k.startswith("promptcache_requests")}
    assert any('status="500"' in k for k in statuses) and any('status="200"' in k for k in statuses)


def test_raw_sse_order(backend: LocalBackend) -> None:
    response = backend.http_client().post(
        "/v1/messages",
        headers={"x-api-key": "sse", "anthropic-version": "2023-06-01"},
        content=json.dumps({**_payload([_user("stream me")]), "stream": True}),
    )
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [line[7:] for line in response.text.splitlines() if line.startswith("event: ")]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert events[-2] == "message_delta" and events[-3] == "content_block_stop"


# ---------------------------------------------------------------------------------- block kinds
def test_cache_control_on_tools_tool_use_and_tool_result(backend: LocalBackend) -> None:
    client = backend.anthropic(api_key="block-kinds")
    tools = [
        {
            "name": "search",
            "description": filler(1200, "search tool"),
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
            "cache_control": EPH,
        }
    ]
    use = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "x"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "found"}
    first = {
        "model": MODEL,
        "max_tokens": 1,
        "tools": tools,
        "messages": [
            _user("look it up"),
            {"role": "assistant", "content": [{**use, "cache_control": EPH}]},
            {"role": "user", "content": [{**result, "cache_control": EPH}]},
        ],
    }
    prompt = apply_template(first, "anthropic")
    tools_end = prompt.span_of("tools[0]").end
    assert tools_end >= 1024
    usage = client.messages.create(**first).usage
    assert usage.cache_read_input_tokens == 0
    assert usage.cache_creation_input_tokens == prompt.spans[-1].end
    # another conversation with the same tools reads the tool definitions
    other = {**first, "messages": [_user("something else", EPH)]}
    usage = client.messages.create(**other).usage
    assert usage.cache_read_input_tokens == tools_end
    # the same conversation plus one turn reads through the tool_result breakpoint
    longer = copy.deepcopy(first)
    longer["messages"] += [{"role": "assistant", "content": "done"}, _user("thanks", EPH)]
    usage = client.messages.create(**longer).usage
    assert usage.cache_read_input_tokens == prompt.spans[-1].end


def test_blank_text_blocks_get_the_apis_400() -> None:
    """Case BR-10: an empty text block with cache_control, and a whitespace-only text block
    (even without cache_control), are rejected with 400 as the hosted API does."""
    import anthropic

    from promptcache.local.testing import SMALL_MODEL, LocalBackend

    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo="}}
    with LocalBackend(**SMALL_MODEL) as backend:
        client = backend.anthropic()
        for block, needle in (
            ({"type": "text", "text": "", "cache_control": {"type": "ephemeral"}},
             "messages.0.content.1.cache_control"),
            ({"type": "text", "text": "  \n"}, "messages.0.content.1"),
        ):
            try:
                client.messages.create(model="claude-sonnet-4-6", max_tokens=1, messages=[
                    {"role": "user", "content": [image, block]}])
            except anthropic.BadRequestError as exc:
                assert exc.status_code == 400 and needle in str(exc)
            else:  # pragma: no cover - the assertion below explains
                raise AssertionError(f"{block} was accepted")
        ok = client.messages.create(model="claude-sonnet-4-6", max_tokens=1, messages=[
            {"role": "user", "content": [image, {"type": "text", "text": "describe it",
                                                 "cache_control": {"type": "ephemeral"}}]}])
        assert ok.usage.input_tokens > 0


# ------------------------------------------------------- sixth session: validation fidelity
H_ANTHROPIC = {"anthropic-version": "2023-06-01"}


@pytest.mark.parametrize("kind", ["thinking", "redacted_thinking"])
def test_cache_control_on_a_thinking_block_is_the_apis_400(
    backend: LocalBackend, kind: str
) -> None:
    """hosted-api-rules.md 1.2: thinking / redacted_thinking blocks carry no cache_control; the
    backend used to accept the marker and write a cache entry there (newuser7 bug 4)."""
    block: dict[str, Any] = (
        {"type": "thinking", "thinking": "hmm", "signature": "sig"}
        if kind == "thinking"
        else {"type": "redacted_thinking", "data": "abc"}
    )
    messages = [
        _user("question"),
        {"role": "assistant", "content": [{**block, "cache_control": EPH}, {"type": "text",
                                                                           "text": "ok"}]},
        _user("next"),
    ]
    with pytest.raises(anthropic.BadRequestError) as err:
        backend.anthropic().messages.create(**_payload(messages))
    assert err.value.status_code == 400
    assert "messages.1.content.0.cache_control" in str(err.value)
    # without the marker the block is fine (and cached as part of a later prefix)
    messages[1]["content"][0] = block
    backend.anthropic().messages.create(**_payload(messages))


@pytest.mark.parametrize(
    ("messages", "index"),
    [
        ([{"role": "user", "content": ""}], 0),
        ([{"role": "user", "content": []}], 0),
        ([_user("x"), {"role": "assistant", "content": ""}, _user("y")], 1),
        ([_user("x"), {"role": "assistant", "content": []}, _user("y")], 1),
    ],
)
def test_empty_message_content_is_the_apis_400(
    backend: LocalBackend, messages: list[dict[str, Any]], index: int
) -> None:
    response = backend.http_client().post(
        "/v1/messages", headers=H_ANTHROPIC, json=_payload(messages)
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(f"messages.{index}: all messages must have non-empty")


def test_an_empty_final_assistant_message_is_allowed(backend: LocalBackend) -> None:
    response = backend.http_client().post(
        "/v1/messages",
        headers=H_ANTHROPIC,
        json=_payload([_user("x"), {"role": "assistant", "content": ""}]),
    )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("body", "param", "code", "fragment"),
    [
        ({"messages": []}, "messages", "empty_array", "empty array"),
        (
            {"messages": [{"role": "bogus", "content": "x"}]},
            "messages[0].role",
            "invalid_value",
            "'bogus'",
        ),
        (
            {"messages": [{"role": "user", "content": "x"}], "prompt_cache_key": 123},
            "prompt_cache_key",
            "invalid_type",
            "expected a string",
        ),
    ],
)
def test_openai_chat_validation_fidelity(
    backend: LocalBackend, body: dict[str, Any], param: str, code: str, fragment: str
) -> None:
    response = backend.http_client().post(
        "/v1/chat/completions", json={"model": "gpt-5", "max_tokens": 1, **body}
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, code)
    assert fragment in error["message"]


def test_responses_prompt_cache_key_must_be_a_string(backend: LocalBackend) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        backend.openai().responses.create(
            model="gpt-5", input="x", max_output_tokens=16, extra_body={"prompt_cache_key": 1}
        )
    assert err.value.body["param"] == "prompt_cache_key"  # type: ignore[index]


def test_unknown_routes_get_the_providers_error_shape(backend: LocalBackend) -> None:
    client = backend.http_client()
    a = client.post("/v1/messages/nope", json={})
    assert a.status_code == 404
    assert a.json()["type"] == "error" and a.json()["error"]["type"] == "not_found_error"
    a = client.get("/v1/whatever", headers=H_ANTHROPIC)
    assert a.status_code == 404 and a.json()["error"]["type"] == "not_found_error"
    o = client.post("/v1/embeddings", json={})
    assert o.status_code == 404
    assert o.json()["error"] == {
        "message": "Invalid URL (POST /v1/embeddings)",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    with pytest.raises(openai.NotFoundError):
        backend.openai().embeddings.create(model="text-embedding-3-small", input="x")
    wrong = client.get("/v1/chat/completions")
    assert wrong.status_code == 405 and "error" in wrong.json()


# ------------------------------------------------------- Responses previous_response_id
def test_previous_response_id_prepends_the_stored_conversation(backend: LocalBackend) -> None:
    """newuser7 bug 5: previous_response_id was silently ignored (input_tokens too low, no
    cached tokens). Now the stored conversation (input + output) is prepended."""
    client = backend.openai(api_key="tenant-previous")
    first_input = filler(1500, "previous response id conversation")
    r1 = client.responses.create(model="gpt-5", input=first_input, max_output_tokens=16)
    assert r1.store is True
    r2 = client.responses.create(
        model="gpt-5", input="and then?", previous_response_id=r1.id, max_output_tokens=16
    )
    explicit = [
        {"type": "message", "role": "user", "content": first_input},
        {"type": "message", "role": "assistant", "content": r1.output_text},
        {"type": "message", "role": "user", "content": "and then?"},
    ]
    expected = apply_template({"model": "gpt-5", "input": explicit}, "openai-responses")
    assert r2.usage is not None and r1.usage is not None
    assert r2.usage.input_tokens == expected.total_tokens > r1.usage.input_tokens
    assert r2.usage.input_tokens_details.cached_tokens >= 1024  # the first turn is read
    assert r2.previous_response_id == r1.id
    # a chain: the third turn carries both earlier turns
    r3 = client.responses.create(
        model="gpt-5", input="more", previous_response_id=r2.id, max_output_tokens=16
    )
    assert r3.usage is not None
    assert r3.usage.input_tokens > r2.usage.input_tokens + r2.usage.output_tokens
    # another API key (project) does not see the stored response
    with pytest.raises(openai.BadRequestError):
        backend.openai(api_key="another-tenant").responses.create(
            model="gpt-5", input="x", previous_response_id=r1.id, max_output_tokens=16
        )


def test_unknown_or_unstored_previous_response_id_is_a_400(backend: LocalBackend) -> None:
    client = backend.openai()
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(
            model="gpt-5", input="x", previous_response_id="resp_nope", max_output_tokens=16
        )
    body = err.value.body
    assert isinstance(body, dict)
    assert body["param"] == "previous_response_id"
    assert body["code"] == "previous_response_not_found"
    assert body["type"] == "invalid_request_error" and "'resp_nope' not found" in body["message"]
    unstored = client.responses.create(model="gpt-5", input="x", store=False,
                                       max_output_tokens=16)
    assert unstored.store is False
    with pytest.raises(openai.BadRequestError, match="not found"):
        client.responses.create(
            model="gpt-5", input="y", previous_response_id=unstored.id, max_output_tokens=16
        )


def test_a_streamed_response_is_stored_too(backend: LocalBackend) -> None:
    client = backend.openai()
    with client.responses.stream(model="gpt-5", input="hello", max_output_tokens=16) as stream:
        events = list(stream)
    rid = events[-1].response.id  # type: ignore[union-attr]
    r2 = client.responses.create(
        model="gpt-5", input="again", previous_response_id=rid, max_output_tokens=16
    )
    assert r2.previous_response_id == rid


def test_the_response_store_is_a_bounded_lru() -> None:
    from promptcache.local.api_openai import ResponseStore

    store = ResponseStore(capacity=2)
    store.put("t", "a", [{"role": "user", "content": "1"}])
    store.put("t", "b", [])
    assert store.get("t", "a") is not None  # a is now the most recently used
    store.put("t", "c", [])
    assert store.get("t", "b") is None and store.get("t", "a") is not None and len(store) == 2
    assert store.get("other", "a") is None
