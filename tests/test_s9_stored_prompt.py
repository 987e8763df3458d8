"""A Responses ``prompt`` (a stored prompt template the server expands into the prompt) is
content: a changed id, version or variable is ``stored_prompt_changed`` (``cannot_tell``), in
``diff`` and in ``explain``; the same template in both is compared as before, with a note that
its text is not counted. Before, a changed template version was "no miss, no difference"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from promptcache.diff import diff, explain
from tests.cases import filler

LONG = filler(1500)


def _body(prompt: dict[str, Any] | None, user: str = "hi") -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-4o", "input": [
        {"role": "developer", "content": LONG}, {"role": "user", "content": user}]}
    if prompt is not None:
        body["prompt"] = prompt
    return body


P3 = {"id": "pmpt_1", "version": "3", "variables": {"city": "Paris"}}


def test_a_changed_template_version_or_variable_is_stored_prompt_changed() -> None:
    for changed, field in (({**P3, "version": "4"}, "prompt.version"),
                           ({**P3, "variables": {"city": "Rome"}}, "prompt.variables.city")):
        r = diff(_body(P3), _body(changed))
        assert (r.verdict, r.cause) == ("cannot_tell", "stored_prompt_changed")
        assert r.lost_tokens is None and r.miss_cost_usd is None
        assert field in r.causes[0].note
    only_a = diff(_body(P3), _body(None))
    assert only_a.cause == "stored_prompt_changed" and "only A" in only_a.causes[0].note


def test_the_same_template_is_compared_with_a_note() -> None:
    r = diff(_body(P3), _body(dict(P3), "hello"))
    assert r.verdict != "cannot_tell"
    assert any("same stored prompt template" in n for n in r.notes)
    plain = diff(_body(None), _body(None, "hello"))
    assert not any("stored prompt template" in n for n in plain.notes)


def test_explain_reports_the_changed_template(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    lines = [{"request": _body(P3), "timestamp": "2026-11-30T10:00:00Z"},
             {"request": _body({**P3, "version": "4"}), "timestamp": "2026-11-30T10:01:00Z"}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    report = explain(log)
    second = report.requests[1]
    assert (second.status, second.cause) == ("cannot_tell", "stored_prompt_changed")


def test_explain_prices_a_template_change_the_usage_shows_as_a_miss(tmp_path: Path) -> None:
    usage = {"input_tokens": 2000, "output_tokens": 5, "input_tokens_details": {
        "cached_tokens": 0}}
    short = {"model": "gpt-4o", "input": [{"role": "user", "content": "hi"}]}
    log = tmp_path / "requests.jsonl"
    lines = [{"request": {**short, "prompt": P3}, "usage": usage,
              "timestamp": "2026-11-30T10:00:00Z"},
             {"request": {**short, "prompt": {**P3, "version": "4"}}, "usage": usage,
              "timestamp": "2026-11-30T10:01:00Z"}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    first, second = explain(log).requests
    # the body is 1 token, but the template is not in it: not "below the minimum"
    assert first.status == "cold_start" and first.cause is None
    assert (second.status, second.cause, second.path) == (
        "miss_explained", "stored_prompt_changed", "prompt")
    assert second.lost_tokens == 1920  # what line 1 left cached (2,000 on the 128 grid)


def test_explain_text_names_the_template_change_not_previous_response_id(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from promptcache.cli import main

    log = tmp_path / "requests.jsonl"
    lines = [{"request": _body(P3)}, {"request": _body({**P3, "version": "4"})}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = CliRunner().invoke(main, ["explain", str(log), "--all"])
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())
    assert "changes the stored prompt template" in flat
    assert "previous_response_id" not in flat


def test_wrapper_live_diff_logs_a_changed_template(caplog: Any) -> None:
    import logging

    from promptcache.sdk import tracker_of, wrap
    from tests._mockapi import openai_client
    from tests.test_sdk_wrap import Api

    client = wrap(openai_client(Api()), lint="off", session="s")
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        client.responses.create(model="gpt-4o", input="hi", prompt=P3)
        client.responses.create(model="gpt-4o", input="hi", prompt=dict(P3))
        assert "stored_prompt_changed" not in caplog.text
        client.responses.create(model="gpt-4o", input="hi", prompt={**P3, "version": "4"})
    assert "stored_prompt_changed" in caplog.text and "prompt.version" in caplog.text
    records = tracker_of(client).records
    assert [r.kept_prefix for r in records][1:] == [True, False]


def test_assert_cache_stable_fails_on_a_changed_template() -> None:
    import pytest

    from promptcache.sdk import assert_cache_stable

    assert_cache_stable([_body(P3), _body(dict(P3), "hello")])
    with pytest.raises(AssertionError, match=r"stored_prompt_changed.*prompt\.variables\.city"):
        assert_cache_stable([_body(P3), _body({**P3, "variables": {"city": "Rome"}})])
