"""Trial 10 (new-user trial) regressions in ``promptcache lint``: baseline identity independent
of how a file is named, unknown ``[tool.promptcache]`` keys, and a JSONL log's incomplete last
line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from promptcache.lint import LintConfig, lint_paths
from promptcache.lint.cli import main
from promptcache.lint.config import ConfigError
from tests.cases import filler

APP = ('import datetime, uuid\nimport anthropic\n\nclient = anthropic.Anthropic()\n\n'
       'def ask(q):\n    now = datetime.datetime.now().isoformat()\n'
       '    system = f"You are a bot. Time: {now}. " + "Long stable instructions. " * 80\n'
       '    return client.messages.create(model="claude-sonnet-4-5", max_tokens=100,\n'
       '        system=[{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],\n'
       '        messages=[{"role": "user", "content": q}])\n\n'
       'def ask2(q):\n    rid = uuid.uuid4()\n'
       '    return client.messages.create(model="claude-sonnet-4-5", max_tokens=100,\n'
       '        system=f"Request {rid}. " + "Stable text here. " * 80,\n'
       '        messages=[{"role": "user", "content": q}])\n')


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------ 1. baseline identity
def _project(tmp_path: Path, marker: str | None) -> Path:
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "src" / "app.py").write_text(APP, encoding="utf-8")
    (proj / "src" / "app2.py").write_text(APP.replace("ask", "other"), encoding="utf-8")
    if marker == "config":
        (proj / "pyproject.toml").write_text('[tool.promptcache]\nignore = ["PC202"]\n',
                                             encoding="utf-8")
    elif marker == "plain":
        (proj / "pyproject.toml").write_text('[project]\nname = "x"\n', encoding="utf-8")
    return proj


@pytest.mark.parametrize("marker", ["config", "plain", None])
def test_baseline_matches_whatever_the_path_spelling(tmp_path: Path, marker: str | None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 10 #1: `src`, `src/`, `./src`, an absolute path and a run from inside `src`
    (with a project root marker) are the same files: the baseline hides the same findings."""
    proj = _project(tmp_path, marker)
    monkeypatch.chdir(proj)
    code, out, _ = run(["src", "--format", "json"])
    doc = json.loads(out)
    n = len(doc["findings"])
    assert code == 1 and n >= 4
    base = proj / "base.json"
    base.write_text(out, encoding="utf-8")
    spellings = ["src", "src/", "./src", str(proj / "src"), "src/app.py", "./src/app2.py"]
    for spelling in spellings:
        code, out, err = run([spelling, "--baseline", "base.json"])
        assert code == 0, (spelling, out, err)
        assert "in the --baseline" in out
    if marker is not None:  # the project root is found from inside src
        monkeypatch.chdir(proj / "src")
        for argv in (["."], ["app.py", "./app2.py"], [str(proj / "src")]):
            code, out, err = run([*argv, "--baseline", "../base.json"])
            assert code == 0, (argv, out, err)
        monkeypatch.chdir(tmp_path)
        code, out, _ = run(["proj/src", "--baseline", str(base)])
        assert code == 0, out
    # the displayed path stays as typed
    monkeypatch.chdir(proj)
    code, out, _ = run(["./src", "--format", "json"])
    again = json.loads(out)
    assert {f["file"] for f in again["findings"]} == {"./src/app.py", "./src/app2.py"}
    assert [f["fingerprint"] for f in again["findings"]] == \
        [f["fingerprint"] for f in doc["findings"]]


def test_sarif_partial_fingerprints_are_path_spelling_independent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proj = _project(tmp_path, "config")
    monkeypatch.chdir(proj)

    def prints(spelling: str) -> list[str]:
        _, out, _ = run([spelling, "--format", "sarif"])
        return sorted(r["partialFingerprints"]["promptcache/v1"]
                      for r in json.loads(out)["runs"][0]["results"])

    first = prints("src")
    assert first and prints("./src") == first and prints(str(proj / "src")) == first
    monkeypatch.chdir(proj / "src")
    assert prints(".") == first


