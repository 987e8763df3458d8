"""promptcache lint / rule: CLI options, output formats (SARIF validated against the vendored
SARIF 2.1.0 schema), exit codes, bad input, configuration, suppression and baselines."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from promptcache.lint import LintConfig, lint_paths
from promptcache.lint.cli import lint_command, main, rule_command
from promptcache.lint.engine import DOC_SECTIONS
from promptcache.lint.finding import Severity
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
    code, out, _ = run([str(files["bad"]), "--format", "json", "--min-severity", "error"])
    doc = json.loads(out)
    assert code == 0 and doc["findings"] == []
    assert doc["hidden"] == {"below_severity": {"error": 1}, "in_baseline": 0}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert json.loads(run([str(empty), "--format", "json"])[1])["empty_folders"] == [str(empty)]


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


# ------------------------------------------------------------------ configuration discovery
_FMT_PY = """import json
import random
import anthropic
client = anthropic.Anthropic()
EXAMPLES = ["a", "b", "c"]
def ask(profile, q):
    system = "Examples: " + ", ".join(random.sample(EXAMPLES, 2))
    return client.messages.create(system="Profile: " + json.dumps(profile) + system, messages=[])
"""


def _project(root: Path) -> Path:
    """A project whose [tool.promptcache] hides every finding its files have: PC203 everywhere,
    PC103 in src/fmt.py, PC104 in prompts/*.jinja."""
    (root / "src").mkdir(parents=True)
    (root / "prompts").mkdir()
    (root / "pyproject.toml").write_text(
        '[tool.promptcache]\nignore = ["PC203"]\nper-file-ignores = { "src/fmt.py" = ["PC103"], '
        '"prompts/*.jinja" = ["PC104"] }\n', encoding="utf-8")
    (root / "src" / "fmt.py").write_text(_FMT_PY, encoding="utf-8")
    (root / "prompts" / "sys.jinja").write_text(
        "Now: {{ current_datetime }}\n" + filler(200, "proj") + "\n", encoding="utf-8")
    return root


def test_config_is_the_pyproject_nearest_the_files(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    proj = _project(tmp_path / "proj")
    # without the configuration each file has findings
    assert run([str(proj / "src"), str(proj / "prompts"), "--config", os.devnull])[0] == 1
    monkeypatch.chdir(proj)
    assert run(["src", "prompts"])[:2] == (0, "All checks passed (2 files).\n")
    monkeypatch.chdir(proj / "src")  # per-file-ignores are relative to pyproject's folder
    assert run(["."])[:2] == (0, "All checks passed (1 file).\n")
    assert run(["fmt.py", "../prompts/sys.jinja"])[0] == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # found from the files, not from the current directory
    assert run([str(proj / "src"), str(proj / "prompts")])[:2] == \
        (0, "All checks passed (2 files).\n")
    # --config FILE: its globs are relative to its folder, whatever the current directory
    assert run([str(proj / "src"), "--config", str(proj / "pyproject.toml")])[0] == 0
    cfg = LintConfig.from_pyproject(proj / "pyproject.toml")
    assert cfg.root == proj and cfg.ignored_in(str(proj / "src" / "fmt.py")) == ["PC103"]
    assert cfg.ignored_in(str(tmp_path / "fmt.py")) == []  # outside: only the name would match
    # an absolute glob matches too
    abs_cfg = LintConfig(per_file_ignores={f"{proj.as_posix()}/src/*": ("PC103",)}, root=proj)
    assert abs_cfg.ignored_in(str(proj / "src" / "fmt.py")) == ["PC103"]


def test_each_file_gets_its_nearest_config(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    one = _project(tmp_path / "one")
    two = _project(tmp_path / "two")
    (two / "pyproject.toml").write_text('[tool.promptcache]\nignore = ["PC203"]\n',
                                        encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(["one", "two"])
    assert code == 1
    assert {line.split(":")[0] for line in out.splitlines() if ": PC" in line} == \
        {str(Path("two/src/fmt.py")), str(Path("two/prompts/sys.jinja"))}
    # a file with no configuration above it falls back to the current directory's
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "fmt.py").write_text(_FMT_PY, encoding="utf-8")
    monkeypatch.chdir(one)
    code, out, _ = run([str(loose / "fmt.py")])
    assert code == 1 and "PC103" in out and "PC203" not in out
    # a broken nearest pyproject is an input error naming it
    (two / "pyproject.toml").write_text('[tool.promptcache]\nselect = ["PC999"]\n',
                                        encoding="utf-8")
    code, _, err = run([str(two / "src")])
    assert code == 2 and \
        f"{two / 'pyproject.toml'}: error: unknown rule selector 'PC999'" in err


def test_root_exclude_reaches_a_subfolder_with_its_own_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # C1: a folder is judged by the configuration in force where it is (its parent's)
    _project(tmp_path / "sub")
    (tmp_path / "pyproject.toml").write_text('[tool.promptcache]\nexclude = ["sub", "pyproject.toml"]\n',
                                             encoding="utf-8")
    (tmp_path / "top.j2").write_text("Now: {{ current_datetime }}\n" + filler(200, "t") + "\n",
                                     encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for target in (".", str(tmp_path)):
        doc = json.loads(run([target, "--format", "json"])[1])
        assert [Path(f).name for f in doc["files"]] == ["top.j2"]
    # naming the subfolder still lints it, with its own configuration
    assert run(["sub"])[:2] == (0, "All checks passed (3 files).\n")


def test_symlinked_folder_takes_the_config_where_the_link_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # C2: the folders above a path are those of the path as given, links not followed
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "fmt.py").write_text(_FMT_PY, encoding="utf-8")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text('[tool.promptcache]\nignore = ["PC1", "PC2"]\n',
                                         encoding="utf-8")
    try:
        (proj / "linked").symlink_to(outside, target_is_directory=True)
    except (OSError, NotImplementedError):
        pytest.skip("symbolic links are not supported here")
    results = []
    for cwd, target in ((proj, "linked"), (tmp_path, str(Path("proj") / "linked")),
                        (outside, str(proj / "linked"))):
        monkeypatch.chdir(cwd)
        results.append(run([target])[:2])
    assert results == [(0, "All checks passed (1 file).\n")] * 3
    monkeypatch.chdir(tmp_path)
    assert run([str(outside)])[0] == 1  # the real folder has no configuration


_HIDE_ALL = '[tool.promptcache]\nignore = ["PC1", "PC2"]\n'
_SHOW_PC103 = '[tool.promptcache]\nselect = ["PC103"]\n'


@pytest.mark.parametrize(("pyproject", "parent"), [
    ('[tool]\npromptcache.ignore = ["PC1", "PC2"]\n', _SHOW_PC103),
    ('[tool.other]\n# [tool.promptcache] is configured in the folder above\nx = 1\n', _HIDE_ALL),
])
def test_discovery_parses_the_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   pyproject: str, parent: str) -> None:
    # C3: a dotted-key table is found (the parent's config would report PC103); a comment
    # mentioning the table does not stop the search (the parent's config hides everything)
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "src" / "fmt.py").write_text(_FMT_PY, encoding="utf-8")
    (proj / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(parent, encoding="utf-8")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert run([str(proj / "src")])[:2] == (0, "All checks passed (1 file).\n")
    (proj / "pyproject.toml").unlink()
    assert run([str(proj / "src")])[0] == (1 if parent == _SHOW_PC103 else 0)


@pytest.mark.parametrize("target", [".", "a"])
def test_broken_nested_config_is_one_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 target: str) -> None:
    # C4: however the folder is named, a broken pyproject.toml is listed in "errors" and the
    # files it governs are not linted with the defaults
    text = "Now: {{ current_datetime }}\n" + filler(200, "c4") + "\n"
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "pyproject.toml").write_text('[tool.promptcache]\nselect = "PC1\n',
                                                   encoding="utf-8")
    (tmp_path / "a" / "x.j2").write_text(text, encoding="utf-8")
    (tmp_path / "a" / "y.j2").write_text(text, encoding="utf-8")
    (tmp_path / "b.j2").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, out, err = run([target, "--format", "json"])
    doc = json.loads(out)
    assert code == 2
    assert [(e["file"], e["reason"].split(":")[0]) for e in doc["errors"]] == \
        [(str(tmp_path / "a" / "pyproject.toml"), "cannot read configuration")]
    assert not any(Path(f).parent.name == "a" for f in doc["files"])
    assert not any(Path(f["file"]).parent.name == "a" for f in doc["findings"])
    assert err.count("pyproject.toml: error: cannot read configuration") == 1
    code, out, err = run([target])
    assert code == 2 and "x.j2" not in out and "y.j2" not in out


def test_globs_skip_tool_folders_and_excluded_paths(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # C6a: the skip list applies to the folders a glob matched, exclude to its matches
    text = "Now: {{ current_datetime }}\n" + filler(200, "glob") + "\n"
    for rel in ("node_modules/p/x.j2", "venv/x.j2", "build/x.j2", "src/x.j2",
                "src/gen/x.j2", "src/skip.j2", "x.j2"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.promptcache]\nexclude = ["src/gen", "skip.j2", "pyproject.toml"]\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for pattern in ("*", "**/*.j2"):
        doc = json.loads(run([pattern, "--format", "json"])[1])
        assert sorted(Path(f).as_posix() for f in doc["files"]) == ["src/x.j2", "x.j2"], \
            pattern
    # folders the user typed literally are not filtered
    doc = json.loads(run(["node_modules/*/*.j2", "--format", "json"])[1])
    assert [Path(f).as_posix() for f in doc["files"]] == ["node_modules/p/x.j2"]


