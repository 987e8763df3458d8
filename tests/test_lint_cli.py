"""promptcache lint / rule: CLI options, output formats (SARIF validated against the vendored
SARIF 2.1.0 schema), exit codes, bad input, configuration, suppression and baselines."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from promptcache.lint import LintConfig, lint_paths
from promptcache.lint.cli import lint_command, main, rule_command
from promptcache.lint.engine import DOC_SECTIONS
from promptcache.lint.rules import RULE_CODES, all_rules
from tests.cases import filler

FIXTURES = Path(__file__).parent / "fixtures" / "lint"

BAD_REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "system": [{"type": "text", "text": "Now: 2026-01-02T03:04:05Z\n" + filler(2000, "cli"),
                "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "hi"}],
}
CLEAN_REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "system": [{"type": "text", "text": filler(2000, "clean"),
                "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "hi"}],
}


def run(argv: list[str], stdin: bytes | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdin=stdin, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(BAD_REQUEST, indent=2), encoding="utf-8")
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps(CLEAN_REQUEST), encoding="utf-8")
    tpl = tmp_path / "system.j2"
    tpl.write_text("Today is {{ current_date }}.\n" + filler(100, "tpl") + "\n", encoding="utf-8")
    return {"bad": bad, "clean": clean, "tpl": tpl}


# ------------------------------------------------------------------ exit codes and formats
def test_exit_codes(files: dict[str, Path]) -> None:
    assert run([str(files["clean"])])[0] == 0
    code, out, _ = run([str(files["bad"])])
    assert code == 1 and "PC101" in out and f"{files['bad']}:6:21:" in out
    assert run([str(files["bad"]), "--exit-zero"])[0] == 0
    assert run([])[0] == 2
    assert run(["--select", "NOPE", str(files["bad"])])[0] == 2
    assert run(["--bogus-option", str(files["bad"])])[0] == 2


def test_json_format_and_baseline(files: dict[str, Path], tmp_path: Path) -> None:
    code, out, _ = run([str(files["bad"]), str(files["tpl"]), "--format", "json"])
    doc = json.loads(out)
    assert code == 1 and {f["code"] for f in doc["findings"]} == {"PC101", "PC104"}
    baseline = tmp_path / "baseline.json"
    baseline.write_text(out, encoding="utf-8")
    assert run([str(files["bad"]), str(files["tpl"]), "--baseline", str(baseline)])[0] == 0
    # a new finding is still reported against the old baseline
    files["tpl"].write_text("{{ request_id }}\n" + filler(100, "tpl") + "\n", encoding="utf-8")
    code, out, _ = run([str(files["tpl"]), "--baseline", str(baseline)])
    assert code == 1 and "request_id" in out


def test_skipped_file_is_reported_in_text_and_json(files: dict[str, Path],
                                                   tmp_path: Path) -> None:
    arr = tmp_path / "arr.json"
    arr.write_text("[1, 2]", encoding="utf-8")
    code, out, _ = run([str(arr), str(files["clean"])])
    assert code == 0 and "All checks passed (1 file, 1 skipped)." in out
    assert f"{arr}: skipped: not a request" in out
    code, out, _ = run([str(arr), str(files["bad"])])
    assert code == 1 and "in 1 file, 1 skipped." in out
    code, out, _ = run([str(arr), "--format", "json"])
    doc = json.loads(out)
    assert doc["files"] == [str(arr)]
    assert [s["file"] for s in doc["skipped"]] == [str(arr)]
    assert doc["skipped"][0]["reason"].startswith("not a request")


@pytest.mark.parametrize("label,content,reason", [
    ("request", json.dumps(BAD_REQUEST), "a request body"),
    ("empty-list", "[]", "a JSON array, not an object"),
    ("bare-list", json.dumps([{"fingerprint": "0" * 64}]), "a JSON array, not an object"),
    ("sarif", None, "a SARIF log"),
    ("other-object", '{"results": []}', 'no "findings" list'),
    ("no-version", '{"findings": []}', 'no "version"'),
    ("not-findings", '{"version": "0.1.0", "findings": [{"code": "PC101"}]}',
     "findings[0] is not a finding with a code and fingerprint"),
    ("jsonl", '{"version": "0.1.0", "findings": []}\n{}\n', "invalid JSON at line 2"),
    ("text", "baseline", "invalid JSON at line 1"),
    ("empty", "", "invalid JSON at line 1"),
])
def test_baseline_that_is_not_lint_json_output_exits_2(
        files: dict[str, Path], tmp_path: Path, label: str, content: str | None,
        reason: str) -> None:
    baseline = tmp_path / "baseline.json"
    if content is None:
        content = run([str(files["bad"]), "--format", label])[1]
    baseline.write_text(content, encoding="utf-8")
    for extra in ([], ["--exit-zero"], ["--format", "json"]):
        code, out, err = run([str(files["bad"]), "--baseline", str(baseline), *extra])
        assert code == 2 and out == "", (label, err)
        assert err.startswith(f"promptcache lint: error: --baseline {baseline}: not a "
                              f"promptcache lint JSON output ({reason}")
        assert len(err.splitlines()) == 1, err


def test_baseline_of_a_clean_run_is_accepted(files: dict[str, Path], tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    code, out, _ = run([str(files["clean"]), "--format", "json"])
    assert code == 0 and json.loads(out)["findings"] == []
    baseline.write_text(out, encoding="utf-8")
    code, out, err = run([str(files["bad"]), "--baseline", str(baseline)])
    assert code == 1 and "PC101" in out and err == ""
    # an output that also lists input errors is still our format
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    code, out, _ = run([str(files["bad"]), str(broken), "--format", "json"])
    assert code == 2 and json.loads(out)["errors"]
    baseline.write_text(out, encoding="utf-8")
    assert run([str(files["bad"]), "--baseline", str(baseline)])[0] == 0
    code, _, err = run([str(files["bad"]), "--baseline", str(tmp_path / "missing.json")])
    assert code == 2 and "--baseline" in err and "cannot read" in err


def test_sarif_validates_against_schema(files: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    code, out, _ = run([str(files["bad"]), str(files["tpl"]), str(broken), "--format", "sarif"])
    assert code == 2
    log = json.loads(out)
    schema = json.loads((FIXTURES / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(log)
    run0 = log["runs"][0]
    assert [r["id"] for r in run0["tool"]["driver"]["rules"]] == list(RULE_CODES)
    assert {r["ruleId"] for r in run0["results"]} == {"PC101", "PC104"}
    for r in run0["results"]:
        assert run0["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
    assert run0["invocations"][0]["executionSuccessful"] is False


def test_github_format(files: dict[str, Path]) -> None:
    code, out, _ = run([str(files["bad"]), "--format", "github"])
    assert code == 1
    line = out.splitlines()[0]
    assert line.startswith("::warning file=") and ",line=6,col=21," in line and "PC101" in line


def test_min_severity_and_select(files: dict[str, Path]) -> None:
    files["tpl"].write_text("Today is {{ current_date }}.\n" + filler(100) + "\n", encoding="utf-8")
    assert run([str(files["tpl"]), "--min-severity", "warning"])[0] == 0  # day = info
    assert run([str(files["bad"]), "--ignore", "PC101"])[0] == 0
    assert run([str(files["bad"]), "--select", "volatile"])[0] == 1
    assert run([str(files["bad"]), "--select", "PC3"])[0] == 0


def test_stdin_and_folders_and_globs(files: dict[str, Path], tmp_path: Path) -> None:
    code, out, _ = run(["-"], stdin=json.dumps(BAD_REQUEST).encode())
    assert code == 1 and out.startswith("-:1:")
    assert run([str(tmp_path)])[0] == 1
    assert run([str(tmp_path / "*.json")])[0] == 1
    assert run([str(tmp_path / "nothing-*.json")])[0] == 2


def test_stdin_filename_is_the_location_in_every_format(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    data = json.dumps(BAD_REQUEST, indent=2).encode()
    name = "requests/x.json"
    code, out, _ = run(["-", "--stdin-filename", name], stdin=data)
    assert code == 1 and out.startswith(f"{name}:6:21: PC101")
    code, out, _ = run(["-", "--stdin-filename", name, "--format", "github"], stdin=data)
    assert code == 1 and out.startswith("::warning file=requests/x.json,line=6,col=21,")
    code, out, _ = run(["-", "--stdin-filename", name, "--format", "json"], stdin=data)
    doc = json.loads(out)
    assert [f["file"] for f in doc["findings"]] == [name] and doc["files"] == [name]
    # the same fingerprint as the file linted by that name, so baselines carry over
    on_disk = tmp_path / "requests" / "x.json"
    on_disk.parent.mkdir()
    on_disk.write_bytes(data)
    monkeypatch.chdir(tmp_path)
    code, out2, _ = run([name, "--format", "json"])
    assert json.loads(out2)["findings"] == doc["findings"]
    code, out, _ = run(["-", "--stdin-filename", name, "--format", "sarif"], stdin=data)
    [res] = json.loads(out)["runs"][0]["results"]
    assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == name
    # per-file-ignores match the name
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.promptcache.per-file-ignores]\n"x.json" = ["PC101"]\n',
                         encoding="utf-8")
    assert run(["-", "--stdin-filename", name], stdin=data)[0] == 0
    assert run(["-"], stdin=data)[0] == 1
    # input errors name it too; without the option stdin is still "-"
    code, _, err = run(["-", "--stdin-filename", name], stdin=b"{oops")
    assert code == 2 and err.startswith(f"{name}: error: invalid JSON")
    code, out, _ = run(["-"], stdin=data)
    assert out.startswith("-:6:21: PC101")


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("name,content,reason", [
    ("a.json", b"{\"messages\": [", "invalid JSON"),
    ("a.json", b"", "empty file"),
    ("a.json", b"\xff\xfe\x00\x01binary", "binary"),
    ("a.json", "{\"system\": \"caf\xe9\"}".encode("latin-1"), "not valid UTF-8"),
    ("a.json", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ("a.jsonl", b"{\"messages\": []}\n{oops\n", "line 2"),
    ("a.yaml", b"system: [unclosed\n", "invalid YAML"),
    ("a.yaml", b"system: \x1f\n", "invalid YAML"),  # a ReaderError: multi-line str
    ("a.prompty", b"---\n\x1f\n---\nHello\n", "invalid front matter YAML"),
    ("a.toml", b"prompt = \"\"\"unterminated\n", "invalid TOML"),
    ("a.j2", b"Hello {% if x %} never closed", "Jinja syntax error"),
    ("a.py", b"def f(:\n", "Python syntax error"),
    ("a.json", b"{\"model\": \"gpt-5\", \"messages\": 5}", "invalid request"),
])
def test_bad_input_is_one_error_line(tmp_path: Path, name: str, content: bytes,
                                     reason: str, files: dict[str, Path]) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    code, out, err = run([str(path), str(files["bad"])])
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{path}: error: ") and reason in lines[0]
    assert "Traceback" not in err
    assert "PC101" in out  # the other file is still linted


def test_file_over_size_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    with big.open("wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # 50 MB (sparse)
    code, _, err = run([str(big)])
    assert code == 2 and "file too large" in err and str(big) in err


# ------------------------------------------------------------------ unknown models
SHORT_PREFIX: dict[str, Any] = {
    "model": "claude-foo-9",
    "system": [{"type": "text", "text": filler(300, "short"),
                "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "hi"}],
}


def test_unknown_explicit_model_exits_2_with_suggestions(tmp_path: Path) -> None:
    path = tmp_path / "short.json"
    path.write_text(json.dumps(SHORT_PREFIX), encoding="utf-8")
    code, out, _ = run([str(path), "--model", "claude-sonnet-4-5"])
    assert code == 1 and "PC303" in out
    code, out, err = run([str(path), "--model", "claude-foo-9"])
    assert code == 2, (out, err)
    assert "All checks passed" not in out
    [line] = err.splitlines()
    assert "--model claude-foo-9: unknown model; closest catalog ids: " in line
    assert 1 <= len(line.split("closest catalog ids: ")[1].split(", ")) <= 3
    result = CliRunner().invoke(lint_command, [str(path), "--model", "nope"])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_unknown_model_in_request_names_the_skipped_rules(tmp_path: Path) -> None:
    """A request's own unknown model: linting goes on, and the output says what was skipped."""
    path = tmp_path / "short.json"
    path.write_text(json.dumps(SHORT_PREFIX), encoding="utf-8")
    code, out, err = run([str(path)])
    assert code == 0 and "All checks passed" in out
    [note] = err.splitlines()
    assert note.startswith(f"{path}: note: model 'claude-foo-9' is unknown to the catalog")
    assert "skipped: PC303 (breakpoint.below-minimum)" in note
    code, out, err = run([str(path), "--format", "json"])
    assert code == 0 and err == ""
    [entry] = json.loads(out)["unknown_models"]
    assert entry["file"] == str(path) and entry["models"] == ["claude-foo-9"]
    assert entry["skipped_rules"] == ["PC303"]
    vllm = tmp_path / "vllm.json"
    vllm.write_text(json.dumps({"model": "meta-llama/Llama-3.1-8B",
                                "messages": [{"role": "user", "content": "hi"}]}))
    code, out, err = run([str(vllm)])
    assert code == 1 and "PC401" in out  # the OpenAI-wide minimum still applies
    assert "'meta-llama/Llama-3.1-8B' is unknown" in err and "skipped: none" in err
    code, _, err = run([str(files_clean(tmp_path))])
    assert code == 0 and err == ""


