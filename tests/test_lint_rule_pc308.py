"""PC308 breakpoint.unmarkable-instructions: a GPT-5.6+ Responses request whose shared prompt
sits in ``instructions`` (which cannot carry a breakpoint) and no input part carries one, so
each call writes its prompt at the implicit breakpoint on its newest input, which only the next
turn of the same conversation reads (hosted-api-rules.md 2.3; https://developers.openai.com/api/docs/guides/prompt-caching).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from promptcache.lint import LintConfig, lint_paths, lint_request
from promptcache.lint.cli import rule_command
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules import RULE_CODES, get_rule
from tests.cases import filler

LONG = "You are a support agent. " + filler(1500, "rules")


def responses(model: str = "gpt-5.6-sol", instructions: str = LONG,
              **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "instructions": instructions,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
    }
    body.update(extra)
    return body


def pc308(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.code == "PC308"]


def write_pretty(path: Path, body: dict[str, Any]) -> None:
    """One key per line, so the finding's line and column are checked against the file."""
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in body.items()]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")


def test_registered_with_metadata() -> None:
    rule = get_rule("PC308")
    assert "PC308" in RULE_CODES and get_rule("breakpoint.unmarkable-instructions") is rule
    assert rule.severity is Severity.WARNING and rule.status == "stable"
    assert rule.inputs == frozenset({"request"})  # log entries run it per request
    assert "developer" in rule.fix_title and "prompt_cache_breakpoint" in rule.fix_title


def test_long_instructions_without_breakpoint_one_finding_at_instructions(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    write_pretty(path, responses())
    result = lint_paths([str(path)], LintConfig(select=("PC308",)))
    assert result.errors == []
    [f] = result.findings
    assert (f.code, f.severity, f.path) == ("PC308", Severity.WARNING, "instructions")
    # the opening quote of the instructions value: line 3 of the file
    line = path.read_text(encoding="utf-8").splitlines()[f.line - 1]
    assert f.line == 3 and line[f.col - 1:].startswith('"You are a support agent.')
    tokens = f.details["instructions_tokens"]
    assert tokens >= 1500 and f"the {tokens} tokens of instructions" in f.message
    assert "written again by every new conversation" in f.message
    assert f.details["prompt_tokens"] > tokens and f.details["model_minimum"] == 1024
    assert f.fix == get_rule("PC308").fix_title


def test_default_selection_and_alias_model() -> None:
    # stable: on by default; "gpt-5.6" resolves to a catalog model with explicit breakpoints
    assert len(pc308(lint_request(responses(model="gpt-5.6")))) == 1
    assert len(pc308(lint_request(responses(model="gpt-6-sol")))) == 1


def test_plain_string_input_cannot_carry_a_breakpoint_either() -> None:
    assert len(pc308(lint_request(responses(input="hi")))) == 1


@pytest.mark.parametrize("where", ["user", "developer"])
def test_breakpoint_on_an_input_part_is_fine(where: str) -> None:
    body = responses()
    part = {"type": "input_text", "text": "ctx", "prompt_cache_breakpoint": {"mode": "explicit"}}
    if where == "user":
        body["input"][0]["content"][0]["prompt_cache_breakpoint"] = {"mode": "explicit"}
    else:
        body["input"].insert(0, {"role": "developer", "content": [part]})
    assert pc308(lint_request(body)) == []


def test_instructions_under_the_minimum() -> None:
    assert pc308(lint_request(responses(instructions="You are terse. " + filler(800, "r")))) == []


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-5", "gpt-5.5"])
def test_models_without_explicit_breakpoints(model: str) -> None:
    assert pc308(lint_request(responses(model=model))) == []


def test_unknown_model_stays_silent() -> None:
    assert pc308(lint_request(responses(model="gpt-7-nova"))) == []


def test_chat_completions_is_not_checked() -> None:
    body = {"model": "gpt-5.6-sol", "messages": [{"role": "system", "content": LONG},
                                                 {"role": "user", "content": "hi"}]}
    assert pc308(lint_request(body)) == []


def test_explicit_mode_turns_caching_off() -> None:
    body = responses(prompt_cache_options={"mode": "explicit"})
    assert pc308(lint_request(body)) == []
    # the default (implicit) mode written out is still the bug
    assert len(pc308(lint_request(responses(prompt_cache_options={"mode": "implicit"})))) == 1


def test_no_input_item_no_finding() -> None:
    body = responses()
    del body["input"]
    assert pc308(lint_request(body)) == []


def test_log_reports_once_with_occurrences(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    rows = []
    for i in range(3):
        body = copy.deepcopy(responses())
        body["input"][0]["content"][0]["text"] = f"question {i}"
        rows.append(json.dumps(body))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    result = lint_paths([str(path)], LintConfig(select=("PC308",)))
    [f] = result.findings
    assert f.line == 1 and f.details["occurrences"] == 3 and "(in 3 requests)" in f.message


def test_rule_command_prints_the_doc() -> None:
    res = CliRunner().invoke(rule_command, ["PC308"])
    assert res.exit_code == 0
    assert res.output.startswith("# breakpoint.unmarkable-instructions (PC308)")
    assert "Severity: warning" in res.output and "## Why is this bad?" in res.output
    assert "instructions" in res.output and "prompt_cache_breakpoint" in res.output
