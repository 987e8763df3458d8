"""New-user trial 12, findings 5, 10 and 11 (OpenAI caching parameters).

* 5: a Responses request chained with ``previous_response_id`` (or ``conversation`` /
  ``prompt``) holds only the new input; the server prepends the stored conversation, so PC401
  ("nothing is cached") must not judge the prompt by the body.
* 10: ``prompt_cache_options`` on a model that does not take it, or with a TTL the model does
  not take: lint (PC301), the SDK wrapper's lint and the local backend's 400.
* 11: ``prompt_cache_breakpoint`` on a model before GPT-5.6: PC301 says the model takes none
  (not "drop the earliest"), and the planner removes the caller's marker.

Facts: hosted-api-rules.md 2.3 (GPT-5.6+ only; ``ttl`` ``"30m"`` the only value; a 400
before GPT-5.6), https://developers.openai.com/api/docs/guides/prompt-caching.
"""

from __future__ import annotations

from typing import Any

import pytest

from promptcache.lint import lint_request
from promptcache.lint.finding import Finding
from promptcache.prefix import render
from tests.cases import filler

LONG = "You are the support assistant of a plant nursery. " + filler(1500, "rules")


def codes(findings: list[Finding], code: str) -> list[Finding]:
    return [f for f in findings if f.code == code]


def chained(**extra: Any) -> dict[str, Any]:
    """The trial's respB_prev.json: a short new turn chained on a stored response."""
    body: dict[str, Any] = {
        "model": "gpt-5.6",
        "prompt_cache_key": "conv-1",
        "tools": [{"type": "function", "name": "lookup", "description": "Look up a plant",
                   "parameters": {"type": "object",
                                  "properties": {"name": {"type": "string"}}}}],
        "previous_response_id": "resp_123",
        "input": [{"role": "user", "content": "cactus?"}],
    }
    body.update(extra)
    return body


# ------------------------------------------------------------------ finding 5: PC401 / PC402
@pytest.mark.parametrize("field,value", [
    ("previous_response_id", "resp_123"),
    ("conversation", "conv_abc"),
    ("prompt", {"id": "pmpt_1"}),
])
def test_pc401_silent_when_the_server_prepends_a_stored_prompt(field: str, value: Any) -> None:
    body = chained()
    del body["previous_response_id"]
    body[field] = value
    assert codes(lint_request(body), "PC401") == []


def test_pc401_still_fires_for_a_short_unchained_request() -> None:
    body = chained()
    del body["previous_response_id"]
    [f] = codes(lint_request(body), "PC401")
    assert "nothing is cached" in f.message


def test_pc401_log_counts_only_unchained_requests() -> None:
    from promptcache.lint.engine import LogContext, RequestContext
    from promptcache.lint.facts import facts_for
    from promptcache.lint.rules import get_rule

    plain = chained()
    del plain["previous_response_id"]
    entries = []
    for body in (plain, chained()):
        view = render(body)
        entries.append(RequestContext(view, body, facts_for(view.provider, body["model"])))
    [f] = list(get_rule("PC401")().check_log(LogContext("log.jsonl", entries)))
    assert f.details["requests_below"] == 1 and f.details["requests"] == 2


def test_pc402_names_the_stored_part_of_a_chained_prompt() -> None:
    body = chained(instructions=LONG)
    del body["prompt_cache_key"]
    [f] = codes(lint_request(body), "PC402")
    assert "previous_response_id" in f.message and "in the body" in f.message


def test_pc308_does_not_size_a_chained_prompt_by_its_body() -> None:
    body = chained(instructions=LONG)
    [f] = codes(lint_request(body), "PC308")
    tokens = render(body).total_tokens
    assert f"its {tokens}-token prompt" not in f.message
    assert f"previous_response_id adds, plus {tokens} tokens in the body" in f.message


# ------------------------------------------------------------------ finding 11: PC301 message
def bp_on_4o(model: str = "gpt-4o") -> dict[str, Any]:
    return {"model": model, "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "x",
         "prompt_cache_breakpoint": {"mode": "explicit"}}]}]}


def test_pc301_on_a_pre_5_6_model_says_it_takes_no_breakpoint() -> None:
    [f] = codes(lint_request(bp_on_4o()), "PC301")
    assert "gpt-4o caches automatically and takes no prompt_cache_breakpoint" in f.message
    assert "GPT-5.6+ only" in f.message and "HTTP 400" in f.message
    assert "earliest" not in f.fix and "remove prompt_cache_breakpoint" in f.fix
    assert f.path == "input[0].content[0]" and f.details["reason"] == "no_breakpoints"


def test_pc301_too_many_on_gpt_5_6_keeps_its_message() -> None:
    body = {"model": "gpt-5.6", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": f"part {i}",
         "prompt_cache_breakpoint": {"mode": "explicit"}} for i in range(5)]}]}
    [f] = codes(lint_request(body), "PC301")
    assert f.details["reason"] == "too_many" and "earliest" in f.fix


# ------------------------------------------------------------------ finding 10: PC301 options
def test_pc301_prompt_cache_options_on_a_model_that_takes_none() -> None:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}],
            "prompt_cache_options": {"mode": "implicit"}}
    [f] = codes(lint_request(body), "PC301")
    assert f.path == "prompt_cache_options" and f.details["reason"] == "options_unsupported"
    assert "gpt-4o takes no prompt_cache_options" in f.message and "HTTP 400" in f.message


@pytest.mark.parametrize("ttl", ["5h", "24h", "1h"])
def test_pc301_a_ttl_the_model_does_not_take(ttl: str) -> None:
    body = {"model": "gpt-5.6", "input": [{"role": "user", "content": "hi"}],
            "prompt_cache_options": {"mode": "implicit", "ttl": ttl}}
    [f] = codes(lint_request(body), "PC301")
    assert f.path == "prompt_cache_options.ttl" and f.details["ttl"] == ttl
    assert "'30m'" in f.message and f.details["reason"] == "ttl_unsupported"


@pytest.mark.parametrize("opts", [{"mode": "implicit", "ttl": "30m"}, {"mode": "explicit"}, {}])
def test_pc301_silent_on_valid_options(opts: dict[str, Any]) -> None:
    body = {"model": "gpt-5.6", "input": [{"role": "user", "content": "hi"}],
            "prompt_cache_options": opts}
    assert codes(lint_request(body), "PC301") == []


def test_pc301_silent_on_an_unknown_model() -> None:
    body = bp_on_4o("my-vllm-model")
    body["prompt_cache_options"] = {"mode": "implicit", "ttl": "5h"}
    assert codes(lint_request(body), "PC301") == []
