"""The planner and lint PC303 apply one rule to an estimated prefix near the model's minimum
(review 17: at 3,561 estimated tokens on Haiku 4.5, PC303 said "keep the marker" while the
planner placed none; PC303 rounded the error up, the planner did not)."""

from __future__ import annotations

import pytest

from promptcache.catalog import get_policy
from promptcache.lint import lint_request
from promptcache.planner import plan_breakpoints
from promptcache.prefix import render
from promptcache.tokens import view_count_bound

MODEL = "claude-haiku-4-5"


def _request(words: int, marked: bool) -> dict[str, object]:
    block: dict[str, object] = {"type": "text", "text": "plant " * words}
    if marked:
        block["cache_control"] = {"type": "ephemeral"}
    return {"model": MODEL, "max_tokens": 10, "system": [block],
            "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("words", [*range(3400, 3700, 25), *range(3550, 3575)])
def test_planner_and_pc303_agree(words: int) -> None:
    policy = get_policy(MODEL)
    minimum = policy.min_cacheable_tokens
    view = render(_request(words, False), "anthropic", model=MODEL)
    tokens = view.segments[0].end_token
    if tokens >= minimum:
        pytest.skip("at or over the minimum")
    planned = {b.path for b in plan_breakpoints(view, policy).breakpoints}
    findings = [f for f in lint_request(_request(words, True), model=MODEL)
                if f.code == "PC303"]
    # the two agree with each other (3,561 estimated tokens: PC303 said "keep the marker"
    # while the planner placed none) and with the shared rule
    assert [f.details["within_error"] for f in findings] == ["system[0]" in planned]
    _exact, rate = view_count_bound(view)
    from promptcache.planner import may_reach_minimum

    assert ("system[0]" in planned) == may_reach_minimum(tokens, rate, minimum)
