"""Review 14 of the local backend: request validation, stop sequences, small pools.

Tiny random model (hidden 32, 1 layer); raw JSON through the in-process ``TestClient`` so the
exact status and error body are visible.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from promptcache.local.testing import LocalBackend

TINY: dict[str, Any] = {"hidden_size": 32, "layers": 1, "heads": 2, "kv_heads": 1}
AH = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
OH = {"authorization": "Bearer k"}
CLAUDE = "claude-sonnet-4-5"


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(**TINY) as b:
        yield b


def _anthropic(b: LocalBackend, **extra: Any) -> Any:
    body = {"model": CLAUDE, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    return b.http_client().post("/v1/messages", json={**body, **extra}, headers=AH)


def _chat(b: LocalBackend, model: str = "gpt-5", **extra: Any) -> Any:
    body = {"model": model, "max_completion_tokens": 2,
            "messages": [{"role": "user", "content": "hi"}]}
    return b.http_client().post("/v1/chat/completions", json={**body, **extra}, headers=OH)


def _responses(b: LocalBackend, **extra: Any) -> Any:
    body = {"model": "gpt-5", "max_output_tokens": 2, "input": "hi"}
    return b.http_client().post("/v1/responses", json={**body, **extra}, headers=OH)


# ------------------------------------------------------------------------------ F1: seed range
@pytest.mark.parametrize("seed", [10**30, 2**63, -(2**63) - 1, 2**64])
def test_out_of_range_seed_is_a_400_naming_seed_on_every_route(
    backend: LocalBackend, seed: int
) -> None:
    r = _anthropic(backend, seed=seed)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["message"].startswith("seed: ")
    for r in (_chat(backend, seed=seed), _responses(backend, seed=seed)):
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and err["param"] == "seed"
        assert "seed" in err["message"]


@pytest.mark.parametrize("seed", [2**63 - 1, -(2**63), 0])
def test_int64_seeds_still_sample(backend: LocalBackend, seed: int) -> None:
    assert _anthropic(backend, seed=seed).status_code == 200
    assert _chat(backend, seed=seed).status_code == 200
    assert _responses(backend, seed=seed).status_code == 200


# ------------------------------------------------------------------ F11: prompt over the pool
def test_a_prompt_longer_than_the_pool_is_served_and_its_first_blocks_cached() -> None:
    """Was PoolExhaustedError -> 529 / 503 (retried by the SDKs, permanent). The hosted APIs
    serve any prompt that fits the context; the engine serves it and caches what fits."""
    import torch

    from promptcache.local.engine import Engine
    from promptcache.local.testing import shared_runner

    runner = shared_runner(**TINY)
    g = torch.Generator().manual_seed(3)
    toks = [int(x) for x in torch.randint(0, 5000, (100,), generator=g)]
    reference = Engine(runner, num_blocks=64, tail_tokens=0).generate(toks, max_tokens=4)
    small = Engine(runner, num_blocks=4, tail_tokens=0)  # 64 tokens of blocks
    first = small.generate(toks, max_tokens=4)
    assert first.output_ids == reference.output_ids and first.reused_tokens == 0
    assert small.stats.blocks_cached == 4 and small.stats.blocks_used == 0
    again = small.generate(toks, max_tokens=4)
    assert again.reused_tokens == 64 and again.output_ids == reference.output_ids


def test_a_prompt_longer_than_the_pool_is_a_200_on_both_providers() -> None:
    with LocalBackend(pool_mb=0.05, **TINY) as b:  # 128 B/token: a pool of ~23 blocks
        blocks = b.engine.manager.pool.num_blocks  # type: ignore[union-attr]
        big = " ".join(f"w{i % 97}" for i in range(blocks * 16 + 200))
        system = [{"type": "text", "text": big, "cache_control": {"type": "ephemeral"}}]
        r = _anthropic(b, system=system)
        assert r.status_code == 200, r.text
        usage = r.json()["usage"]
        assert usage["cache_creation_input_tokens"] > blocks * 16
        # a later request reuses what the pool kept; the entry did not fit: a new write
        r = _anthropic(b, system=system)
        assert r.status_code == 200 and r.json()["usage"]["cache_read_input_tokens"] == 0
        assert b.engine.metrics["reused_tokens_total"] == blocks * 16  # type: ignore[union-attr]
        r = _chat(b, messages=[{"role": "user", "content": big}])
        assert r.status_code == 200, r.text
        streamed = b.http_client().post(
            "/v1/messages", headers=AH,
            json={"model": CLAUDE, "max_tokens": 2, "stream": True, "system": system,
                  "messages": [{"role": "user", "content": "hi"}]},
        )
        assert streamed.status_code == 200 and "message_stop" in streamed.text


# --------------------------------------------------------------- F10: stop sequences on text
def test_stop_text_holds_back_possible_prefixes_and_cuts_before_the_match() -> None:
    from promptcache.local.app import StopText
    from promptcache.local.template import encode_text

    ids = encode_text("Hello world, the end is near")
    stopper = StopText(["the end", "xyz"])
    parts = [stopper.feed(t) for t in ids]
    parts.append(stopper.finish())
    assert "".join(parts) == "Hello world, " and stopper.matched == "the end"
    assert StopText.apply(["the end"], ids) == ("Hello world, ", "the end")
    # a suffix that may start a stop sequence is held until it cannot
    held = StopText(["ld!"])
    shown = [held.feed(t) for t in encode_text("Hello world")]
    assert "".join(shown) == "Hello wor" and held.finish() == "ld" and held.matched is None
    # the earliest match wins, whichever is listed first
    assert StopText.apply(["near", "world"], ids) == ("Hello ", "world")
    assert StopText.apply([], ids) == ("Hello world, the end is near", None)


def _greedy_anthropic(b: LocalBackend, **extra: Any) -> Any:
    r = _anthropic(b, max_tokens=12, temperature=0, **extra)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_stop_string_inside_a_token_stops_generation_on_every_route(
    backend: LocalBackend,
) -> None:
    full = _greedy_anthropic(backend)["content"][0]["text"]
    assert len(full) > 8
    stop = full[3:7]  # starts and ends inside the model's tokens (token ids never matched it)
    want = full[: full.index(stop)]
    m = _greedy_anthropic(backend, stop_sequences=[stop])
    assert m["stop_reason"] == "stop_sequence" and m["stop_sequence"] == stop
    assert "".join(c["text"] for c in m["content"]) == want
    chat_full = _chat(backend, temperature=0, max_completion_tokens=12).json()
    text = chat_full["choices"][0]["message"]["content"]
    stop = text[3:7]
    r = _chat(backend, temperature=0, max_completion_tokens=12, stop=[stop]).json()
    assert r["choices"][0]["finish_reason"] == "stop"
    assert r["choices"][0]["message"]["content"] == text[: text.index(stop)]
    r = _responses(backend, temperature=0, max_output_tokens=12, stop=[stop]).json()
    assert r["output"][0]["content"][0]["text"] == text[: text.index(stop)]
    assert r["status"] == "completed"


def _sse_data(body: str) -> list[dict[str, Any]]:
    import json

    return [json.loads(line[6:]) for line in body.splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


def test_streamed_text_never_shows_the_stop_sequence(backend: LocalBackend) -> None:
    full = _greedy_anthropic(backend)["content"][0]["text"]
    stop = full[3:7]
    want = full[: full.index(stop)]
    r = _anthropic(backend, max_tokens=12, temperature=0, stream=True, stop_sequences=[stop])
    events = _sse_data(r.text)
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    delta = next(e for e in events if e["type"] == "message_delta")
    assert text == want
    assert delta["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": stop}
    full = _chat(backend, temperature=0, max_completion_tokens=12).json()
    full = full["choices"][0]["message"]["content"]
    stop = full[3:7]
    want = full[: full.index(stop)]
    r = _chat(backend, temperature=0, max_completion_tokens=12, stop=[stop], stream=True)
    chunks = _sse_data(r.text)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == want and chunks[-1]["choices"][0]["finish_reason"] == "stop"
    r = _responses(backend, temperature=0, max_output_tokens=12, stop=[stop], stream=True)
    events = _sse_data(r.text)
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    done = next(e for e in events if e["type"] == "response.output_text.done")
    assert text == want == done["text"]


# --------------------------------------------------------------- F8: what mode="exact" claims
def _exact_runs() -> dict[str, Any]:
    import random

    from promptcache.local.engine import Engine
    from promptcache.local.testing import shared_runner

    runner = shared_runner(**{**TINY, "layers": 2})
    rng = random.Random(1)
    p = [rng.randrange(1000, 50000) for _ in range(100)]
    other = [7, 8, 9] * 10

    def engine() -> Engine:
        return Engine(runner, num_blocks=64, mode="exact")

    cold = engine().generate(p, max_tokens=4, return_logits=True)
    e = engine()
    e.generate(p[:48] + other, max_tokens=1)
    block = e.generate(p, max_tokens=4, return_logits=True)
    e = engine()
    e.generate(p[:58] + other, max_tokens=1, keep_tail_at=[58])
    tail = e.generate(p, max_tokens=4, return_logits=True)
    e = engine()
    first = e.generate(p[:60], max_tokens=30)
    turn2 = p[:60] + first.output_ids + p[60:70]
    generated = e.generate(turn2, max_tokens=4, return_logits=True)
    cold2 = engine().generate(turn2, max_tokens=4, return_logits=True)
    return {"cold": cold, "block": block, "tail": tail, "generated": generated, "cold2": cold2}


def test_exact_mode_claims_only_what_holds() -> None:
    """Review 14 F8: the docs claimed bit-identical logits for every hit; a kept tail or a
    block of generated tokens is float-rounding close only. Pin both halves of the claim."""
    import torch

    from promptcache.local import cli, engine

    r = _exact_runs()
    cold, block, tail = r["cold"], r["block"], r["tail"]
    assert block.reused_tokens == 48 and block.tail_reused_tokens == 0
    assert torch.equal(block.prompt_logits, cold.prompt_logits)  # block-aligned prompt hit
    assert tail.tail_reused_tokens == 10 and tail.reused_tokens == 58
    assert torch.allclose(tail.prompt_logits, cold.prompt_logits, atol=1e-4)
    assert tail.output_ids == cold.output_ids
    gen, cold2 = r["generated"], r["cold2"]
    assert gen.reused_tokens > 64  # blocks written while decoding turn 1 were reused
    assert torch.allclose(gen.prompt_logits, cold2.prompt_logits, atol=1e-4)
    assert gen.output_ids == cold2.output_ids
    # the documentation no longer promises bit-identical logits for those two paths
    doc = " ".join((engine.__doc__ or "").split())
    assert "block-aligned prompt hit" in doc and "kept partial tail" in doc
    assert "blocks of generated tokens" in doc and "not* bit-identical" in doc
    help_text = next(p.help for p in cli.serve_command.params if p.name == "mode")  # type: ignore[attr-defined]
    assert help_text is not None and "block-aligned prompt hits" in help_text


# ------------------------------------------------------- F9: requests the hosted APIs reject
_TOOL_LOOP: list[dict[str, Any]] = [
    {"role": "user", "content": "a"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]},
]


def _with_tool_use(**changes: Any) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": "t", "name": "f", "input": {}, **changes}
    result = {"type": "tool_result", "tool_use_id": block["id"], "content": "r"}
    return [_TOOL_LOOP[0], {"role": "assistant", "content": [block]},
            {"role": "user", "content": [result]}]


def _user(*blocks: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": list(blocks)}]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"messages": [{"role": "bot", "content": "x"}]},
         "messages.0.role: Input should be 'user' or 'assistant'"),
        ({"messages": _user({"type": "foo", "text": "x"})},
         "messages.0.content.0: Input tag 'foo' found using 'type'"),
        ({"messages": _user({"type": "image"})}, "messages.0.content.0.source: Field required"),
        ({"messages": _user({"type": "image", "source": 5})},
         "messages.0.content.0.source: Input should be a valid dictionary"),
        ({"messages": _user({"type": "document", "source": "x"})},
         "messages.0.content.0.source: Input should be a valid dictionary"),
        ({"messages": _with_tool_use(input="x")},
         "messages.1.content.0.input: Input should be a valid dictionary"),
        ({"messages": _with_tool_use(id=5)},
         "messages.1.content.0.id: Input should be a valid string"),
        ({"tool_choice": "auto"}, "tool_choice: Input should be a valid dictionary"),
        ({"tool_choice": {"type": "sometimes"}}, "tool_choice: Input tag 'sometimes'"),
        ({"tool_choice": {"type": "tool"}}, "tool_choice.name: Field required"),
    ],
)
def test_anthropic_rejects_what_the_api_rejects(
    backend: LocalBackend, extra: dict[str, Any], message: str
) -> None:
    for route in ("/v1/messages", "/v1/messages/count_tokens"):
        body = {"model": CLAUDE, "max_tokens": 2,
                "messages": [{"role": "user", "content": "hi"}], **extra}
        r = backend.http_client().post(route, json=body, headers=AH)
        assert r.status_code == 400, (route, r.text)
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and err["message"].startswith(message)


def test_anthropic_still_accepts_valid_blocks(backend: LocalBackend) -> None:
    ok = [
        _TOOL_LOOP,
        _user({"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
              {"type": "text", "text": "describe"}),
        [{"role": "user", "content": "a"}, {"role": "system", "content": "be brief"},
         {"role": "user", "content": "b"}],
    ]
    for messages in ok:
        assert _anthropic(backend, messages=messages).status_code == 200
    r = _anthropic(backend, tools=[{"name": "f", "input_schema": {"type": "object"}}],
                   tool_choice={"type": "tool", "name": "f"})
    assert r.status_code == 200, r.text


_CHAT_TOOL_LOOP: list[dict[str, Any]] = [
    {"role": "user", "content": "a"},
    {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
]


@pytest.mark.parametrize(
    ("route", "extra", "param", "code"),
    [
        ("chat", {"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": 5}]}]},
         "messages[0].content[0].image_url", "invalid_type"),
        ("chat", {"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {}}]}]},
         "messages[0].content[0].image_url.url", "missing_required_parameter"),
        ("chat", {"tools": [{"type": "function"}]}, "tools[0].function",
         "missing_required_parameter"),
        ("chat", {"tools": [{"type": "function", "function": {"description": "d"}}]},
         "tools[0].function.name", "missing_required_parameter"),
        ("chat", {"messages": [*_CHAT_TOOL_LOOP, {"role": "tool", "content": "r"}]},
         "messages[2].tool_call_id", "missing_required_parameter"),
        ("chat", {"model": "gpt-5.6-sol", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "x", "prompt_cache_breakpoint": {"mode": "y"}}]}]},
         "messages[0].content[0].prompt_cache_breakpoint.mode", "invalid_value"),
        ("responses", {"input": [{"type": "function_call_output", "call_id": "c",
                                  "output": "x"}]}, "input", None),
        ("responses", {"tools": [{"type": "function"}]}, "tools[0].name",
         "missing_required_parameter"),
    ],
)
def test_openai_rejects_what_the_api_rejects(
    backend: LocalBackend, route: str, extra: dict[str, Any], param: str, code: str | None
) -> None:
    r = _chat(backend, **extra) if route == "chat" else _responses(backend, **extra)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param and err["code"] == code


def test_openai_still_accepts_valid_tool_loops_and_breakpoints(backend: LocalBackend) -> None:
    messages = [*_CHAT_TOOL_LOOP, {"role": "tool", "tool_call_id": "c1", "content": "r"}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert _chat(backend, messages=messages, tools=tools).status_code == 200
    part = {"type": "text", "text": "x", "prompt_cache_breakpoint": {"mode": "explicit"}}
    r = _chat(backend, model="gpt-5.6-sol", messages=[{"role": "user", "content": [part]}])
    assert r.status_code == 200, r.text
    items = [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c", "output": "x"}]
    r = _responses(backend, input=items, tools=[{"type": "function", "name": "f"}])
    assert r.status_code == 200, r.text
