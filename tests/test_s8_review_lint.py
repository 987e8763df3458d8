"""Session 8, review 12: lint on chained Responses requests (F10, F11), the 12h TTL (F12),
counts of chained requests (F17) and of images of unknown size (F9).

Provider facts: ../shared/reference/hosted-api-rules.md 2.1-2.3; the installed openai-python
(3.57.0) ``types/responses/response_create_params.py`` ``PromptCacheOptions.ttl:
Literal["30m", "12h"]`` and ``types/chat/completion_create_params.py`` ``Literal["30m"]``.
"""

from __future__ import annotations

from typing import Any

import pytest

from promptcache.lint import lint_request
from promptcache.lint.finding import Finding
from tests.cases import filler

LONG = filler(1500)


def codes(findings: list[Finding], code: str) -> list[Finding]:
    return [f for f in findings if f.code == code]


# ------------------------------------------------------------------ F10: PC402 on a short chain
@pytest.mark.parametrize("field,value", [
    ("previous_response_id", "resp_1"),
    ("conversation", "conv_1"),
    ("prompt", {"id": "pmpt_1"}),
])
def test_pc402_reports_a_short_chained_turn_without_a_key(field: str, value: Any) -> None:
    body = {"model": "gpt-5.6", field: value,
            "input": [{"role": "user", "content": "and moss?"}]}
    [f] = codes(lint_request(body), "PC402")
    assert f"{field} adds, plus" in f.message and "without prompt_cache_key" in f.message
    body["prompt_cache_key"] = "conv-1"
    assert codes(lint_request(body), "PC402") == []
    del body["prompt_cache_key"], body[field]
    assert codes(lint_request(body), "PC402") == []  # a short unchained body is not cacheable


def test_pc402_on_a_chat_body_with_a_prompt_key_sizes_it_by_the_body() -> None:
    body = {"model": "gpt-5.6", "prompt": {"id": "pmpt_1"},
            "messages": [{"role": "system", "content": LONG},
                         {"role": "user", "content": "hi"}]}
    [f] = codes(lint_request(body), "PC402")
    assert "stored prompt template" not in f.message and "-token prompt without" in f.message
    body["messages"] = [{"role": "user", "content": "hi"}]
    assert codes(lint_request(body), "PC402") == []  # chat has no stored prompt


def test_pc401_fires_on_a_short_chat_body_with_a_prompt_key() -> None:
    short = {"model": "gpt-5.6", "prompt": {"id": "pmpt_1"},
             "messages": [{"role": "user", "content": "hi " * 700}]}
    plain = {k: v for k, v in short.items() if k != "prompt"}
    assert codes(lint_request(plain), "PC401")
    assert [f.message for f in codes(lint_request(short), "PC401")] == \
        [f.message for f in codes(lint_request(plain), "PC401")]


# ------------------------------------------------------------------ F11: PC101 by path
STAMP = "Today is 2026-11-30T13:11:32Z. "


@pytest.mark.parametrize("field", ["previous_response_id", "conversation"])
@pytest.mark.parametrize("role", ["developer", "system"])
def test_pc101_in_an_input_system_message_does_not_claim_stored_turns_after_it(
        field: str, role: str) -> None:
    body = {"model": "gpt-5.6", field: "x_1",
            "input": [{"role": role, "content": STAMP + LONG},
                      {"role": "user", "content": "cactus?"}]}
    [f] = codes(lint_request(body), "PC101")
    assert f.path == "input[0].content"
    assert "come after it" not in f.message


@pytest.mark.parametrize("where", ["instructions", "tools"])
def test_pc101_before_the_input_still_names_the_stored_turns(where: str) -> None:
    body: dict[str, Any] = {"model": "gpt-5.6", "previous_response_id": "resp_1",
                            "input": [{"role": "user", "content": "cactus?"}]}
    if where == "instructions":
        body["instructions"] = STAMP + LONG
    else:
        body["tools"] = [{"type": "function", "name": "lookup", "description": STAMP + LONG,
                          "parameters": {"type": "object", "properties": {}}}]
    [f] = codes(lint_request(body), "PC101")
    assert "previous_response_id adds come after it" in f.message


# ------------------------------------------------------------------ F17: count of a chained turn
def _cli_count(tmp_path: Any, payload: dict[str, Any]) -> str:
    import json

    from click.testing import CliRunner

    from promptcache.cli import main

    path = tmp_path / "req.json"
    path.write_text(json.dumps(payload))
    out = CliRunner().invoke(main, ["count", str(path)])
    assert out.exit_code == 0, out.output
    return str(out.stdout.strip())


@pytest.mark.parametrize("field,value,label", [
    ("previous_response_id", "resp_123", "the earlier turns previous_response_id adds"),
    ("conversation", "conv_1", "the stored items conversation adds"),
    ("prompt", {"id": "pmpt_1"}, "the stored prompt template prompt adds"),
])
def test_count_of_a_chained_responses_request_gives_no_bound(
        tmp_path: Any, field: str, value: Any, label: str) -> None:
    import math

    from promptcache.tokens import count_tokens

    body = {"model": "gpt-5.6", field: value, "input": [{"role": "user", "content": "and moss?"}]}
    result = count_tokens(body)
    assert not result.exact and result.error_tokens is None and math.isinf(result.error_bound)
    assert result.not_counted == label and result.unbounded == f"{label} (not counted)"
    assert result.body_error_tokens is not None and result.body_error_tokens > 0
    line = _cli_count(tmp_path, body)
    assert line.startswith(f"{result.tokens} tokens in the body, estimate "
                           f"(+-{result.body_error_tokens} tokens) + {label} (not counted)")
    del body[field]
    plain = count_tokens(body)  # the same body unchained keeps its bound
    assert plain.error_tokens is not None and plain.unbounded is None
    assert plain.not_counted is None and "in the body" not in _cli_count(tmp_path, body)


