"""Rule tests as data (after sqlfluff's std_rule_cases): tests/fixtures/lint/rules/PCnnn.yaml
holds commented pass/fail cases per rule, linking the bug case each covers.

Each case: ``file`` (its suffix picks the input kind), ``content`` (``<N tokens: ...>``
placeholders expanded as in the bug cases) and ``expect``: ``[[line, text, severity], ...]``
for that rule alone (the rule is selected explicitly, so preview rules run too), where ``text``
is what the file holds at the finding's ``line:col`` (so a position is checked against the
file, not against a number worked out by hand).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from promptcache.lint import LintConfig, lint_paths
from promptcache.lint.rules import RULE_CODES
from tests.cases import expand_text

CASES_DIR = Path(__file__).parent / "fixtures" / "lint" / "rules"


def _cases() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(CASES_DIR.glob("PC*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert doc["rule"] == path.stem
        for case in doc["cases"]:
            out.append((doc["rule"], case))
    return out


CASES = _cases()


def test_most_rules_have_data_cases() -> None:
    covered = {rule for rule, _ in CASES}
    # PC302 needs a previous request; it is covered by BR-12 in tests/test_cases_lint.py,
    # PC404 by BR-24. PC307 has data cases (a request log) since the eighth session.
    assert set(RULE_CODES) - covered <= {"PC302", "PC404"}
    for rule in covered:
        kinds = [c for r, c in CASES if r == rule]
        assert any(c["expect"] for c in kinds), f"{rule}: no failing case"
        assert any(not c["expect"] for c in kinds), f"{rule}: no passing case"


@pytest.mark.parametrize("rule,case", CASES, ids=[f"{r}-{c['name']}" for r, c in CASES])
def test_rule_case(tmp_path: Path, rule: str, case: dict[str, Any]) -> None:
    path = tmp_path / case["file"]
    text = expand_text(case["content"])
    path.write_text(text, encoding="utf-8")
    result = lint_paths([str(path)], LintConfig(select=(rule,)))
    assert result.errors == [], result.errors
    lines = text.splitlines()
    got = [[f.line, lines[f.line - 1][f.col - 1:f.col - 1 + len(str(exp[1]))], f.severity.value]
           for f, exp in zip(result.findings, case["expect"], strict=False)]
    assert len(result.findings) == len(case["expect"]), [f.message for f in result.findings]
    assert got == case["expect"], [f.message for f in result.findings]


@pytest.mark.parametrize("hole,scope", [
    ("{{ session_id }}", "conversation"), ("{{ conversation_id }}", "conversation"),
    ("{{ ctx.threadId }}", "conversation"), ("{{ request_id }}", "request"),
    ("{{ uuid }}", "request"),
])
def test_pc104_names_per_conversation_ids(tmp_path: Path, hole: str, scope: str) -> None:
    """A session / conversation / thread id is stable within a conversation: not per request."""
    path = tmp_path / "system.j2"
    path.write_text(f"Id: {hole}\n" + expand_text("<200 tokens: rules>") + "\n", encoding="utf-8")
    [f] = lint_paths([str(path)], LintConfig(select=("PC104",))).findings
    assert f.message.startswith(f"per-{scope} id {hole!r} comes before")
    assert f.details["id_scope"] == scope
    if scope == "conversation":
        assert "cached within one conversation and written again for every new one" in f.message


@pytest.mark.parametrize("fmt,every", [
    ("%Y-%m-%d %H:%M:%S", "every second"), ("%Y-%m-%d %H:%M", "every minute"),
    ("%Y-%m-%d %H", "every hour"), ("%Y-%m-%d", "once a day"),
])
def test_pc101_wording_follows_granularity(tmp_path: Path, fmt: str, every: str) -> None:
    path = tmp_path / "agent.py"
    path.write_text(
        "import datetime\nimport anthropic\nclient = anthropic.Anthropic()\n"
        "def ask(q):\n"
        f"    now = datetime.datetime.now().strftime({fmt!r})\n"
        "    return client.messages.create(system='Now: ' + now, messages=[])\n",
        encoding="utf-8")
    [f] = lint_paths([str(path)], LintConfig(select=("PC101",))).findings
    assert f.message.endswith(f"the cached prefix changes {every}"), f.message


def _agent_request(tool_tokens: int, tools_breakpoint: bool, value: str) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": "shell", "description": expand_text(
        f"<{tool_tokens} tokens: tool docs>"), "input_schema": {"type": "object"}}
    if tools_breakpoint:
        tool["cache_control"] = {"type": "ephemeral"}
    system = "You are a coding agent.\n" + expand_text("<3000 tokens: rules>") + f"\n{value}"
    return {"model": "claude-sonnet-4-5", "max_tokens": 16, "tools": [tool],
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "list the files"}]}


@pytest.mark.parametrize("code,value", [
    ("PC101", "Current date and time: 2025-05-04 14:03:27"),
    ("PC102", "request id: 123e4567-e89b-12d3-a456-426614174000"),
])
@pytest.mark.parametrize("tool_tokens,tools_breakpoint,readable", [
    (300, False, None),        # no earlier breakpoint: the whole prefix is written again
    (300, True, None),         # one on the tools, but its prefix is under the 1,024 minimum
    (1300, True, "tools[0]"),  # a readable entry on the tools: only the system is rewritten
])
def test_volatile_value_at_the_end_counts_the_tokens_written_again(
        code: str, value: str, tool_tokens: int, tools_breakpoint: bool,
        readable: str | None) -> None:
    """A value at the end of the system block: few tokens come after it, yet on Anthropic the
    whole entry back to the last readable breakpoint is written again at each change (new-user
    trial 8: "about 12 tokens" where `diff` of two such requests said 3,347)."""
    from promptcache.lint import lint_request
    from promptcache.prefix import render

    req = _agent_request(tool_tokens, tools_breakpoint, value)
    [f] = [f for f in lint_request(req) if f.code == code]
    view = render(req, "anthropic", model=req["model"])
    end = view.find("system[0]").end_token
    start = 0 if readable is None else view.find(readable).end_token
    assert f.details["tokens_invalidated"] < 30
    assert f.details["tokens_rewritten"] == end - start
    assert f"({end - start} per change)" in f.message
    if readable is None:
        assert "no breakpoint before it can be read" in f.message
    else:
        assert f"can be read is at {readable}" in f.message


def test_openai_counts_only_the_tokens_after_the_value() -> None:
    """OpenAI reads any earlier prefix: nothing before the value is written again."""
    from promptcache.lint import lint_request

    req = {"model": "gpt-4o", "messages": [
        {"role": "system", "content": expand_text("<2000 tokens: rules>")
         + "\nNow: 2025-05-04 14:03:27\n" + expand_text("<500 tokens: more rules>")},
        {"role": "user", "content": "hi"}]}
    [f] = [f for f in lint_request(req) if f.code == "PC101"]
    assert f.details["tokens_rewritten"] == f.details["tokens_invalidated"] > 400
    assert "written again too" not in f.message


def test_an_earlier_breakpoint_beyond_the_lookback_still_reads_its_own_entry() -> None:
    """Review 8: the 20-position lookback was applied between the earlier breakpoint and the
    covering one, so lint said "no breakpoint before it can be read" and counted the whole
    prefix; the earlier breakpoint finds its own entry, so only what follows it is rewritten."""
    from promptcache.lint import lint_request
    from promptcache.prefix import render

    system = [{"type": "text", "text": expand_text("<1500 tokens: rules>"),
               "cache_control": {"type": "ephemeral"}}]
    system += [{"type": "text", "text": f"Note {i}: " + expand_text("<20 tokens: note>")}
               for i in range(24)]
    system.append({"type": "text", "text": "Now: 2025-05-04 14:03:27",
                   "cache_control": {"type": "ephemeral"}})
    req = {"model": "claude-sonnet-4-5", "max_tokens": 16, "system": system,
           "messages": [{"role": "user", "content": "hi"}]}
    [f] = [f for f in lint_request(req) if f.code == "PC101"]
    view = render(req, "anthropic", model=req["model"])
    last, first = view.find(f"system[{len(system) - 1}]"), view.find("system[0]")
    assert last.position - first.position > 20
    assert f.details["tokens_rewritten"] == last.end_token - first.end_token
    assert "can be read is at system[0]" in f.message


def test_nothing_is_rewritten_when_the_prefix_is_under_the_minimum() -> None:
    """Review 8: a prefix under the model's minimum is never written, so no "written again"."""
    from promptcache.lint import lint_request

    req = {"model": "claude-sonnet-4-5", "max_tokens": 16,
           "system": [{"type": "text", "text": "Now: 2025-05-04 14:03:27. Be brief.",
                       "cache_control": {"type": "ephemeral"}}],
           "messages": [{"role": "user", "content": "hi"}]}
    [f] = [f for f in lint_request(req) if f.code == "PC101"]
    assert f.details["tokens_rewritten"] == 0
    assert "written again" not in f.message
