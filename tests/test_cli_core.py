"""The foundation's CLI commands: render, count, --help, and clean errors on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache.cli import main

REQUEST = {
    "model": "claude-sonnet-4-5",
    "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "hello"}],
}


def test_help_lists_every_command() -> None:
    out = CliRunner().invoke(main, ["--help"])
    assert out.exit_code == 0
    for name in ("lint", "rule", "diff", "explain", "report", "breakeven", "serve", "simulate",
                 "render", "count", "demo"):
        assert name in out.output


def test_render_json(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(REQUEST))
    out = CliRunner().invoke(main, ["render", str(path), "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["provider"] == "anthropic"
    assert [s["path"] for s in doc["segments"]] == ["system[0]", "messages[0].content"]
    assert doc["segments"][0]["breakpoint"] == "5m"


def test_render_text_table(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(REQUEST))
    out = CliRunner().invoke(main, ["render", str(path)])
    assert out.exit_code == 0 and "system[0]" in out.output


def test_render_bad_input_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"messages": "nope"}')
    out = CliRunner().invoke(main, ["render", str(bad)])
    assert out.exit_code == 2
    assert "messages: must be an array" in out.output
    notjson = tmp_path / "x.json"
    notjson.write_text("{")
    assert CliRunner().invoke(main, ["render", str(notjson)]).exit_code == 2


def test_count(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hello world"}]}))
    out = CliRunner().invoke(main, ["count", str(path)])
    assert out.exit_code == 0 and out.output.startswith("5 tokens")
    out = CliRunner().invoke(main, ["count", "--text", "--model", "claude-sonnet-4-5", "-"],
                             input="hello world")
    assert out.exit_code == 0 and "estimate" in out.output
    out = CliRunner().invoke(main, ["count", "-"], input="[1, 2]")
    assert out.exit_code == 2


def test_binary_input_is_one_line_exit_2(tmp_path: Path) -> None:
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\x80\x81\xfe\xff\x00")
    for args in (["count", str(binary)], ["count", "--text", str(binary)], ["render", str(binary)]):
        out = CliRunner().invoke(main, args)
        assert out.exit_code == 2, (args, out.output)
        assert "not UTF-8 text" in out.output


def test_unknown_model_count_is_an_estimate_only_when_asked(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["count", "--text", "--model", "nosuch-model", "-"],
                             input="hello world")
    assert out.exit_code == 2
    [line] = out.output.splitlines()
    assert line.startswith("promptcache: --model nosuch-model: unknown model") and "--estimate" in line
    typo = CliRunner().invoke(main, ["count", "--text", "-m", "claude-sonet-4-5", "-"],
                              input="hello world")
    assert typo.exit_code == 2 and "closest catalog ids: claude-sonnet-4-5" in typo.output
    out = CliRunner().invoke(main, ["count", "--text", "--estimate", "--model", "nosuch-model",
                                    "-"], input="hello world")
    assert out.exit_code == 0
    assert "estimate" in out.stdout and "unknown-model" in out.stdout
    [note] = out.stderr.splitlines()
    assert "the count is an estimate" in note and "'nosuch-model' is unknown" in note
    path = tmp_path / "vllm.json"  # a payload's own unknown model: counted, with the note
    path.write_text(json.dumps({"model": "meta-llama/Llama-3.1-8B",
                                "messages": [{"role": "user", "content": "hello"}]}))
    out = CliRunner().invoke(main, ["count", str(path)])
    assert out.exit_code == 0 and "unknown-model" in out.stdout
    assert "'meta-llama/Llama-3.1-8B' is unknown" in out.stderr
    known = CliRunner().invoke(main, ["count", "--text", "-m", "gpt-4o", "-"], input="hi")
    assert known.exit_code == 0 and known.stderr == ""


@pytest.mark.parametrize("command", ["render", "count"])
@pytest.mark.parametrize(("content", "reason"), [
    (None, "No such file or directory"),
    ("", "empty file"),
    ("{not json", "invalid JSON (Expecting property name"),
    ("[1, 2]", "expected a JSON object"),
])
def test_bad_file_is_one_line_exit_2(tmp_path: Path, command: str, content: str | None,
                                     reason: str) -> None:
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content)
    out = CliRunner().invoke(main, [command, str(path)])
    assert out.exit_code == 2, out.output
    [line] = out.output.splitlines()
    assert line.startswith(f"promptcache: {path}: {reason}"), line
    assert "Usage:" not in out.output and "Traceback" not in out.output


# ---- new-user trial fixes: wrapped requests, non-requests, deep JSON, pretty logs, --gap

USAGE = {"input_tokens": 5, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}


def _one_line_exit_2(out: object, needle: str) -> str:
    assert out.exit_code == 2, out.output  # type: ignore[attr-defined]
    text: str = out.output  # type: ignore[attr-defined]
    assert "Traceback" not in text and "Usage:" not in text
    [line] = text.splitlines()
    assert line.startswith("promptcache: ") and needle in line, line
    return line


@pytest.mark.parametrize("key", ["request", "body"])
def test_render_and_count_unwrap_a_recorded_request(tmp_path: Path, key: str) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(REQUEST))
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({key: REQUEST, "usage": USAGE, "timestamp": 1}))
    want = CliRunner().invoke(main, ["render", str(bare), "--format", "json"])
    got = CliRunner().invoke(main, ["render", str(wrapped), "--format", "json"])
    assert got.exit_code == 0, got.output
    assert json.loads(got.output) == json.loads(want.output)
    assert json.loads(got.output)["provider"] == "anthropic"
    assert json.loads(got.output)["total_tokens"] > 0
    n_bare = CliRunner().invoke(main, ["count", str(bare)])
    n_wrapped = CliRunner().invoke(main, ["count", str(wrapped)])
    assert n_wrapped.exit_code == 0 and n_wrapped.output == n_bare.output
    assert not n_wrapped.output.startswith("0 tokens")


@pytest.mark.parametrize("content", ["{}", '{"foo": 1}', '{"request": 5}',
                                     '{"request": {"foo": 1}, "usage": {}}',
                                     '{"model": "gpt-4o"}'])
@pytest.mark.parametrize("command", ["render", "count"])
def test_render_and_count_refuse_a_non_request(tmp_path: Path, command: str,
                                               content: str) -> None:
    path = tmp_path / "obj.json"
    path.write_text(content)
    out = CliRunner().invoke(main, [command, str(path)])
    line = _one_line_exit_2(out, "not a request (no messages / system / input")
    assert line.startswith(f"promptcache: {path}: not a request")


def test_render_a_wrapped_bad_request_names_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"request": {"messages": "nope"}}')
    _one_line_exit_2(CliRunner().invoke(main, ["render", str(path)]),
                     "messages: must be an array")


def _deep(tmp_path: Path) -> Path:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    return path


def test_deep_json_is_one_line_exit_2(tmp_path: Path) -> None:
    deep = _deep(tmp_path)
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps(REQUEST))
    log = tmp_path / "deep.jsonl"
    log.write_text(json.dumps({"request": REQUEST}) + "\n" + '{"request": '
                   + "[" * 100_000 + "]" * 100_000 + "}\n")
    for args in (["render", str(deep)], ["count", str(deep)], ["diff", str(deep), str(ok)],
                 ["diff", str(ok), str(deep)], ["explain", str(deep)]):
        line = _one_line_exit_2(CliRunner().invoke(main, args), "nested too deeply")
        assert str(deep) in line, (args, line)
    _one_line_exit_2(CliRunner().invoke(main, ["explain", str(log)]),
                     f"{log}: line 2: JSON nested too deeply")


def test_json_that_parses_but_is_too_deep_to_walk_is_one_line_exit_2(tmp_path: Path) -> None:
    """Depths just under the parser's limit: the request parses, then rendering or comparing
    it may hit the recursion limit; every depth gives a result or one line, exit 2."""
    import sys

    limit = sys.getrecursionlimit()
    for n in range(limit - 120, limit + 10, 6):
        nested = '{"a": ' * n + '"x"' + "}" * n  # a tool call's input: any JSON object
        text = ('{"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}, '
                '{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", '
                '"input": ' + nested + "}]}]}")
        path = tmp_path / f"d{n}.json"
        path.write_text(text)
        log = tmp_path / f"d{n}.jsonl"
        log.write_text('{"request": ' + text + "}\n")
        for args in (["render", str(path)], ["count", str(path)],
                     ["diff", str(path), str(path)], ["explain", str(log)]):
            out = CliRunner().invoke(main, args)
            assert out.exception is None or isinstance(out.exception, SystemExit), (n, args)
            assert out.exit_code in (0, 1, 2), (n, args, out.output)
            if out.exit_code == 2:
                _one_line_exit_2(out, "nested too deeply")


def test_recursion_while_rendering_or_comparing_is_one_line_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The later recursion (render, diff, explain), forced: not a traceback."""
    import promptcache.diff._engine as engine
    import promptcache.diff._explain as explain_mod
    import promptcache.prefix as prefix
    import promptcache.tokens as tokens

    def deep(*args: object, **kwargs: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    path = tmp_path / "req.json"
    path.write_text(json.dumps(REQUEST))
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"request": REQUEST}) + "\n")
    monkeypatch.setattr(prefix, "render", deep)
    monkeypatch.setattr(tokens, "count_tokens", deep)
    monkeypatch.setattr(engine, "diff", deep)
    monkeypatch.setattr(explain_mod, "prepare", deep)
    for args, where in ((["render", str(path)], f"{path}: "), (["count", str(path)], f"{path}: "),
                        (["diff", str(path), str(path)], f"{path} / {path}: "),
                        (["explain", str(log)], f"{log}: line 1: ")):
        _one_line_exit_2(CliRunner().invoke(main, args), f"{where}request nested too deeply")


