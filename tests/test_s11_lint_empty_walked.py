"""An empty file a folder walk finds (an empty pyproject.toml, an empty YAML config) is skipped
with a note, not an input error that fails the run with exit 2; named, it is still an error."""

from __future__ import annotations

import io
from pathlib import Path

from promptcache.lint import lint_paths
from promptcache.lint.cli import main

STABLE = "You are a careful assistant for the Acme billing platform. " * 120


def _project(root: Path) -> None:
    (root / "pyproject.toml").write_text("", encoding="utf-8")
    (root / "prompts").mkdir()
    (root / "prompts" / "empty.yaml").write_text("\n  \n", encoding="utf-8")
    (root / "prompts" / "system.yaml").write_text(
        "system: |\n  Today is {{ current_date }}.\n  " + STABLE + "\n", encoding="utf-8")


def test_a_folder_walk_skips_empty_files(tmp_path: Path) -> None:
    _project(tmp_path)
    res = lint_paths([str(tmp_path)])
    assert res.errors == []
    assert res.skipped == {str(tmp_path / "prompts" / "empty.yaml"): "empty file",
                           str(tmp_path / "pyproject.toml"): "empty file"}
    assert [f.code for f in res.findings] == ["PC104"]  # the other files are still linted


def test_the_cli_exit_code_follows_the_findings_not_the_empty_files(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    (tmp_path / "a.yaml").write_text("system: hello\n", encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    assert main([str(tmp_path)], stdout=out, stderr=err) == 0
    assert "pyproject.toml: skipped: empty file" in out.getvalue() + err.getvalue()


def test_an_empty_file_named_is_still_an_error(tmp_path: Path) -> None:
    _project(tmp_path)
    res = lint_paths([str(tmp_path / "prompts" / "empty.yaml")])
    assert [(e.file, e.reason) for e in res.errors] == [
        (str(tmp_path / "prompts" / "empty.yaml"), "empty file")]


def test_one_file_under_several_spellings_is_linted_once(tmp_path: Path) -> None:
    import os

    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.yaml").write_text(
        "system: |\n  Today is {{ current_date }}.\n  " + STABLE + "\n", encoding="utf-8")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = lint_paths(["t/a.yaml", "./t/a.yaml", str(tmp_path / "t" / "a.yaml"), "t"])
    finally:
        os.chdir(here)
    assert res.files == ["t/a.yaml"]
    assert [f.code for f in res.findings] == ["PC104"]


def test_globs_reach_dot_folders_and_an_all_skipped_glob_is_an_error(tmp_path: Path) -> None:
    # trial 20: 'dots/**/*.hbs' linted 0 files and passed; the folder walk finds them
    import os

    text = "Today is {{ current_date }}.\n" + STABLE + "\n"
    (tmp_path / "d" / ".github" / "prompts").mkdir(parents=True)
    (tmp_path / "d" / ".github" / "prompts" / "a.j2").write_text(text, encoding="utf-8")
    (tmp_path / "d" / ".venv").mkdir()
    (tmp_path / "d" / ".venv" / "b.j2").write_text(text, encoding="utf-8")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        found = lint_paths(["d/**/*.j2"])
        skipped = lint_paths(["d/**/b.j2"])
    finally:
        os.chdir(here)
    assert found.files == [os.path.join("d", ".github", "prompts", "a.j2")]
    assert [f.code for f in found.findings] == ["PC104"]
    assert [e.reason for e in skipped.errors] == [
        "every file this pattern matches (1) is in a skipped or excluded folder"]


def test_a_glob_takes_dot_files_only_with_a_known_suffix(tmp_path: Path) -> None:
    # review 21: 'prompts/*' picked up .env, .DS_Store, .gitkeep, which a folder walk skips
    import os

    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "a.txt").write_text("You are a helpful assistant.\n",
                                                encoding="utf-8")
    (tmp_path / "prompts" / ".env").write_text("API_KEY=secret\n", encoding="utf-8")
    (tmp_path / "prompts" / ".DS_Store").write_bytes(b"\x00\x01binary")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = lint_paths(["prompts/*"])
    finally:
        os.chdir(here)
    assert res.errors == [] and res.files == [os.path.join("prompts", "a.txt")]
