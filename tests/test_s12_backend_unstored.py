"""Local backend, Responses (new-user trial 28): a request naming a ``conversation`` or a
stored ``prompt`` template, which the backend does not keep, is a 404 naming the limit (the
conversation id was ignored and the prompt dropped, so the cached tokens were not the API's; a
prompt-only request said "Missing required parameter: 'input'"); an ``input_image`` ``detail``
outside openai-python's ``ImageDetail`` is ``invalid_value``."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from promptcache.local.testing import LocalBackend


@pytest.fixture(scope="module")
def client() -> Iterator[openai.OpenAI]:
    with LocalBackend(mode="fast", hidden_size=32, layers=1, heads=2, kv_heads=1,
                      pool_mb=8) as b:
        yield b.openai()


def test_conversation_is_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="gpt-4o", max_output_tokens=4, input="hi",
                                conversation="conv_123")
    assert "conv_123" in str(info.value) and "previous_response_id" in str(info.value)


@pytest.mark.parametrize("extra", [{}, {"input": "hi"}])
def test_stored_prompt_is_not_found(client: openai.OpenAI, extra: dict) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="gpt-4o", max_output_tokens=4,
                                prompt={"id": "pmpt_abc", "variables": {"x": "1"}}, **extra)
    assert "pmpt_abc" in str(info.value)


def test_previous_with_conversation_is_still_the_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="gpt-4o", max_output_tokens=4, input="hi",
                                previous_response_id="resp_1", conversation="conv_1")


def test_input_image_detail_outside_the_enum(client: openai.OpenAI) -> None:
    image = "data:image/png;base64,iVBORw0KGgo="
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="gpt-4o", max_output_tokens=4, input=[
            {"role": "user", "content": [{"type": "input_image", "image_url": image,
                                          "detail": "medium"}]}])
    assert isinstance(info.value.body, dict)
    assert info.value.body.get("param") == "input[0].content[0].detail"


@pytest.mark.parametrize("value", [42, ["c"]])
def test_conversation_of_a_wrong_type_is_a_type_error(client: openai.OpenAI,
                                                      value: object) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="gpt-4o", max_output_tokens=4, input="hi",
                                extra_body={"conversation": value})
    assert isinstance(info.value.body, dict) and info.value.body.get("param") == "conversation"
