"""Trial 28 (a Responses-API-only user): what the hosted API refuses, the local backend and
the builder refuse too, and lint reports it; GPT-5.6+ lint numbers follow breakpoint-only reads.

Sources: openai-python 3.57.0 (``PromptCacheBreakpoint.mode`` Required, ``ttl:
Literal["30m", "12h"]``; ``ResponseOutputTextParam`` without ``prompt_cache_breakpoint``;
``previous_response_id`` "Cannot be used in conjunction with `conversation`");
hosted-api-rules.md 2.3 (GPT-5.6+ reads entries written at breakpoints only)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from promptcache import PromptBuilder
from promptcache._errors import InvalidRequestError
from promptcache.lint.api import lint_request, lint_text
from promptcache.local.testing import LocalBackend

SYS = "You are a release agent. " + " ".join(f"Rule {i}: keep changelogs tidy." for i in range(300))


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", hidden_size=32, layers=1, heads=2, kv_heads=1,
                      pool_mb=8) as b:
        yield b


def _dev(marker: Any) -> dict[str, Any]:
    return {"role": "developer", "content": [{"type": "input_text", "text": "Be terse.",
                                              "prompt_cache_breakpoint": marker}]}


def _refused(backend: LocalBackend, **kw: Any) -> dict[str, Any]:
    with pytest.raises(openai.BadRequestError) as info:
        backend.openai().responses.create(model="gpt-5.6-sol", max_output_tokens=4, **kw)
    body = info.value.body
    assert isinstance(body, dict)
    return body


def test_backend_refuses_breakpoint_ttl_the_api_does_not_take(backend: LocalBackend) -> None:
    body = _refused(backend, input=[_dev({"mode": "explicit", "ttl": "1h"}),
                                    {"role": "user", "content": "hi"}])
    assert body["param"] == "input[0].content[0].prompt_cache_breakpoint.ttl"
    assert body["code"] == "invalid_value"
    # the SDK's values are accepted, on both APIs
    client = backend.openai()
    for ttl in ("30m", "12h"):
        client.responses.create(model="gpt-5.6-sol", max_output_tokens=4, input=[
            _dev({"mode": "explicit", "ttl": ttl}), {"role": "user", "content": "hi"}])
        client.chat.completions.create(model="gpt-5.6-sol", max_tokens=4, messages=[
            {"role": "user", "content": [{"type": "text", "text": "hi",
                                          "prompt_cache_breakpoint": {"mode": "explicit",
                                                                      "ttl": ttl}}]}])


def test_backend_refuses_breakpoint_without_mode(backend: LocalBackend) -> None:
    body = _refused(backend, input=[_dev({}), {"role": "user", "content": "hi"}])
    assert body["param"] == "input[0].content[0].prompt_cache_breakpoint.mode"
    assert body["code"] == "missing_required_parameter"


def test_backend_checks_function_call_output_parts(backend: LocalBackend) -> None:
    body = _refused(backend, input=[
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [
            {"type": "input_text", "text": "ok",
             "prompt_cache_breakpoint": {"mode": "explicit", "ttl": "5m"}}]}])
    assert body["param"] == "input[1].output[0].prompt_cache_breakpoint.ttl"


def test_backend_refuses_breakpoint_on_assistant_output_text(backend: LocalBackend) -> None:
    body = _refused(backend, input=[
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "hello",
                                           "prompt_cache_breakpoint": {"mode": "explicit"}}]},
        {"role": "user", "content": "again"}])
    assert body["param"] == "input[1].content[0].prompt_cache_breakpoint"
    assert body["code"] == "unknown_parameter"


def test_backend_refuses_previous_response_id_with_conversation(backend: LocalBackend) -> None:
    client = backend.openai()
    first = client.responses.create(model="gpt-5.6-sol", max_output_tokens=4, input="hi")
    body = _refused(backend, input="more", previous_response_id=first.id,
                    conversation="conv_1")
    assert body["code"] == "mutually_exclusive_parameters"
    assert "conversation" in body["message"]


def test_builder_refuses_previous_response_id_with_conversation() -> None:
    b = PromptBuilder("gpt-5.6-sol").system(SYS).turn("hi")
    with pytest.raises(InvalidRequestError) as info:
        b.to_openai_responses(previous_response_id="resp_1", conversation="conv_1")
    assert info.value.path == "conversation"
    assert b.to_openai_responses(previous_response_id="resp_1")["previous_response_id"]


def _codes(findings: Any, code: str) -> list[Any]:
    return [f for f in findings if f.code == code]


def test_pc301_breakpoint_ttl_and_mode() -> None:
    req = {"model": "gpt-5.6-sol", "input": [
        {"role": "developer", "content": [{"type": "input_text", "text": SYS,
                                           "prompt_cache_breakpoint": {"mode": "explicit",
                                                                       "ttl": "1h"}}]},
        {"role": "user", "content": [{"type": "input_text", "text": "hi",
                                      "prompt_cache_breakpoint": {}}]}]}
    found = _codes(lint_request(req), "PC301")
    reasons = {f.details["reason"]: f for f in found}
    assert reasons["breakpoint_ttl_unsupported"].severity.value == "error"
    assert reasons["breakpoint_ttl_unsupported"].details["ttl"] == "1h"
    assert "breakpoint_mode_missing" in reasons
    ok: dict[str, Any] = {"model": "gpt-5.6-sol", "input": [
        {"role": "developer", "content": [{"type": "input_text", "text": SYS,
                                           "prompt_cache_breakpoint": {"mode": "explicit",
                                                                       "ttl": "30m"}}]},
        {"role": "user", "content": "hi"}]}
    assert not _codes(lint_request(ok), "PC301")


def test_pc305_names_openai_marker() -> None:
    req = {"model": "gpt-5.6-sol", "input": [
        {"role": "developer", "content": SYS}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "hello",
                                           "prompt_cache_breakpoint": {"mode": "explicit"}}]},
        {"role": "user", "content": "x"}]}
    (f,) = _codes(lint_request(req), "PC305")
    assert f.message.startswith("prompt_cache_breakpoint on an output_text part")
    assert "cache_control" not in f.message


def _log_line(instructions: str, question: str) -> dict[str, Any]:
    return {"request": {"model": "gpt-5.6-sol", "prompt_cache_key": "k",
                        "instructions": instructions,
                        "input": [{"role": "user", "content": question}]}}


def test_pc105_gpt56_counts_the_whole_unreadable_prefix() -> None:
    # GPT-5.6+: no breakpoint before the change, so the whole prefix is written again (the
    # local backend reports cached_tokens 0 for such a turn), not the few tokens after it
    log = [_log_line(SYS, "q1"), _log_line(SYS + " Today is 2026-10-02.", "q2")]
    text = "".join(json.dumps(line) + "\n" for line in log)
    (f,) = _codes(lint_text(text, "requests.jsonl"), "PC105")
    assert f.details["tokens_invalidated"] > 2500
    assert "reads only entries written at breakpoints" in f.message


def test_pc101_gpt56_rewrites_back_to_the_last_readable_breakpoint() -> None:
    # a date in the middle of GPT-5.6+ instructions: the tokens before it are written again
    # too (no breakpoint before it), as on Anthropic; before GPT-5.6 only the ones after it
    half = len(SYS) // 2
    text = SYS[:half] + " Now: 2026-10-03T12:34:56Z. " + SYS[half:]
    for model, more in (("gpt-5.6-sol", True), ("gpt-5.5", False)):
        req = {"model": model, "prompt_cache_key": "k", "instructions": text,
               "input": [{"role": "user", "content": "hi"}]}
        (f,) = _codes(lint_request(req), "PC101")
        assert (f.details["tokens_rewritten"] > f.details["tokens_invalidated"] + 1000) is more