@pytest.mark.parametrize("value", ['"loud"', "3", "true"])
def test_bad_min_severity_in_pyproject_names_the_file(tmp_path: Path, files: dict[str, Path],
                                                      value: str) -> None:
    # C6b
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f"[tool.promptcache]\nmin-severity = {value}\n", encoding="utf-8")
    code, out, err = run([str(files["bad"]), "--config", str(pyproject)])
    assert code == 2 and out == ""
    shown = {'"loud"': "'loud'", "3": "3", "true": "True"}[value]
    assert err == (f"{pyproject}: error: [tool.promptcache] min-severity must be one of "
                   f"'error', 'warning', 'info' (got {shown})\n")


# ------------------------------------------------------------------ folder walking
def test_dot_folders_are_walked_but_tool_folders_are_not(tmp_path: Path) -> None:
    text = "Now: {{ current_datetime }}\n" + filler(200, "dot") + "\n"
    for rel in (".github/prompts/review.prompt.md", ".gemini/commands/x.j2"):
        (tmp_path / rel).parent.mkdir(parents=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    for skipped in (".git", ".venv", "node_modules", "__pycache__", ".tox", "dist"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "x.j2").write_text(text, encoding="utf-8")
    code, out, err = run([str(tmp_path), "--format", "json"])
    doc = json.loads(out)
    assert code == 1 and err == ""
    assert sorted(Path(f).relative_to(tmp_path).as_posix() for f in doc["files"]) == \
        [".gemini/commands/x.j2", ".github/prompts/review.prompt.md"]
    # a folder named on the command line is walked even when its name is in the list
    assert run([str(tmp_path / ".venv")])[0] == 1
    # the configuration's exclude globs still apply, relative to its folder
    (tmp_path / "pyproject.toml").write_text('[tool.promptcache]\nexclude = [".gemini/*", "pyproject.toml"]\n',
                                             encoding="utf-8")
    doc = json.loads(run([str(tmp_path), "--format", "json"])[1])
    assert [Path(f).name for f in doc["files"]] == ["review.prompt.md"]


def test_folder_with_nothing_to_lint_warns_and_exits_0(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    (empty / ".git").mkdir(parents=True)
    (empty / ".git" / "x.json").write_text("{}", encoding="utf-8")
    (empty / "notes.bin").write_bytes(b"\x00")
    code, out, err = run([str(empty)])
    assert code == 0 and out == "All checks passed (0 files).\n"
    assert err == f"promptcache lint: warning: no files to lint found under {empty}\n"
    # a glob matching nothing stays an input error
    assert run([str(empty / "*.json")])[0] == 2


# ------------------------------------------------------------------ hidden findings
def test_summary_counts_findings_hidden_by_min_severity_and_baseline(
        files: dict[str, Path], tmp_path: Path) -> None:
    code, out, _ = run([str(files["bad"]), str(files["tpl"]), "--min-severity", "error"])
    assert code == 0
    assert out == "All checks passed (2 files; 2 findings below min-severity error).\n"
    code, out, _ = run([str(files["bad"]), str(files["tpl"]), "--min-severity", "warning"])
    assert code == 1 and out.endswith(
        "Found 1 finding (1 warning) in 2 files; not shown: 1 finding below min-severity "
        "warning.\n")
    base = tmp_path / "base.json"
    base.write_text(run([str(files["bad"]), "--format", "json"])[1], encoding="utf-8")
    code, out, _ = run([str(files["bad"]), "--baseline", str(base)])
    assert (code, out) == (0, "All checks passed (1 file; 1 finding in the --baseline).\n")
    result = lint_paths([str(files["bad"]), str(files["tpl"])],
                        LintConfig(min_severity=Severity.ERROR))
    assert result.findings == [] and result.below_severity == {"error": 2}


# ------------------------------------------------------------------ newuser8 (sixth session)
def _codes(argv: list[str]) -> tuple[int, list[str]]:
    code, out, _ = run([*argv, "--format", "json"])
    return code, sorted({f["code"] for f in json.loads(out)["findings"]})


def test_cli_select_drops_the_configs_extend_select_and_ignore(tmp_path: Path) -> None:
    """As ruff (>= 0.0.238): a --select on the command line starts the selection anew; the
    pyproject's extend-select and ignore no longer apply, --extend-select / --ignore do, and
    per-file-ignores still do (bug 4)."""
    tools = [{"name": n, "description": "d", "input_schema": {"type": "object"}}
             for n in ("zeta", "alpha")]  # unsorted: PC202 (preview)
    req = tmp_path / "req.json"
    req.write_text(json.dumps({**BAD_REQUEST, "tools": tools}, indent=2), encoding="utf-8")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.promptcache]\nextend-select = ["PC202"]\n', encoding="utf-8")
    assert _codes([str(req)]) == (1, ["PC101", "PC202"])
    assert _codes([str(req), "--select", "PC101"]) == (1, ["PC101"])
    assert _codes([str(req), "--select", "PC101", "--extend-select", "PC202"]) == (
        1, ["PC101", "PC202"])
    pyproject.write_text('[tool.promptcache]\nignore = ["PC101"]\n', encoding="utf-8")
    assert _codes([str(req)]) == (0, [])
    assert _codes([str(req), "--select", "PC101"]) == (1, ["PC101"])
    assert _codes([str(req), "--select", "PC101", "--ignore", "PC101"]) == (0, [])
    # without --select, the options modify the set the file selects
    assert _codes([str(req), "--extend-select", "PC101"]) == (1, ["PC101"])
    pyproject.write_text('[tool.promptcache]\nselect = ["PC3"]\nignore = ["PC101"]\n'
                         'per-file-ignores = { "req.json" = ["PC202"] }\n', encoding="utf-8")
    assert _codes([str(req), "--extend-select", "PC202"]) == (0, [])
    assert _codes([str(req), "--select", "PC101,PC202"]) == (1, ["PC101"])


def test_the_more_specific_selector_decides(tmp_path: Path) -> None:
    """As ruff: between a select and an ignore that both pick a rule, the more specific one
    wins (review 7: ``--select PC101 --ignore PC1`` enabled nothing). The command line's
    --ignore / --extend-select still act on the file's whole selection."""
    tools = [{"name": n, "description": "d", "input_schema": {"type": "object"}}
             for n in ("zeta", "alpha")]  # unsorted: PC202 (preview)
    req = tmp_path / "req.json"
    req.write_text(json.dumps({**BAD_REQUEST, "tools": tools}, indent=2), encoding="utf-8")
    assert _codes([str(req), "--select", "PC101", "--ignore", "PC1"]) == (1, ["PC101"])
    assert _codes([str(req), "--select", "PC1", "--ignore", "PC101"]) == (0, [])
    assert _codes([str(req), "--select", "PC1,PC202", "--ignore", "PC"]) == (
        1, ["PC101", "PC202"])
    assert _codes([str(req), "--select", "PC", "--ignore", "PC1"]) == (1, ["PC202"])
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.promptcache]\nselect = ["PC101", "PC202"]\n',
                         encoding="utf-8")
    assert _codes([str(req)]) == (1, ["PC101", "PC202"])
    # the file named PC101 exactly; the command line's broader --ignore still removes it
    assert _codes([str(req), "--ignore", "PC1"]) == (1, ["PC202"])
    pyproject.write_text('[tool.promptcache]\nignore = ["PC1"]\n', encoding="utf-8")
    assert _codes([str(req), "--extend-select", "PC101"]) == (1, ["PC101"])


