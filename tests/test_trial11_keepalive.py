"""keepalive(): ``every`` must be below the TTL of the request's cache entries, and its bounds
(``every``, ``max_pings``, ``max_usd``) are refused with a ValueError before any ping.

Trial 11, finding 4: ``every=400`` on a request with 5m markers was accepted silently, so each
"keep-alive" ping arrived after the entry expired and wrote the prefix again at 1.25x; and
``max_usd="abc"`` raised ``decimal.InvalidOperation``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from promptcache.sdk import PromptCacheWarning, keepalive, wrap
from tests._mockapi import anthropic_client, openai_client

SYSTEM = "You are a careful assistant for a plant nursery. " * 120
A_MODEL = "claude-sonnet-4-6"
USAGE = {"input_tokens": 11, "cache_read_input_tokens": 1400, "cache_creation_input_tokens": 0,
         "output_tokens": 0}


class Api:
    """MockTransport handler: canned Anthropic / OpenAI chat answers; keeps the bodies."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        self.bodies.append(body)
        if request.url.path.endswith("/v1/messages"):
            return httpx2.Response(200, json={
                "id": "msg_01", "type": "message", "role": "assistant", "model": body["model"],
                "content": [], "stop_reason": "max_tokens", "stop_sequence": None,
                "usage": USAGE})
        return httpx2.Response(200, json={
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "length",
                         "message": {"role": "assistant", "content": "T"}}],
            "usage": {"prompt_tokens": 1500, "completion_tokens": 1, "total_tokens": 1501,
                      "prompt_tokens_details": {"cached_tokens": 1408}}})


@pytest.fixture
def api() -> Api:
    return Api()


@pytest.fixture
def claude(api: Api) -> anthropic.Anthropic:
    return anthropic_client(api)


@pytest.fixture
def gpt(api: Api) -> openai.OpenAI:
    return openai_client(api)


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", PromptCacheWarning)
        yield


def a_request(cache_control: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": SYSTEM}
    if cache_control is not None:
        block["cache_control"] = cache_control
    return {"model": A_MODEL, "max_tokens": 64, "system": [block],
            "messages": [{"role": "user", "content": "How often do I water a fern?"}], **extra}


FIVE = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


def run(client: Any, request: dict[str, Any], every: float, pings: int = 2) -> Any:
    clock = [0.0]

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    handle = keepalive(client, request, every=every, max_pings=pings, max_usd=None,
                       sleep=sleep, clock=lambda: clock[0], start=False)
    handle.run()
    return handle


# ---------------------------------------------------------------------------- Anthropic TTLs
@pytest.mark.parametrize("marker", [FIVE, {"type": "ephemeral", "ttl": "5m"}])
def test_every_at_or_above_a_5m_ttl_is_refused_before_any_ping(
        api: Api, claude: anthropic.Anthropic, marker: dict[str, Any]) -> None:
    for every in (400, 300, 300.0):
        with pytest.raises(ValueError, match=r"every=\d+ s is not below the request's 5m TTL "
                                             r"\(300 s\): each ping would write the prefix "
                                             r"again instead of reading it"):
            keepalive(claude, a_request(marker), every=every, max_pings=3, max_usd=None,
                      start=False)
    assert api.bodies == []  # refused before anything was sent


def test_below_the_5m_ttl_still_pings(api: Api, claude: anthropic.Anthropic) -> None:
    handle = run(claude, a_request(FIVE), every=299)
    assert (handle.stopped, handle.pings, len(api.bodies)) == ("max_pings", 2, 2)


def test_a_1h_entry_allows_longer_intervals(api: Api, claude: anthropic.Anthropic) -> None:
    assert run(claude, a_request(HOUR), every=400).pings == 2
    with pytest.raises(ValueError, match="1h TTL \\(3600 s\\)"):
        keepalive(claude, a_request(HOUR), every=3600, start=False)


def test_the_shortest_ttl_among_the_markers_rules(claude: anthropic.Anthropic) -> None:
    req = a_request(HOUR)
    req["messages"] = [{"role": "user", "content": [
        {"type": "text", "text": "Question one. " * 50, "cache_control": FIVE}]}]
    with pytest.raises(ValueError, match="5m TTL"):  # the 5m entry would lapse
        keepalive(claude, req, every=400, start=False)


def test_the_top_level_automatic_marker_counts(claude: anthropic.Anthropic) -> None:
    with pytest.raises(ValueError, match="5m TTL"):
        keepalive(claude, a_request(None) | {"cache_control": FIVE}, every=400, start=False)
    req = a_request(None) | {"cache_control": HOUR}
    keepalive(claude, req, every=400, start=False)  # a 1h automatic entry: accepted


def test_a_request_without_a_marker_has_nothing_to_keep_alive(
        api: Api, claude: anthropic.Anthropic) -> None:
    with pytest.raises(ValueError, match="no cache marker"):
        keepalive(claude, a_request(None), every=240, start=False)
    assert api.bodies == []


def test_a_wrapped_auto_cache_client_places_5m_markers(api: Api,
                                                       claude: anthropic.Anthropic) -> None:
    client = wrap(claude, auto_cache=True, lint="off")
    assert run(client, a_request(None), every=240, pings=1).pings == 1
    assert any("cache_control" in json.dumps(b) for b in api.bodies)  # the wrapper marked it
    with pytest.raises(ValueError, match="5m TTL"):  # the planner's markers are 5m
        keepalive(client, a_request(None), every=400, start=False)
    with pytest.raises(ValueError, match="no cache marker"):  # auto_cache off for this request
        keepalive(client, a_request(None, promptcache_auto_cache=False), start=False)


# ---------------------------------------------------------------------------- OpenAI TTLs
def oa_request(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "system", "content": SYSTEM},
                                         {"role": "user", "content": "q"}], **extra}


