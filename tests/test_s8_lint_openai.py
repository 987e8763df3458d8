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

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from promptcache.catalog import get_policy
from promptcache.lint import lint_request
from promptcache.lint.finding import Finding
from promptcache.local.testing import SMALL_MODEL, LocalBackend
from promptcache.planner import _fix_user_markers, apply_plan, plan_breakpoints
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


@pytest.mark.parametrize("field,noted", [("previous_response_id", True),
                                          ("conversation", True), ("prompt", False)])
def test_pc101_says_the_stored_turns_after_the_value_lose_caching_too(field: str,
                                                                       noted: bool) -> None:
    body = {"model": "gpt-5.6", "instructions": "Now: 2026-11-30T12:00:00Z. " + LONG,
            "input": [{"role": "user", "content": "cactus?"}], field: "x_1"}
    [f] = codes(lint_request(body), "PC101")
    note = f"{field} adds come after it and lose caching too (their size is not in the body)"
    assert (note in f.message) is noted
    del body[field]
    [plain] = codes(lint_request(body), "PC101")
    assert "adds come after it" not in plain.message


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


def test_pc301_more_than_4_on_gpt_5_6_is_an_info_not_a_400() -> None:
    """4 limits GPT-5.6+ cache writes, not markers (hosted-api-rules.md 2.3; trial 13, F6)."""
    body = {"model": "gpt-5.6", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": f"part {i}",
         "prompt_cache_breakpoint": {"mode": "explicit"}} for i in range(5)]}]}
    [f] = codes(lint_request(body), "PC301")
    assert f.details["reason"] == "writes_latest" and f.severity.value == "info"
    assert "HTTP 400" not in f.message


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


# ------------------------------------------------------------------ finding 10: local backend
@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as b:
        yield b


def _responses(client: openai.OpenAI, model: str, opts: Any) -> Any:
    return client.responses.create(model=model, input=[{"role": "user", "content": "x" * 10}],
                                   max_output_tokens=4, extra_body={"prompt_cache_options": opts})


@pytest.mark.parametrize("route", ["responses", "chat"])
@pytest.mark.parametrize("opts,param,code,text", [
    ({"mode": "bogus"}, "prompt_cache_options.mode", "invalid_value",
     "Invalid value: 'bogus'. Supported values are: 'implicit' and 'explicit'."),
    ({"mode": "implicit", "ttl": "5h"}, "prompt_cache_options.ttl", "invalid_value",
     "Invalid value: '5h'. Supported values are: '30m'"),
    ({"ttl": 30}, "prompt_cache_options.ttl", "invalid_type",
     "Invalid type for 'prompt_cache_options.ttl': expected a string, but got an integer"),
    ("explicit", "prompt_cache_options", "invalid_type",
     "Invalid type for 'prompt_cache_options': expected an object, but got a string instead."),
])
def test_backend_answers_the_apis_400_for_bad_options(
        backend: LocalBackend, route: str, opts: Any, param: str, code: str, text: str) -> None:
    client = backend.openai()
    with pytest.raises(openai.BadRequestError) as err:
        if route == "responses":
            _responses(client, "gpt-5.6", opts)
        else:
            client.chat.completions.create(
                model="gpt-5.6", messages=[{"role": "user", "content": "x"}], max_tokens=4,
                extra_body={"prompt_cache_options": opts})
    body = err.value.body
    assert isinstance(body, dict)
    assert (body["param"], body["code"]) == (param, code) and body["message"].startswith(text)


@pytest.mark.parametrize("opts", [{"mode": "bogus"}, "explicit", {"mode": "implicit"}])
def test_backend_options_on_a_pre_5_6_model_are_unsupported(backend: LocalBackend,
                                                            opts: Any) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        _responses(backend.openai(), "gpt-4o", opts)
    body = err.value.body
    assert isinstance(body, dict) and body["param"] == "prompt_cache_options"
    assert "is not supported with this model (gpt-4o)" in body["message"]