def test_empty_stdin_is_an_input_error(files: dict[str, Path]) -> None:
    """Nothing (or blanks) on stdin is an input error naming '-' or --stdin-filename, as an
    empty file is; the other paths are still linted (N7)."""
    for data in (b"", b"\n", b" \n\t\r\n", b"\xef\xbb\xbf\n"):
        assert run(["-"], stdin=data) == (
            2, "", "-: error: empty input (nothing read from stdin)\n")
    code, _, err = run(["-", "--stdin-filename", "prompts/system.j2"], stdin=b"\n")
    assert code == 2 and err == "prompts/system.j2: error: empty input (nothing read from stdin)\n"
    code, out, _ = run(["-", str(files["bad"]), "--format", "json"], stdin=b"")
    doc = json.loads(out)
    assert code == 2 and [f["code"] for f in doc["findings"]] == ["PC101"]
    assert [e["file"] for e in doc["errors"]] == ["-"]
    empty = files["bad"].with_name("empty.json")
    empty.write_text("", encoding="utf-8")
    assert run([str(empty)])[0] == 2  # as an empty file


def test_json_key_only_for_a_value_in_a_field(tmp_path: Path) -> None:
    """PC101's json_key names a JSON / YAML field, not the last word before a colon in prose
    (N5: "Current date and time: ..." is no field "time")."""
    def key(line: str) -> Any:
        req = {**BAD_REQUEST, "system": [{"type": "text", "text": line + "\n" + filler(2000),
                                          "cache_control": {"type": "ephemeral"}}]}
        path = tmp_path / "r.json"
        path.write_text(json.dumps(req), encoding="utf-8")
        [finding] = json.loads(run([str(path), "--format", "json"])[1])["findings"]
        return finding["details"]["json_key"]

    assert key("Current date and time: 2025-05-04 14:03:27") is None
    assert key("You are helpful. In Paris, time: 2025-05-04 14:03:27") is None
    assert key('{"channel": "chat", "sent_at": "2025-05-04 14:03:27"}') == "sent_at"
    assert key("meta:\n  sent_at: 2025-05-04 14:03:27") == "sent_at"
    assert key("{channel: chat, sent_at: 2025-05-04 14:03:27}") == "sent_at"


