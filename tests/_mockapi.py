"""The official anthropic / openai clients over an ``httpx2.MockTransport`` (no SDK patching).

Both SDKs (anthropic 2.x, openai 3.x) send through httpx2; a client built here sends every
request to ``handler`` (a ``(httpx2.Request) -> httpx2.Response`` callable) and never retries.
"""

from __future__ import annotations

from collections.abc import Callable

import anthropic
import httpx2
import openai

Handler = Callable[[httpx2.Request], httpx2.Response]


def anthropic_client(handler: Handler, base_url: str = "http://api.test") -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="k", base_url=base_url, max_retries=0,
                               http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))


def openai_client(handler: Handler, base_url: str = "http://api.test/v1",
                  api_key: str = "k") -> openai.OpenAI:
    return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0,
                         http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))


def async_anthropic_client(handler: Handler) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key="k", base_url="http://api.test", max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))


def async_openai_client(handler: Handler) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key="k", base_url="http://api.test/v1", max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))
