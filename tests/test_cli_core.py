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