def files_clean(tmp_path: Path) -> Path:
    clean = tmp_path / "known.json"
    clean.write_text(json.dumps(CLEAN_REQUEST), encoding="utf-8")
    return clean


# ------------------------------------------------------------------ config and suppression
def test_pyproject_config_and_per_file_ignores(tmp_path: Path, files: dict[str, Path]) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.promptcache]\nignore = ["PC104"]\n'
                         '[tool.promptcache.per-file-ignores]\n"bad.json" = ["PC101"]\n',
                         encoding="utf-8")
    assert run([str(files["bad"]), str(files["tpl"]), "--config", str(pyproject)])[0] == 0
    cfg = LintConfig.from_pyproject(pyproject)
    assert cfg.ignored_in(str(files["bad"])) == ["PC101"]
    pyproject.write_text('[tool.promptcache]\nselect = 5\n', encoding="utf-8")
    assert run([str(files["bad"]), "--config", str(pyproject)])[0] == 2


def test_inline_suppression(tmp_path: Path) -> None:
    tpl = tmp_path / "t.j2"
    tpl.write_text("{{ now() }} {# promptcache: ignore[PC104] #}\n" + filler(80) + "\n",
                   encoding="utf-8")
    assert run([str(tpl)])[0] == 0
    tpl.write_text("{{ now() }} {# promptcache: ignore[PC101] #}\n" + filler(80) + "\n",
                   encoding="utf-8")
    assert run([str(tpl)])[0] == 1
    py = tmp_path / "agent.py"
    py.write_text("import datetime\nimport anthropic\n\nclient = anthropic.Anthropic()\n\n"
                  "def ask(q):\n"
                  "    now = datetime.datetime.now()  # promptcache: ignore[PC101]\n"
                  "    return client.messages.create(model='m', system=f'Time {now}', "
                  "messages=[{'role': 'user', 'content': q}])\n", encoding="utf-8")
    assert run([str(py)])[0] == 0
    py.write_text(py.read_text().replace("  # promptcache: ignore[PC101]", ""), encoding="utf-8")
    code, out, _ = run([str(py)])
    assert code == 1 and f"{py}:7:11: PC101" in out