def test_sarif_relative_uris_have_a_base(files: dict[str, Path], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative artifact URIs carry uriBaseId %SRCROOT%, declared in originalUriBaseIds as the
    current folder's file:// URI (SARIF 2.1.0 §3.14.14) (N9)."""
    spaced = tmp_path / "my prompts" / "a b.json"
    spaced.parent.mkdir()
    spaced.write_bytes(files["bad"].read_bytes())
    other = tmp_path / "other" / "bad.json"  # an absolute path (not bad.json again: one file
    other.parent.mkdir()                    # named twice is linted once, session 11)
    other.write_bytes(files["bad"].read_bytes())
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(["bad.json", "my prompts/a b.json", str(other), "--format", "sarif"])
    assert code == 1
    log = json.loads(out)
    schema = json.loads((FIXTURES / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(log)
    run0 = log["runs"][0]
    base = run0["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert base == tmp_path.as_uri() + "/"
    locations = [r["locations"][0]["physicalLocation"]["artifactLocation"]
                 for r in run0["results"]]
    assert {"uri": "bad.json", "uriBaseId": "%SRCROOT%"} in locations
    assert {"uri": "my%20prompts/a%20b.json", "uriBaseId": "%SRCROOT%"} in locations
    assert {"uri": other.as_uri()} in locations
    code, out, _ = run(["-", "--format", "sarif"], stdin=json.dumps(BAD_REQUEST).encode())
    [res] = json.loads(out)["runs"][0]["results"]
    assert res["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "stdin"}
