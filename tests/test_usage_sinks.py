"""JSONL sink and reader: whole lines under threads and processes, named errors on bad lines."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import threading
from pathlib import Path

import pytest

from promptcache._errors import InputError
from promptcache.usage import JsonlSink, MemorySink, UsageRecord, iter_jsonl, read_jsonl

THREADS = 32
PROCESSES = 4


def _writer(sink: JsonlSink, proc: int, threads: int, per_thread: int) -> None:
    def work(t: int) -> None:
        for i in range(per_thread):
            # model_construct: this test is about the sink, not pydantic validation (4x faster)
            sink.write(UsageRecord.model_construct(provider="x", cache_read=i, output=1,
                                                   request_id=f"{proc}.{t}.{i}"))

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()


def _hammer(path: Path, per_thread: int, *, fsync: bool = False) -> None:
    """THREADS threads in each of PROCESSES forked processes; the sink is created (and its fd
    opened) in the parent, so children must re-open instead of sharing the parent's flock."""
    sink = JsonlSink(path, fsync=fsync)
    sink.write(UsageRecord(provider="x", cache_read=0, output=0, request_id="parent"))
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(sink, p, THREADS, per_thread))
             for p in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    sink.close()


def _verify(path: Path, per_thread: int) -> None:
    seen = {(p, t): bytearray(per_thread) for p in range(PROCESSES) for t in range(THREADS)}
    lines = reads = 0
    with path.open("rb") as fh:
        for raw in fh:
            lines += 1
            assert raw.endswith(b"\n")
            data = json.loads(raw)  # a torn or interleaved line fails here
            if data["request_id"] == "parent":
                continue
            p, t, i = (int(x) for x in data["request_id"].split("."))
            assert seen[(p, t)][i] == 0, "duplicate line"
            seen[(p, t)][i] = 1
            assert data["cache_read"] == i
            reads += data["cache_read"]
    assert lines == 1 + PROCESSES * THREADS * per_thread  # nothing lost
    assert all(all(bits) for bits in seen.values())
    assert reads == PROCESSES * THREADS * sum(range(per_thread))  # totals exact


@pytest.mark.slow
def test_32_threads_x_4_processes_x_10000_records_no_lost_or_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    _hammer(path, 10_000)
    _verify(path, 10_000)


def test_small_concurrent_run_with_fsync_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "usage.jsonl"
    _hammer(path, 20, fsync=True)
    _verify(path, 20)
    records = read_jsonl(path)
    assert len(records) == 1 + PROCESSES * THREADS * 20
    assert sum(r.cache_read or 0 for r in records) == PROCESSES * THREADS * sum(range(20))


def test_roundtrip_keeps_every_field_and_none(tmp_path: Path) -> None:
    path = tmp_path / "u.jsonl"
    recs = [
        UsageRecord(provider="anthropic", model="claude-opus-5", uncached_input=3,
                    cache_read=100, cache_write=20, cache_write_5m=15, cache_write_1h=5,
                    output=7, reasoning=2, start=1.5, first_token=2.0, end=3.25, label="a",
                    session="s", request_id="r", prefix_hash="h", flags=("x",)),
        UsageRecord(provider="vllm", input_total=10),
    ]
    with JsonlSink(path) as sink:
        sink.write(recs[0])
        sink.write_many([recs[1]])
    assert read_jsonl(path) == recs
    assert "cache_read" not in path.read_text().splitlines()[1]  # unknown stays absent


@pytest.mark.parametrize(("content", "line", "reason"), [
    ('{"provider": "x"}\n{not json\n', 2, "not JSON"),
    ('{"provider": "x"}\n\n[1, 2]\n', 3, "expected a JSON object (one per line), got an array"),
    ('{"provider": "x", "cache_read": -5}\n', 1, "not a usage record (cache_read"),
    ('{"cache_read": 5}\n', 1, "not a usage record (provider"),
    ('{"provider": "x", "colour": 1}\n', 1, "not a usage record (colour"),
])
def test_bad_line_names_file_and_line(tmp_path: Path, content: str, line: int,
                                      reason: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(InputError) as info:
        read_jsonl(path)
    assert info.value.file == f"{path}:{line}"
    assert info.value.reason.startswith(reason)


def test_missing_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        read_jsonl(tmp_path / "nope.jsonl")
    assert info.value.file.endswith("nope.jsonl")
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b'{"provider": "x"}\n\xff\xfe\n')
    with pytest.raises(InputError, match="not UTF-8"):
        list(iter_jsonl(binary))


def test_memory_sink_snapshot() -> None:
    sink = MemorySink()
    r = UsageRecord(provider="x")
    sink.write(r)
    snap = sink.records
    sink.write(r)
    assert len(snap) == 1 and len(sink) == 2


def test_sink_reopens_after_close(tmp_path: Path) -> None:
    path = tmp_path / "u.jsonl"
    sink = JsonlSink(path)
    sink.write(UsageRecord(provider="x"))
    sink.close()
    sink.write(UsageRecord(provider="y"))
    sink.close()
    assert [r.provider for r in read_jsonl(path)] == ["x", "y"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