# ------------------------------------------------------------------ rule docs
@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_doc_has_fixed_sections(rule: Any) -> None:
    sections = rule.doc_sections()
    assert list(sections) == list(DOC_SECTIONS), f"{rule.code}: sections {list(sections)}"
    for name in DOC_SECTIONS:
        assert sections[name].strip(), f"{rule.code}: empty section {name!r}"
    assert rule.__module__.endswith("." + rule.code)
    assert rule.code.startswith("PC") and "." in rule.name and rule.groups[0] == "all"
    assert rule.summary and rule.message and rule.fix_title and rule.inputs
    assert "https://" in sections["References"]


def test_rule_command() -> None:
    runner = CliRunner()
    res = runner.invoke(rule_command, ["PC101"])
    assert res.exit_code == 0 and res.output.startswith("# volatile.timestamp (PC101)")
    assert "## Why is this bad?" in res.output
    res = runner.invoke(rule_command, ["--all", "--format", "json"])
    assert [r["code"] for r in json.loads(res.output)] == list(RULE_CODES)
    assert runner.invoke(rule_command, ["PC999"]).exit_code == 2
    both = runner.invoke(rule_command, ["PC101", "--all"])  # not --all with PC101 ignored
    assert both.exit_code == 2 and "not both" in both.output


def test_lint_paths_api(files: dict[str, Path]) -> None:
    result = lint_paths([str(files["bad"]), str(files["clean"])])
    assert result.exit_code == 1 and result.files == [str(files["bad"]), str(files["clean"])]
    assert [f.code for f in result.findings] == ["PC101"]


def test_top_level_cli_dispatches_lint_and_rule(files: dict[str, Path]) -> None:
    from promptcache.cli import main as cli_main

    runner = CliRunner()
    res = runner.invoke(cli_main, ["lint", str(files["bad"]), "--format", "json"])
    assert res.exit_code == 1 and json.loads(res.output)["findings"][0]["code"] == "PC101"
    res = runner.invoke(cli_main, ["rule", "PC305"])
    assert res.exit_code == 0 and "uncacheable-block" in res.output