@pytest.mark.parametrize("content", ["{}", '{"foo": 1}', '{"request": 5}',
                                     '{"body": {"foo": 1}}'])
def test_diff_refuses_a_non_request(tmp_path: Path, content: str) -> None:
    obj = tmp_path / "obj.json"
    obj.write_text(content)
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps(REQUEST))
    for args in (["diff", str(obj), str(obj)], ["diff", str(ok), str(obj)]):
        line = _one_line_exit_2(CliRunner().invoke(main, args), "not a request")
        assert line == f"promptcache: {obj}: not a request (no messages / system / input)"


def test_diff_reads_a_request_wrapped_as_lint_finds_it(tmp_path: Path) -> None:
    """A request two wrappers deep ({"request": {"body": ...}}), as lint finds it."""
    a = tmp_path / "a.json"
    a.write_text(json.dumps({"request": {"body": REQUEST}, "usage": USAGE}))
    b = tmp_path / "b.json"
    b.write_text(json.dumps(REQUEST))
    out = CliRunner().invoke(main, ["diff", str(a), str(b), "--format", "json"])
    assert out.exit_code in (0, 1), out.output  # (below the minimum: a "miss")
    doc = json.loads(out.output)
    assert doc["provider"] == "anthropic" and doc["divergence"] is None


