"""Review 18 finding 1: a ``to_*()`` call refused after planning (a parameter that is not
JSON: a NaN, a set, a lone surrogate...) still replaced ``last_plan`` and the request
``explain()`` describes with the plan of a request that was never sent. The README loop feeds
``last_plan`` into the next request as ``previous``."""

from __future__ import annotations

from typing import Any

import pytest

from promptcache import InvalidRequestError, PromptBuilder
from tests.cases import filler

# parameters refused only once the request is planned (canonicalised with the payload)
_BAD_PARAMS: list[tuple[dict[str, Any], type[Exception]]] = [
    ({"temperature": float("nan")}, ValueError),
    ({"temperature": float("inf")}, ValueError),
    ({"metadata": {"tags": {"a", "b"}}}, TypeError),
    ({"metadata": {1: "x"}}, TypeError),
    ({"user": object()}, TypeError),
    ({"user": "id-\ud800"}, InvalidRequestError),
]


def _bps(plan: Any) -> list[tuple[str, str, str | None]]:
    return [(bp.path, bp.source, bp.ttl) for bp in plan.breakpoints]


def _marked(b: PromptBuilder) -> dict[str, str]:
    return {r.path: r.breakpoint for r in b.explain().rows if r.breakpoint}


@pytest.mark.parametrize(("bad", "exc"), _BAD_PARAMS)
def test_refused_responses_call_keeps_the_chat_request(bad: dict[str, Any],
                                                       exc: type[Exception]) -> None:
    b = PromptBuilder("gpt-5.6").system(filler(1500, "s")).turn("hi")
    b.to_openai_chat(max_completion_tokens=8, prompt_cache_options={"mode": "explicit"})
    sent = b.last_plan
    assert sent is not None and sent.provider == "openai-chat"
    before_bps = _bps(sent)
    before_explain = _marked(b)
    assert "implicit" not in before_explain.values()
    with pytest.raises(exc):
        b.to_openai_responses(**bad)
    assert b.last_plan is sent
    assert _bps(b.last_plan) == before_bps
    ex = b.explain()
    assert ex.plan.provider == "openai-chat"
    assert _marked(b) == before_explain  # still the explicit-mode chat request's paths
    assert all(p.startswith("messages[") for p in before_explain)


@pytest.mark.parametrize(("bad", "exc"), _BAD_PARAMS)
def test_refused_anthropic_call_keeps_last_plan(bad: dict[str, Any],
                                                exc: type[Exception]) -> None:
    b = PromptBuilder("claude-sonnet-4-5").system(filler(1500, "s")).turn("hi")
    b.to_anthropic(max_tokens=8)
    sent = b.last_plan
    assert sent is not None
    b.turn("more " + filler(1200, "t"))  # the refused request would plan differently
    with pytest.raises(exc):
        b.to_anthropic(max_tokens=8, previous=sent, **bad)
    assert b.last_plan is sent


def test_refused_first_call_leaves_no_plan_and_explain_defaults() -> None:
    b = PromptBuilder("gpt-5.6").system(filler(1500, "s")).turn("hi")
    with pytest.raises(ValueError):
        b.to_openai_responses(temperature=float("nan"))
    assert b.last_plan is None
    # nothing was built: explain() plans the provider's main format (chat), not Responses
    assert b.explain().plan.provider == "openai-chat"


def test_a_later_successful_call_still_records() -> None:
    b = PromptBuilder("gpt-5.6").system(filler(1500, "s")).turn("hi")
    b.to_openai_chat(max_completion_tokens=8)
    with pytest.raises(TypeError):
        b.to_openai_responses(metadata={"s": {1, 2}})
    b.to_openai_responses(max_output_tokens=16)
    assert b.last_plan is not None and b.last_plan.provider == "openai-responses"
    assert b.explain().plan.provider == "openai-responses"