def test_openai_explicit_breakpoints_and_implicit_ttl(gpt: openai.OpenAI) -> None:
    marked = oa_request("gpt-5.6-sol")
    marked["messages"][0] = {"role": "system", "content": [
        {"type": "text", "text": SYSTEM, "prompt_cache_breakpoint": {"mode": "explicit"}}]}
    with pytest.raises(ValueError, match="30m TTL \\(1800 s\\)"):
        keepalive(gpt, marked, every=1800, start=False)
    keepalive(gpt, marked, every=1700, start=False)
    with pytest.raises(ValueError, match="30m TTL"):  # GPT-5.6 implicit breakpoint: 30m
        keepalive(gpt, oa_request("gpt-5.6-sol"), every=2000, start=False)
    with pytest.raises(ValueError, match="caches nothing"):
        keepalive(gpt, oa_request("gpt-5.6-sol", prompt_cache_options={"mode": "explicit"}),
                  start=False)


def test_openai_models_without_a_ttl_are_not_checked(api: Api, gpt: openai.OpenAI) -> None:
    assert run(gpt, oa_request("gpt-4o"), every=400, pings=1).pings == 1
    assert run(gpt, oa_request("my-private-model"), every=4000, pings=1).pings == 1


# ---------------------------------------------------------------------------- bounds
@pytest.mark.parametrize(("kwargs", "name"), [
    ({"max_usd": "abc"}, "max_usd"), ({"max_usd": "NaN"}, "max_usd"),
    ({"max_usd": -1}, "max_usd"), ({"max_usd": Decimal("-0.01")}, "max_usd"),
    ({"max_usd": True}, "max_usd"), ({"max_usd": [1]}, "max_usd"),
    ({"every": 0}, "every"), ({"every": -5}, "every"), ({"every": float("nan")}, "every"),
    ({"every": float("inf")}, "every"), ({"every": "240"}, "every"),
    ({"max_pings": -1}, "max_pings"), ({"max_pings": 2.5}, "max_pings"),
    ({"max_pings": True}, "max_pings"),
])
def test_bad_bounds_are_value_errors_naming_the_argument(
        api: Api, claude: anthropic.Anthropic, kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        keepalive(claude, a_request(FIVE), start=False, **kwargs)
    assert api.bodies == []


def test_good_bounds_are_accepted(claude: anthropic.Anthropic) -> None:
    for max_usd in ("0.50", 0, 1.5, Decimal("2"), None):
        handle = keepalive(claude, a_request(FIVE), max_usd=max_usd, max_pings=0, start=False)
        assert handle.max_usd == (None if max_usd is None else Decimal(str(max_usd)))
