"""Regression tests for new-user trial 24 (issue 1): in a JSONL request log, PC101 reported a
date that is identical in every request even when the log spans more than a day and shows
cache reads ("Refund policy updated: 2024-03-01." -> "lose caching once a day"). A value the
log shows unchanged at the same path over longer than a clock of its granularity can hold is
stable text; a single request, a short log, and a value that changes keep their findings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from promptcache.lint.api import lint_paths

RULES = " ".join(f"Rule {i}: customers may return items within thirty days when receipts "
                 "are present." for i in range(120))
T0 = 1709280000


def _request(system: str, question: str, tools: list[dict[str, Any]] | None = None
             ) -> dict[str, Any]:
    req: dict[str, Any] = {
        "model": "claude-sonnet-4-5", "max_tokens": 100,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": question}]}
    if tools:
        req["tools"] = tools
    return req


def _line(ts: float, req: dict[str, Any], read: int = 2300) -> str:
    usage = {"input_tokens": 20, "cache_read_input_tokens": read,
             "cache_creation_input_tokens": 0, "output_tokens": 5}
    return json.dumps({"timestamp": ts, "request": req, "response": {"usage": usage}})


def _lint(tmp_path: Path, lines: list[str], name: str = "log.jsonl") -> list[Any]:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = lint_paths([str(path)])
    assert result.errors == []
    return [f for f in result.findings if f.code == "PC101"]


STABLE = "Refund policy updated: 2024-03-01. " + RULES


def test_same_date_in_every_request_over_more_than_a_day_is_stable(tmp_path: Path) -> None:
    # the trial's repro: 4 lines 30,000 s apart (25 hours), cache reads of 2,300 tokens
    lines = [_line(T0 + 30000 * i, _request(STABLE, f"question {i}")) for i in range(4)]
    assert _lint(tmp_path, lines) == []


def test_single_request_still_reported(tmp_path: Path) -> None:
    found = _lint(tmp_path, [_line(T0, _request(STABLE, "q"))])
    assert [(f.details["match"], f.severity.value) for f in found] == [("2024-03-01", "info")]
    path = tmp_path / "one.json"
    path.write_text(json.dumps(_request(STABLE, "q")), encoding="utf-8")
    assert [f.code for f in lint_paths([str(path)]).findings if f.code == "PC101"] == ["PC101"]


def test_log_shorter_than_a_day_proves_nothing(tmp_path: Path) -> None:
    # 24 hours could all fall on one (25-hour) day: a clock date may not have changed yet
    lines = [_line(T0 + 28800 * i, _request(STABLE, f"q{i}")) for i in range(4)]
    found = _lint(tmp_path, lines)
    assert len(found) == 1 and found[0].details["occurrences"] == 4


def test_without_send_times_nothing_is_proved(tmp_path: Path) -> None:
    lines = [json.dumps({"request": _request(STABLE, f"q{i}")}) for i in range(4)]
    assert len(_lint(tmp_path, lines)) == 1


def test_a_date_that_changes_is_still_a_clock(tmp_path: Path) -> None:
    lines = [_line(T0 + 43200 * i, _request(f"Today's date: 2024-03-0{1 + i // 2}. " + RULES,
                                            f"q{i}")) for i in range(4)]
    found = _lint(tmp_path, lines)
    assert {f.details["match"] for f in found} == {"2024-03-01"}
    assert found[0].details["occurrences"] == 4


def test_second_granularity_value_unchanged_over_minutes_is_stable(tmp_path: Path) -> None:
    system = "Price list generated 2024-03-01 09:00:00 UTC. " + RULES
    lines = [_line(T0 + 120 * i, _request(system, f"q{i}")) for i in range(3)]
    assert _lint(tmp_path, lines) == []
    # under one second apart: a second-granularity clock may not have ticked
    lines = [_line(T0 + 0.2 * i, _request(system, f"q{i}")) for i in range(3)]
    assert len(_lint(tmp_path, lines)) == 1


def test_evidence_is_per_agent(tmp_path: Path) -> None:
    # agent B (its own tool set) sends the date once: the other agent's requests prove
    # nothing about it
    tool = [{"name": "lookup", "description": "Look an order up.",
             "input_schema": {"type": "object", "properties": {}}}]
    lines = [_line(T0 + 30000 * i, _request(STABLE, f"q{i}")) for i in range(4)]
    lines.append(_line(T0 + 10, _request(STABLE, "b", tools=tool)))
    found = _lint(tmp_path, lines)
    assert [f.details["request_index"] for f in found] == [4]


def test_stored_prompt_template_variable_unchanged_over_days_is_stable(tmp_path: Path) -> None:
    def req(i: int, date: str) -> dict[str, Any]:
        return {"model": "gpt-5", "prompt_cache_key": "k",
                "prompt": {"id": "pmpt_abc", "variables": {"policy_date": date}},
                "input": [{"role": "user", "content": f"q{i}"}]}

    lines = [json.dumps({"timestamp": T0 + 50000 * i, "request": req(i, "2024-03-01")})
             for i in range(3)]
    assert _lint(tmp_path, lines) == []
    lines = [json.dumps({"timestamp": T0 + 50000 * i, "request": req(i, f"2024-03-0{i + 1}")})
             for i in range(3)]
    assert [f.path for f in _lint(tmp_path, lines)] == ["prompt.variables.policy_date"]