def test_count_of_a_chat_body_with_a_prompt_key_keeps_its_bound() -> None:
    from promptcache.tokens import count_tokens

    result = count_tokens({"model": "gpt-4o", "prompt": {"id": "pmpt_1"},
                           "messages": [{"role": "user", "content": "hi"}]})
    assert result.error_tokens is not None and result.unbounded is None


# ------------------------------------------------------------------ F9: images of unknown size
@pytest.mark.parametrize("payload", [
    {"model": "gpt-4o", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is it?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]},
    {"model": "gpt-5.6", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "what is it?"},
        {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"}]}]},
], ids=["chat-image_url", "responses-input_image-low"])
def test_count_with_an_image_of_unknown_size_states_no_bound(tmp_path: Any,
                                                             payload: dict[str, Any]) -> None:
    import math

    from promptcache.tokens import count_tokens

    result = count_tokens(payload)
    assert result.error_tokens is None and math.isinf(result.error_bound)
    assert result.unbounded == "images: size unknown" and result.not_counted is None
    line = _cli_count(tmp_path, payload)
    assert f"{result.tokens} tokens, estimate (images: size unknown)" in line
    assert "+-" not in line


# ------------------------------------------------------------------ F12: ttl "12h" on Responses
def _opts(ttl: str) -> dict[str, Any]:
    return {"mode": "implicit", "ttl": ttl}


def test_pc301_12h_on_responses_is_an_info_naming_the_sdk_not_a_400() -> None:
    body = {"model": "gpt-5.6", "input": [{"role": "user", "content": "hi"}],
            "prompt_cache_options": _opts("12h")}
    [f] = codes(lint_request(body), "PC301")
    assert f.severity.value == "info" and f.details["reason"] == "ttl_unconfirmed"
    assert "HTTP 400" not in f.message and "openai-python 3.57.0" in f.message
    assert "not confirmed by promptcache's reference" in f.message
    assert f.details["confirmed"] is False
    assert f.details["documented_by"] == "https://github.com/openai/openai-python"


def test_pc301_12h_on_chat_stays_an_error() -> None:
    body = {"model": "gpt-5.6", "messages": [{"role": "user", "content": "hi"}],
            "prompt_cache_options": _opts("12h")}
    [f] = codes(lint_request(body), "PC301")
    assert f.severity.value == "error" and f.details["reason"] == "ttl_unsupported"
    assert "HTTP 400" in f.message and "for the Responses API only" in f.message


def test_catalog_records_12h_with_its_sdk_source_unconfirmed() -> None:
    from promptcache.catalog import catalog_sources, get_policy
    from promptcache.lint.facts import sdk_ttls

    sdk = sdk_ttls("gpt-5.6", "openai-responses")
    assert sdk is not None and sdk.ttls == ("12h",) and sdk.confirmed is False
    assert "openai-python 3.57.0" in (sdk.source_note or "")
    assert "types/responses/response_create_params.py" in (sdk.source_note or "")
    assert catalog_sources()[sdk.tag].url == sdk.url
    assert sdk_ttls("gpt-5.6", "openai-chat") is None
    assert sdk_ttls("gpt-4o", "openai-responses") is None
    assert get_policy("gpt-5.6").ttls == ("30m",)  # the confirmed list, shared by every API


def test_backend_accepts_12h_on_responses_keeps_it_12h_and_reports_ttl_12h_tokens() -> None:
    import openai

    from promptcache.local.testing import SMALL_MODEL, LocalBackend

    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as backend:
        client = backend.openai()
        body = {"model": "gpt-5.6", "max_output_tokens": 2,
                "input": [{"role": "developer", "content": LONG},
                          {"role": "user", "content": "hi"}]}
        first = client.responses.create(**body, extra_body={"prompt_cache_options": _opts("12h")})
        d = first.usage.input_tokens_details
        assert d.cache_write_tokens > 0 and d.cached_tokens == 0
        assert d.cache_write_tokens_details.ttl_12h_tokens == d.cache_write_tokens
        assert d.cache_write_tokens_details.ttl_30m_tokens == 0
        backend.clock.advance(6 * 3600)  # a 30m entry would be gone
        again = client.responses.create(**body, extra_body={"prompt_cache_options": _opts("12h")})
        assert again.usage.input_tokens_details.cached_tokens == d.cache_write_tokens
        backend.clock.advance(13 * 3600)
        late = client.responses.create(**body, extra_body={"prompt_cache_options": _opts("30m")})
        ld = late.usage.input_tokens_details
        assert ld.cached_tokens == 0 and ld.cache_write_tokens_details.ttl_30m_tokens > 0
        assert ld.cache_write_tokens_details.ttl_12h_tokens == 0
        with pytest.raises(openai.BadRequestError, match="Supported values are: '30m'"):
            client.chat.completions.create(
                model="gpt-5.6", messages=[{"role": "user", "content": "x"}], max_tokens=2,
                extra_body={"prompt_cache_options": _opts("12h")})
