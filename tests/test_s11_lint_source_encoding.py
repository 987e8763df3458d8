"""Python source is read in the encoding its coding line declares (PEP 263), as Python reads
it: a valid latin-1 module was refused as "not valid UTF-8" (exit 2) and its findings lost
(new-user trial 18)."""

from __future__ import annotations

from pathlib import Path

from promptcache.lint import lint_paths

SOURCE = ("# -*- coding: latin-1 -*-\n"
          "import datetime\nimport anthropic\n"
          "c = anthropic.Anthropic()\n"
          "# Caf\u00e9 r\u00e9servations\n"
          "c.messages.create(model='claude-sonnet-4-6', max_tokens=10, "
          "system=f'Now: {datetime.datetime.now()}', messages=[])\n")


def test_a_declared_latin1_module_is_linted(tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes(SOURCE.encode("latin-1"))
    res = lint_paths([str(path)])
    assert res.errors == []
    assert [(f.code, f.line) for f in res.findings] == [("PC101", 6)]


def test_undeclared_latin1_bytes_are_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "plain.py"
    path.write_bytes(SOURCE.replace("# -*- coding: latin-1 -*-\n", "").encode("latin-1"))
    [err] = lint_paths([str(path)]).errors
    assert err.reason.startswith("not valid UTF-8")


def test_an_unknown_declared_encoding_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "odd.py"
    path.write_bytes(b"# coding: no-such-codec\nx = 1\n")
    [err] = lint_paths([str(path)]).errors
    assert err.reason.startswith("bad source encoding")


def test_a_json_file_with_a_coding_like_line_stays_utf8(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(b'{"system": "caf\xe9"}')
    [err] = lint_paths([str(path)]).errors
    assert err.reason.startswith("not valid UTF-8")


def test_a_non_text_or_unreadable_declared_codec_is_an_input_error(tmp_path: Path) -> None:
    # Python refuses these ("encoding problem"); rot13 raised an internal LookupError (review 17)
    for codec in ("rot13", "hex", "utf-16"):
        path = tmp_path / f"{codec}.py"
        path.write_bytes(f"# -*- coding: {codec} -*-\nx = 1\n".encode("ascii"))
        [err] = lint_paths([str(path)]).errors
        assert err.reason.startswith("bad source encoding") and codec in err.reason


def test_declared_utf8_and_cp1252_are_read(tmp_path: Path) -> None:
    for codec in ("utf-8", "cp1252"):
        path = tmp_path / f"{codec.replace('-', '')}.py"
        path.write_bytes(f"# -*- coding: {codec} -*-\nx = 1\n".encode("ascii"))
        assert lint_paths([str(path)]).errors == []


def test_str_stdin_ignores_the_coding_line() -> None:
    # text already decoded: its coding line no longer applies (review 18: "Café" was linted
    # as "CafÃ©" and the column moved)
    text = SOURCE.replace("# Caf\u00e9 r\u00e9servations\n", "")
    text = text.replace("system=f'Now: ", "system=f'Caf\u00e9 now: ")
    from_str = lint_paths(["-"], stdin=text, stdin_name="x.py")
    from_bytes = lint_paths(["-"], stdin=text.encode("latin-1"), stdin_name="x.py")
    assert [(f.code, f.line, f.col) for f in from_str.findings] == \
        [(f.code, f.line, f.col) for f in from_bytes.findings]
    assert from_str.findings and from_str.errors == []


def test_a_date_or_epoch_ending_a_sentence_is_found() -> None:
    # trial 20: "Today is 2025-05-04." and "... epoch 1764540000." were missed (the full stop)
    from promptcache.lint.volatile import scan_text

    assert [m.match for m in scan_text("Today is 2025-05-04.")] == ["2025-05-04"]
    # (a bare "On" no longer names a clock: trial 21, a schedule is stable text)
    assert [m.match for m in scan_text("Today: 05/04/2025. Then")] == ["05/04/2025"]
    assert [m.match for m in scan_text("Session started at epoch 1764540000.")] == [
        "1764540000"]
    assert scan_text("version 2025-05-04.1") == []  # a version, not a date
    assert scan_text("build v1764540000.1.2") == []


def test_a_date_or_epoch_in_a_file_name_is_not_a_value() -> None:
    # review 21: the sentence-end change let ".csv" / ".json" through
    from promptcache.lint.volatile import scan_text

    assert scan_text("updated in report_2025-05-04.csv") == []
    assert scan_text("generated at snapshot_1714000000.json") == []