def test_explain_refuses_a_usage_log_with_no_request(tmp_path: Path) -> None:
    from promptcache.usage import JsonlSink, UsageRecord

    path = tmp_path / "u.jsonl"
    sink = JsonlSink(path)
    sink.write(UsageRecord(provider="anthropic", model="claude-sonnet-4-5", uncached_input=10,
                           cache_read=0, cache_write=0))
    sink.close()
    line = _one_line_exit_2(CliRunner().invoke(main, ["explain", str(path)]),
                            "no line holds a request")
    assert line.startswith(f"promptcache: {path}: no line holds a request (1 usage-only line")


def test_explain_still_reports_a_usage_only_regression(tmp_path: Path) -> None:
    """A usage log whose append-only check finds a regression still reports it (exit 1)."""
    path = tmp_path / "u.jsonl"
    reads = [(0, 2000), (2000, 100), (500, 0)]  # the third read falls short of 2,100
    path.write_text("".join(json.dumps({"session_id": "s", "model": "claude-sonnet-4-5",
                                        "usage": {"input_tokens": 10,
                                                  "cache_read_input_tokens": r,
                                                  "cache_creation_input_tokens": w}}) + "\n"
                            for r, w in reads))
    out = CliRunner().invoke(main, ["explain", str(path), "--format", "json"])
    assert out.exit_code == 1, out.output
    assert json.loads(out.output)["requests"][-1]["status"] == "prefix_regression"


