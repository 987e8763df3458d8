"""Local backend, OpenAI routes (session 12): a Responses message part of a Chat Completions
type is refused as the hosted API refuses it (review 23), and ``prompt_cache_retention=
"in_memory"`` is accepted on a model without extended retention (trial 22, finding 3)."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from promptcache.local.testing import LocalBackend


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", hidden_size=32, layers=1, heads=2, kv_heads=1,
                      pool_mb=8) as b:
        yield b


@pytest.mark.parametrize("part", [{"type": "text", "text": "hi"},
                                  {"type": "image_url",
                                   "image_url": {"url": "data:image/png;base64,AAAA"}}])
def test_responses_refuses_chat_part_types(backend: LocalBackend, part: dict) -> None:
    client = backend.openai()
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="gpt-4o", max_output_tokens=4, input=[
            {"role": "user", "content": [{"type": "input_text", "text": "first"}, part]}])
    body = info.value.body
    assert isinstance(body, dict)
    assert body.get("code") == "invalid_value"
    assert body.get("param") == "input[0].content[1]"
    assert f"'{part['type']}'" in str(body.get("message"))
    assert "'input_text'" in str(body.get("message"))


def test_responses_input_parts_still_accepted(backend: LocalBackend) -> None:
    client = backend.openai()
    out = client.responses.create(model="gpt-4o", max_output_tokens=4, input=[
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
        {"role": "user", "content": "and again"}])
    assert out.usage is not None


def test_chat_text_parts_unaffected(backend: LocalBackend) -> None:
    client = backend.openai()
    out = client.chat.completions.create(model="gpt-4o", max_tokens=4, messages=[
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert out.usage is not None


def test_in_memory_retention_on_model_without_extended(backend: LocalBackend) -> None:
    client = backend.openai()
    out = client.chat.completions.create(model="gpt-4o", max_tokens=4,
                                         prompt_cache_retention="in_memory",
                                         messages=[{"role": "user", "content": "hi"}])
    assert out.usage is not None
    with pytest.raises(openai.BadRequestError) as info:  # 24h still refused there
        client.chat.completions.create(model="gpt-4o", max_tokens=4,
                                       prompt_cache_retention="24h",
                                       messages=[{"role": "user", "content": "hi"}])
    assert "gpt-4o" in str(info.value)


def test_in_memory_refused_where_only_24h(backend: LocalBackend) -> None:
    client = backend.openai()
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="gpt-5.5", max_tokens=4,
                                       prompt_cache_retention="in_memory",
                                       messages=[{"role": "user", "content": "hi"}])


def test_24h_retention_accepted_and_ignored_on_gpt_5_6(backend: LocalBackend) -> None:
    """openai-python: gpt-5.5 "and future models" take only 24h; on GPT-5.6+ entries live by
    prompt_cache_options.ttl, so the field is accepted and changes nothing (review 24, B)."""
    client = backend.openai()
    out = client.chat.completions.create(model="gpt-5.6", max_completion_tokens=4,
                                         prompt_cache_retention="24h",
                                         messages=[{"role": "user", "content": "hi"}])
    assert out.usage is not None
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="gpt-5.6", max_completion_tokens=4,
                                       prompt_cache_retention="in_memory",
                                       messages=[{"role": "user", "content": "hi"}])