def test_old_baseline_still_matches_its_own_spelling(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A baseline written before the fix (fingerprints over the path as displayed, here
    `./src/app.py`) still hides the findings when linted with that spelling."""
    proj = _project(tmp_path, "config")
    monkeypatch.chdir(proj)
    result = lint_paths(["./src"])
    assert result.findings
    old = {"version": "0.0.0", "findings": [
        {**f.to_dict(), "fingerprint": f.legacy_fingerprint} for f in result.findings]}
    assert all(f.legacy_fingerprint != f.fingerprint for f in result.findings)
    (proj / "old.json").write_text(json.dumps(old), encoding="utf-8")
    code, out, _ = run(["./src", "--baseline", "old.json"])
    assert code == 0, out


def test_lint_text_and_lint_paths_agree_on_the_identity(tmp_path: Path) -> None:
    from promptcache.lint import lint_text

    proj = _project(tmp_path, "plain")
    path = proj / "src" / "app.py"
    [*found] = lint_paths([str(path)]).findings
    assert found and {f.project_path for f in found} == {"src/app.py"}
    config = LintConfig(baseline=frozenset(f.fingerprint for f in found))
    assert lint_text(APP, str(path), config) == []


# ------------------------------------------------------------------ 2. unknown config keys
@pytest.mark.parametrize("body,key,hint", [
    ('foo = 1\n', "'foo'", "known keys: select"),
    ('per-file-ignore = {"src/app.py" = ["PC101"]}\n', "'per-file-ignore'",
     "did you mean 'per-file-ignores'?"),
    ('min-severty = "info"\n', "'min-severty'", "did you mean 'min-severity'?"),
    ('extend_selct = ["PC202"]\n', "'extend_selct'", "did you mean 'extend-select'?"),
    ('[tool.promptcache.lint]\nselct = ["PC1"]\n', "'selct'", "did you mean 'select'?"),
])
def test_unknown_config_key_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        body: str, key: str, hint: str) -> None:
    """Trial 10 #2: as ruff, a key [tool.promptcache] does not know is an error naming the
    file and the key (exit 2), with the closest known key when one is close."""
    proj = _project(tmp_path, None)
    pyproject = proj / "pyproject.toml"
    pyproject.write_text("[tool.promptcache]\n" + body, encoding="utf-8")
    monkeypatch.chdir(proj)
    code, _, err = run(["src"])
    assert code == 2
    [line] = err.strip().splitlines()
    assert line.startswith(f"{pyproject}: error: [tool.promptcache")
    assert f"unknown key {key}" in line and hint in line
    with pytest.raises(ConfigError, match="unknown key"):
        LintConfig.from_pyproject(pyproject)


@pytest.mark.parametrize("body", [
    'select = ["PC1", "PC3"]\nextend-select = ["PC202"]\nignore = ["PC401"]\n'
    'per-file-ignores = { "prompts/legacy/*.j2" = ["PC104"] }\nmodel = "claude-sonnet-4-5"\n'
    'min-severity = "warning"\nexclude = ["tests/fixtures/*"]\nmax-file-size = 26214400\n',
    'extend_select = ["PC202"]\nper_file_ignores = { "x.j2" = ["PC104"] }\n'
    'min_severity = "info"\nmax_file_size = 1000\n',
    '[tool.promptcache.lint]\nselect = ["PC1"]\nmin-severity = "warning"\n',
    '[tool.promptcache.per-file-ignores]\n"x.json" = ["PC101"]\n',
])
def test_every_documented_key_is_accepted(tmp_path: Path, body: str) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.promptcache]\n" + body, encoding="utf-8")
    LintConfig.from_pyproject(pyproject)


def test_lint_key_must_be_a_table(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.promptcache]\nlint = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="lint must be a table"):
        LintConfig.from_pyproject(pyproject)


# ------------------------------------------------------------------ 3. JSONL incomplete last line
def _line(i: int) -> str:
    return json.dumps({"request": {
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": f"Now: 2026-01-0{i}T03:04:05Z\n" + filler(1500, "l"),
                    "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": f"q{i}"}]}})


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_jsonl_incomplete_last_line_is_skipped_with_a_warning(tmp_path: Path, fmt: str) -> None:
    """Trial 10 #7: a last line without a newline that is not JSON (a log being written) is
    skipped with a warning; the complete lines are linted and the exit code is theirs."""
    complete = "".join(_line(i) + "\n" for i in range(1, 5))
    full = tmp_path / "full.jsonl"
    full.write_text(complete, encoding="utf-8")
    cut = tmp_path / "cut.jsonl"
    cut.write_text(complete + _line(5)[:101], encoding="utf-8")
    want, want_out, _ = run([str(full), "--format", fmt])
    code, out, err = run([str(cut), "--format", fmt])
    assert want == 1 and code == want
    message = "line 5: incomplete last line (no newline at end), skipped"
    if fmt == "github":
        assert err == "" and f"::warning file={cut}," in out and message in out
    else:
        assert err == f"{cut}: warning: {message}\n"
    if fmt == "json":
        doc = json.loads(out)
        assert doc["warnings"] == [{"file": str(cut), "reason": message}]
        assert len(doc["findings"]) == len(json.loads(want_out)["findings"])
    if fmt == "sarif":
        [note] = json.loads(out)["runs"][0]["invocations"][0]["toolExecutionNotifications"]
        assert note["level"] == "warning"
        assert json.loads(out)["runs"][0]["invocations"][0]["executionSuccessful"] is True
    result = lint_paths([str(cut)])
    assert result.exit_code == 1 and [w.reason for w in result.warnings] == [message]


@pytest.mark.parametrize("content,where", [
    ('{"a": 1}\n{oops\n{"b": 2}\n', "line 2, column 2: invalid JSON ("),   # in the middle
    ('{"a": 1}\n{oops\n', "line 2, column 2: invalid JSON ("),            # last, with newline
    ('{oops', "line 1, column 2: invalid JSON ("),                         # nothing complete
])
def test_jsonl_broken_line_stays_an_error(tmp_path: Path, content: str, where: str) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(content, encoding="utf-8")
    code, _, err = run([str(path)])
    assert code == 2
    [line] = err.strip().splitlines()
    assert line.startswith(f"{path}: error: {where}")
    assert "line 1 column" not in line  # no json-module position contradicting the file line


def test_jsonl_invalid_json_message_names_the_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(_line(1) + "\n" + '{"x": 1, oops}\n' + _line(2) + "\n", encoding="utf-8")
    code, _, err = run([str(path)])
    assert code == 2
    assert err.strip() == (f"{path}: error: line 2, column 10: invalid JSON (Expecting property "
                           "name enclosed in double quotes)")


def test_a_last_line_nested_too_deeply_is_an_error_not_incomplete(tmp_path: Path) -> None:
    """Review 11: a complete last line that is only nested too deeply to read was skipped as
    "incomplete"; only a last line that is not JSON is."""
    log = tmp_path / "deep.jsonl"
    log.write_text(_line(0) + "\n" + "[" * 100_000 + "]" * 100_000)
    code, _, err = run([str(log)])
    assert code == 2 and "nested too deeply" in err and "incomplete" not in err
