"""JsonlSink (new-user trial 29): an unwritable path failed only at the first write, after the
API call was paid for; a log moved or deleted under it (rotation) kept receiving lines into
the lost file."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptcache.usage import parse_usage
from promptcache.usage.sinks import JsonlSink, read_jsonl


def _rec() -> object:
    return parse_usage({"type": "message", "model": "claude-sonnet-4-6", "usage": {
        "input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0}})


def test_unwritable_path_fails_when_the_sink_is_made(tmp_path: Path) -> None:
    target = tmp_path / "dir"
    target.mkdir()
    with pytest.raises(OSError):
        JsonlSink(target)  # a folder, not a file: cannot be opened for appending


def test_rotated_log_gets_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    sink = JsonlSink(path)
    sink.write(_rec())  # type: ignore[arg-type]
    path.rename(tmp_path / "usage.jsonl.1")
    sink.write(_rec())  # type: ignore[arg-type]
    assert len(list(read_jsonl(path))) == 1
    path.unlink()
    sink.write(_rec())  # type: ignore[arg-type]
    assert len(list(read_jsonl(path))) == 1
    assert len(list(read_jsonl(tmp_path / "usage.jsonl.1"))) == 1
    sink.close()
