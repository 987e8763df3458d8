"""auto_cache removes ``prompt_cache_options`` on a model before GPT-5.6 (the API's 400).

The planner repairs the caller's cache markers where the API would reject them; a
``prompt_cache_options`` sent to gpt-4o was left in place, so ``wrap(auto_cache=True)`` sent a
request it knew would fail (new-user trial 12, follow-up of finding 10).
"""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from promptcache.catalog import get_policy
from promptcache.local.testing import SMALL_MODEL, LocalBackend
from promptcache.planner import apply_plan, auto_cache, plan_breakpoints
from promptcache.prefix import render
from promptcache.sdk import PromptCacheWarning, wrap
from promptcache.usage import UsageTracker

OPTIONS = {"mode": "implicit", "ttl": "30m"}


def body(model: str) -> dict[str, object]:
    return {"model": model, "prompt_cache_options": dict(OPTIONS),
            "input": [{"role": "user", "content": "Which fern likes shade?"}]}


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as b:
        yield b


def test_the_plan_drops_prompt_cache_options_on_gpt_4o_only() -> None:
    for model, dropped in (("gpt-4o", ("prompt_cache_options",)), ("gpt-5.6", ())):
        request = body(model)
        plan = plan_breakpoints(render(request), get_policy(model))
        assert plan.dropped_params == dropped
        out = apply_plan(request, plan)
        assert ("prompt_cache_options" in out) is (not dropped)
        assert request["prompt_cache_options"] == OPTIONS  # the caller's dict is not mutated
    assert "prompt_cache_options" not in auto_cache(body("gpt-4o"))


def test_wrap_auto_cache_sends_gpt_4o_a_request_the_api_takes(backend: LocalBackend) -> None:
    with pytest.raises(openai.BadRequestError, match="prompt_cache_options"):
        backend.openai().responses.create(**body("gpt-4o"), max_output_tokens=4)
    client = wrap(backend.openai(), tracker=UsageTracker(), auto_cache=True, lint="off")
    with pytest.warns(PromptCacheWarning, match="removed prompt_cache_options"):
        response = client.responses.create(**body("gpt-4o"), max_output_tokens=4)
    assert response.usage is not None
    # given through extra_body (an SDK that does not type the field): removed there too
    extra = body("gpt-4o")
    options = extra.pop("prompt_cache_options")
    response = client.responses.create(**extra, extra_body={"prompt_cache_options": options},
                                       max_output_tokens=4)
    assert response.usage is not None