@pytest.mark.parametrize("opts", [{"mode": "implicit", "ttl": "30m"}, {"mode": "explicit"}, {}])
def test_backend_accepts_valid_options(backend: LocalBackend, opts: Any) -> None:
    r = _responses(backend.openai(), "gpt-5.6", opts)
    assert r.usage is not None and r.usage.input_tokens > 0


def test_wrap_lint_warns_before_sending_a_ttl_the_model_does_not_take(
        backend: LocalBackend) -> None:
    import promptcache

    client = promptcache.wrap(backend.openai(), lint="warn")
    with pytest.warns(Warning, match=r"PC301 \(error\) at prompt_cache_options.ttl"), \
            pytest.raises(openai.BadRequestError, match="Supported values are: '30m'"):
        _responses(client, "gpt-5.6", {"mode": "implicit", "ttl": "5h"})


# ------------------------------------------------------------------ finding 11: the planner
@pytest.mark.parametrize("body", [
    bp_on_4o(),
    {"model": "gpt-4o-mini", "messages": [
        {"role": "system", "content": [{"type": "text", "text": LONG,
                                        "prompt_cache_breakpoint": {"mode": "explicit"}}]},
        {"role": "user", "content": [{"type": "text", "text": "hi",
                                      "prompt_cache_breakpoint": {"mode": "explicit"}}]}]},
], ids=["responses-gpt-4o", "chat-gpt-4o-mini"])
def test_planner_drops_markers_on_a_model_that_takes_none(body: dict[str, Any]) -> None:
    policy = get_policy(body["model"])
    view = render(body)
    fixed, edits = _fix_user_markers(view, policy, policy.max_breakpoints)
    assert fixed == []
    assert [e.path for e in edits] == [s.path for s in view.segments if s.breakpoint]
    for e in edits:
        assert e.action == "drop"
        assert f"{policy.model_id} caches automatically and takes no prompt_cache_breakpoint" \
            in e.reason and "HTTP 400" in e.reason and "exceed" not in e.reason
    # apply_plan removes the dropped markers: the request is one the API (and lint) accept
    plan = dataclasses.replace(plan_breakpoints(view, policy), marker_edits=tuple(edits))
    before = json.dumps(body)
    new = apply_plan(body, plan, share_unchanged=True)
    assert json.dumps(body) == before  # the caller's request is not mutated
    assert "prompt_cache_breakpoint" not in json.dumps(new)
    assert [f for f in lint_request(new) if f.code == "PC301"] == []


def test_apply_plan_without_the_marker_gets_a_200(backend: LocalBackend) -> None:
    body = bp_on_4o()
    policy = get_policy("gpt-4o")
    view = render(body)
    _, edits = _fix_user_markers(view, policy, 0)
    new = apply_plan(body, dataclasses.replace(plan_breakpoints(view, policy),
                                               marker_edits=tuple(edits)))
    client = backend.openai()
    with pytest.raises(openai.BadRequestError, match="prompt_cache_breakpoint"):
        client.responses.create(**body, max_output_tokens=4)
    assert client.responses.create(**new, max_output_tokens=4).usage is not None


def test_plan_breakpoints_reports_the_drop() -> None:
    plan = plan_breakpoints(render(bp_on_4o()), get_policy("gpt-4o"))
    assert [e.action for e in plan.marker_edits] == ["drop"]


def test_wrap_auto_cache_drops_the_marker_on_gpt_4o(backend: LocalBackend) -> None:
    """wrap(auto_cache=True) used to send the caller's marker to a model that takes none (the
    planner returned before repairing markers): the API's 400. Now dropped, with a warning."""
    from promptcache.sdk import PromptCacheWarning, wrap
    from promptcache.usage import UsageTracker

    client = wrap(backend.openai(), tracker=UsageTracker(), auto_cache=True, lint="off")
    with pytest.warns(PromptCacheWarning, match="drop of your cache marker.*takes no"):
        response = client.responses.create(**bp_on_4o(), max_output_tokens=4)
    assert response.usage is not None
