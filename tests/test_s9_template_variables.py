"""Volatile values in a Responses stored prompt template's variables (``prompt.variables``):
the server substitutes them into the template, whose text comes before the input, so a clock
value or a per-request id there breaks the cached prefix. PC101 / PC102 said nothing before."""

from __future__ import annotations

from typing import Any

from promptcache.lint import lint_request


def _body(variables: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "input": [{"role": "user", "content": "hi"}],
            "prompt": {"id": "pmpt_1", "version": "3", "variables": variables}, **extra}


def _found(payload: dict[str, Any]) -> dict[str, Any]:
    return {f.code: f for f in lint_request(payload) if f.code in ("PC101", "PC102")}


def test_clock_and_id_in_template_variables_are_reported() -> None:
    found = _found(_body({"now": "2026-11-30T10:00:00Z", "city": "Paris",
                          "trace": {"type": "input_text",
                                    "text": "req 9f1c2d3e-1234-4abc-9def-0123456789ab"}}))
    ts, uid = found["PC101"], found["PC102"]
    assert ts.severity.value == "warning" and ts.path == "prompt.variables.now"
    assert ts.details["template_variable"] == "now" and ts.details["tokens_invalidated"] is None
    assert "stored prompt template" in ts.message
    assert uid.path == "prompt.variables.trace.text" and uid.details["match"].startswith("9f1c")


def test_a_date_is_info_and_plain_values_are_silent() -> None:
    assert _found(_body({"today": "2026-11-30"}))["PC101"].severity.value == "info"
    assert _found(_body({"city": "Paris", "n": 3, "flag": True})) == {}
    # read after its name: an epoch number, a bare hex request id
    assert _found(_body({"now": 1764496800}))["PC101"].details["subkind"] == "epoch"
    assert _found(_body({"request_id": "8a7f3c2e91b04d55"}))["PC102"].details["match"] == \
        "8a7f3c2e91b04d55"


def test_chat_bodies_have_no_template() -> None:
    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}],
            "prompt": {"variables": {"now": "2026-11-30T10:00:00Z"}}}
    assert _found(chat) == {}
