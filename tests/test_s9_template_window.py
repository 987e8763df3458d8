"""GPT-5.6+: reads look at the latest 80 breakpoints of the request only (review 14 F7;
hosted-api-rules.md 2.3 [O3]; the Azure doc says 50 [O4], a CONFLICT the catalog records)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from promptcache.catalog import get_policy
from promptcache.local.accounting import read_window_start
from promptcache.local.template import apply_template
from promptcache.local.testing import SMALL_MODEL, LocalBackend
from tests.cases import filler

MODEL = "gpt-5.6-sol"
BP = {"mode": "explicit"}


def _window() -> int:
    window = get_policy(MODEL).read_breakpoint_window
    assert window is not None
    return window


def test_catalog_window_is_sourced_with_the_azure_conflict() -> None:
    policy = get_policy(MODEL)
    src = policy.sources["read_breakpoint_window"]
    assert policy.read_breakpoint_window == 80
    assert src.url == "https://github.com/openai/openai-python"
    assert not src.confirmed and "50" in src.note and "Azure" in src.note
    assert get_policy("claude-opus-5").read_breakpoint_window is None


def _body(later: int, tag: str = "n") -> dict[str, Any]:
    system = {"type": "text", "text": filler(1200, "s"), "prompt_cache_breakpoint": BP}
    parts = [{"type": "text", "text": f"note {i} " + filler(3, f"{tag}{i}_"),
              "prompt_cache_breakpoint": BP} for i in range(later)]
    body: dict[str, Any] = {"model": MODEL, "max_completion_tokens": 2,
                            "messages": [{"role": "system", "content": [system]},
                                         {"role": "user", "content": parts or "start"}]}
    return body


def test_window_start() -> None:
    w = _window()
    inside = apply_template(_body(w - 1), "openai-chat", model=MODEL)  # w breakpoints in all
    assert read_window_start(inside, w) == 0
    assert read_window_start(inside, None) == 0
    outside = apply_template(_body(w + 5), "openai-chat", model=MODEL)
    start = read_window_start(outside, w)
    assert start > outside.span_of("messages[0].content[0]").segment.index
    assert start == outside.span_of("messages[1].content[5]").segment.index
    # the implicit breakpoint on the newest message counts too (default mode)
    implicit = _body(w - 1)
    implicit["messages"][1]["content"][-1].pop("prompt_cache_breakpoint")
    implicit["messages"].append({"role": "user", "content": "more"})
    prompt = apply_template(implicit, "openai-chat", model=MODEL)  # w - 1 explicit + 1 implicit
    assert read_window_start(prompt, w) == 0
    assert read_window_start(prompt, w - 1) > 0


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as b:
        yield b


def test_an_entry_older_than_the_window_is_not_read(backend: LocalBackend) -> None:
    client = backend.openai()
    w = _window()

    def cached(body: dict[str, Any]) -> int:
        details = client.chat.completions.create(**body).usage.prompt_tokens_details
        assert details is not None
        return details.cached_tokens or 0

    cached(_body(0))  # writes the system entry
    system_end = apply_template(_body(0), "openai-chat", model=MODEL).span_of(
        "messages[0].content[0]").end
    # the system breakpoint is the w-th newest: read (the later parts are new each time)
    assert cached(_body(w - 1, tag="a")) == system_end
    assert cached(_body(w + 5, tag="b")) == 0  # (w + 6)-th newest: not looked at