@pytest.mark.parametrize(("line", "reason"), [
    ("{}", "line 2: not a request (no messages / system / input, and no usage)"),
    ('{"foo": 1}', "line 2: not a request (no messages / system / input, and no usage)"),
    ('{"request": {"foo": 1}}', "line 2: not a request (no messages / system / input, and no usage)"),
])
def test_explain_names_a_line_that_holds_no_request(tmp_path: Path, line: str,
                                                    reason: str) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps({"request": REQUEST}) + "\n" + line + "\n")
    out = CliRunner().invoke(main, ["explain", str(path)])
    assert _one_line_exit_2(out, reason) == f"promptcache: {path}: {reason}"
    only = tmp_path / "only.jsonl"
    only.write_text(line + "\n")
    _one_line_exit_2(CliRunner().invoke(main, ["explain", str(only)]), "line 1: not a request")


def test_explain_names_a_pretty_printed_document(tmp_path: Path) -> None:
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(REQUEST, indent=2))
    line = _one_line_exit_2(CliRunner().invoke(main, ["explain", str(pretty)]),
                            "a JSON document, not JSONL")
    assert line == (f"promptcache: {pretty}: a JSON document, not JSONL: request logs hold "
                    f"one request per line (jq -c . {pretty} converts it)")
    array = tmp_path / "array.json"
    array.write_text(json.dumps([{"request": REQUEST}], indent=2))
    line = _one_line_exit_2(CliRunner().invoke(main, ["explain", str(array)]),
                            "a JSON array, not JSONL")
    assert f"jq -c '.[]' {array}" in line
    broken = tmp_path / "broken.jsonl"  # a bad first line that is no document: the line
    broken.write_text("{\n" + json.dumps({"request": REQUEST}) + "\n")
    _one_line_exit_2(CliRunner().invoke(main, ["explain", str(broken)]),
                     "line 1: invalid JSON")


def test_diff_refuses_a_negative_gap(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(REQUEST))
    out = CliRunner().invoke(main, ["diff", str(path), str(path), "--gap", "-5"])
    assert out.exit_code == 2 and "--gap" in out.output and "Traceback" not in out.output
    ok = CliRunner().invoke(main, ["diff", str(path), str(path), "--gap", "0"])
    assert ok.exit_code in (0, 1) and "verdict" in ok.output, ok.output


# ---- '-' reads standard input for diff and explain too (as render, count and lint)


@pytest.mark.parametrize("side", ["a", "b"])
def test_diff_reads_either_side_from_stdin(tmp_path: Path, side: str) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(REQUEST))
    args = ["diff", "-", str(path)] if side == "a" else ["diff", str(path), "-"]
    out = CliRunner().invoke(main, [*args, "--format", "json"], input=json.dumps(REQUEST))
    want = CliRunner().invoke(main, ["diff", str(path), str(path), "--format", "json"])
    assert out.exit_code == want.exit_code and out.exit_code in (0, 1), out.output
    assert json.loads(out.output) == json.loads(want.output)
    text = CliRunner().invoke(main, args, input=json.dumps(REQUEST))
    assert "-> " in text.output and "verdict" in text.output, text.output


def test_diff_refuses_stdin_for_both_sides() -> None:
    out = CliRunner().invoke(main, ["diff", "-", "-"], input=json.dumps(REQUEST))
    line = _one_line_exit_2(out, "cannot both be '-'")
    assert line == "promptcache: A and B cannot both be '-' (standard input)"


