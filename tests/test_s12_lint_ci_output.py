"""CI output of ``promptcache lint`` (trial 30): SARIF columns counted in code points, JSON and
SARIF valid UTF-8 whatever the stream's encoding (SARIF §3.1; a Windows runner's redirected
stdout is cp1252), ``github`` workflow commands in UTF-8, and a file name that is not UTF-8
reported instead of a traceback."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import jsonschema
import pytest

from promptcache.lint.cli import lint_command, main
from tests.cases import filler

SCHEMA = Path(__file__).parent / "fixtures" / "lint" / "sarif-schema-2.1.0.json"


def _template(folder: Path, name: str | bytes, head: str = "") -> None:
    """A template whose clock value ``{{ now }}`` comes before stable text (PC104)."""
    text = f"{head}Current time: {{{{ now }}}}\n{filler(300)}\n"
    path = os.path.join(os.fsencode(folder), name) if isinstance(name, bytes) else folder / name
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    (tmp_path / "prompts").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_sarif_declares_code_point_columns(project: Path) -> None:
    # '😀' is one character but two UTF-16 code units: SARIF's default column unit
    _template(project / "prompts", "emoji.j2", head="😀😀 ")
    out = io.StringIO()
    assert main(["prompts/emoji.j2", "--format", "sarif"], stdout=out) == 1
    log = json.loads(out.getvalue())
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text(encoding="utf-8"))).validate(log)
    run0 = log["runs"][0]
    assert run0["columnKind"] == "unicodeCodePoints"
    region = run0["results"][0]["locations"][0]["physicalLocation"]["region"]
    line = (project / "prompts" / "emoji.j2").read_text(encoding="utf-8").splitlines()[0]
    assert region["startColumn"] == line.index("{{ now }}") + 1  # code points, 1-based


@pytest.mark.parametrize("fmt", ["json", "sarif"])
@pytest.mark.parametrize("encoding", ["cp1252", "ascii"])
def test_json_and_sarif_are_utf8_whatever_the_stream(project: Path, fmt: str,
                                                      encoding: str) -> None:
    _template(project / "prompts", "bäse 😀.j2")
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, newline="\n")
    assert main(["prompts", "--format", fmt], stdout=stream) == 1
    stream.flush()
    doc = json.loads(raw.getvalue().decode("utf-8"))
    if fmt == "json":
        assert doc["findings"][0]["file"] == "prompts/bäse 😀.j2"
        # the file reads back as a --baseline, hiding the finding
        baseline = project / "baseline.json"
        baseline.write_bytes(raw.getvalue())
        assert main(["prompts", "--baseline", str(baseline)]) == 0
    else:
        loc = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"] == "prompts/b%C3%A4se%20%F0%9F%98%80.j2"


def test_github_annotations_are_utf8(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _template(project / "prompts", "bäse, 50%.j2")
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="cp1252"))
    with pytest.raises(SystemExit) as exc:
        lint_command.main(["prompts", "--format", "github"], standalone_mode=False)
    assert exc.value.code == 1
    sys.stdout.flush()
    text = raw.getvalue().decode("utf-8")
    assert text.startswith("::warning file=prompts/bäse%2C 50%25.j2,line=1,col=15,")


@pytest.mark.skipif(sys.platform in ("win32", "darwin"),
                    reason="needs a file system that takes any bytes as a name")
def test_sarif_of_a_file_name_that_is_not_utf8(project: Path) -> None:
    try:
        _template(project / "prompts", b"bad\xff.j2")
    except OSError:  # pragma: no cover - a file system that refuses the name
        pytest.skip("file system refuses a non-UTF-8 name")
    out = io.StringIO()
    assert main(["prompts", "--format", "sarif"], stdout=out) == 1
    loc = json.loads(out.getvalue())["runs"][0]["results"][0]["locations"][0]
    assert loc["physicalLocation"]["artifactLocation"]["uri"] == "prompts/bad%FF.j2"
