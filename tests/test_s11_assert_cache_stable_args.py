"""assert_cache_stable names the usual mistakes (new-user trial 18): an unwrapped client (the
pytest plugin's fixtures give unwrapped ones) said "'Anthropic' object is not iterable", and
one request dict was iterated by its keys ("... not str")."""

from __future__ import annotations

import anthropic
import openai
import pytest

from promptcache.sdk import assert_cache_stable

REQ = {"model": "claude-sonnet-4-6", "max_tokens": 10,
       "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("client", [
    anthropic.Anthropic(api_key="k", base_url="http://x.test"),
    openai.OpenAI(api_key="k", base_url="http://x.test/v1")])
def test_an_unwrapped_client_is_named(client: object) -> None:
    with pytest.raises(TypeError, match=r"unwrapped .* client: wrap it first"):
        assert_cache_stable(client)


def test_one_request_instead_of_a_list_is_named() -> None:
    with pytest.raises(TypeError, match=r"not one request: pass \[request_a"):
        assert_cache_stable(REQ)


def test_json_text_is_named() -> None:
    with pytest.raises(TypeError, match=r"json\.loads"):
        assert_cache_stable('[{"model": "x"}]')


def test_something_not_iterable_is_named() -> None:
    with pytest.raises(TypeError, match="not int"):
        assert_cache_stable(5)


def test_a_list_still_works() -> None:
    assert_cache_stable([REQ, REQ])