@pytest.mark.parametrize(("stdin", "reason"), [
    ("", "-: empty file"), (" \n\n", "-: empty file"),
    ("{bad", "-: invalid JSON ("), ("[1, 2]", "-: a request must be a JSON object"),
    ('{"foo": 1}', "-: not a request (no messages / system / input)"),
])
def test_diff_bad_stdin_is_one_line_exit_2(tmp_path: Path, stdin: str, reason: str) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(REQUEST))
    for args in (["diff", "-", str(path)], ["diff", str(path), "-"]):
        line = _one_line_exit_2(CliRunner().invoke(main, args, input=stdin), reason)
        assert line.startswith(f"promptcache: {reason}"), line


def test_explain_reads_the_log_from_stdin(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    body = "".join(json.dumps({"request": REQUEST, "usage": USAGE, "session_id": "s"}) + "\n"
                   for _ in range(2))
    log.write_text(body)
    out = CliRunner().invoke(main, ["explain", "-", "--format", "json"], input=body)
    want = CliRunner().invoke(main, ["explain", str(log), "--format", "json"])
    assert out.exit_code == want.exit_code and out.exit_code in (0, 1), out.output
    assert json.loads(out.output) == json.loads(want.output)
    assert len(json.loads(out.output)["requests"]) == 2
    text = CliRunner().invoke(main, ["explain", "-"], input=body.replace("\n", "\r\n"))
    assert text.output.startswith("promptcache explain -: 2 requests"), text.output


@pytest.mark.parametrize(("stdin", "reason"), [
    ("", "-: empty file"), ("  \n\n", "-: empty file"),
    ("{x\n", "-: line 1: invalid JSON ("),
    (json.dumps(REQUEST) + "\n{x\n", "-: line 2: invalid JSON ("),
    (json.dumps(REQUEST, indent=2), "-: a JSON document, not JSONL: request logs hold one "
                                    "request per line (jq -c . converts it)"),
    (json.dumps([{"request": REQUEST}], indent=2),
     "-: a JSON array, not JSONL: request logs hold one request per line (jq -c '.[]' "
     "converts it)"),
    ('{"foo": 1}\n', "-: line 1: not a request"),
])
def test_explain_bad_stdin_is_one_line_exit_2(stdin: str, reason: str) -> None:
    line = _one_line_exit_2(CliRunner().invoke(main, ["explain", "-"], input=stdin), reason)
    assert line.startswith(f"promptcache: {reason}"), line


def test_explain_stdin_that_is_not_utf8_is_one_line_exit_2() -> None:
    out = CliRunner().invoke(main, ["explain", "-"], input=b"\xff\xfe{}\n")
    _one_line_exit_2(out, "-: not UTF-8 text")


def _diff_text(tmp_path: Path, a: dict, b: dict) -> str:
    pa, pb = tmp_path / "A.json", tmp_path / "B.json"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    return CliRunner().invoke(main, ["diff", str(pa), str(pb)]).output


def test_diff_text_names_a_field_outside_the_cached_content(tmp_path: Path) -> None:
    """tool_choice added on OpenAI chat: the text names it and never says 'identical
    payloads' beside a failed body check (new-user report 8, bug 6)."""
    body = {"model": "gpt-4o", "messages": [
        {"role": "system", "content": "You are terse. " * 400},
        {"role": "user", "content": "hi"}]}
    out = _diff_text(tmp_path, body, dict(body, tool_choice="required"))
    assert "identical payloads" not in out and "payload_difference: none" not in out
    assert "differs_at: tool_choice" in out
    assert "FAILED: byte-identical bodies (differs at tool_choice)" in out
    assert "not part of the cached content" in out


def test_diff_text_openai_effort_does_not_claim_anthropic_hierarchy(tmp_path: Path) -> None:
    body = {"model": "gpt-5.5", "instructions": "You are terse. " * 400,
            "input": [{"role": "user", "content": "hi"}], "reasoning": {"effort": "medium"}}
    out = _diff_text(tmp_path, body, dict(body, reasoning={"effort": "high"}))
    assert "effort_changed" in out
    assert "tools -> system -> messages" not in out
    assert "reasoning_effort_changed" in out
