"""Records per second through the usage pipeline, each step beside its baseline.

- parse: ``parse_usage`` on an SDK ``Message`` and on a plain dict, beside ``Message.model_dump``
  (the floor: we dump SDK objects once).
- track: ``UsageTracker.add`` (pricing, grouping, session checks) beside ``MemorySink.write``.
- sink: ``JsonlSink.write`` (O_APPEND + flock, one write per line) beside a plain buffered
  ``file.write`` of the same lines (no locking, not multi-process safe), and with 8 threads.

Run: .venv/bin/python bench/usage_throughput.py [N]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from anthropic.types import Message

from promptcache.usage import JsonlSink, MemorySink, UsageRecord, UsageTracker, parse_usage

MSG = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
       "content": [], "stop_reason": "end_turn", "stop_sequence": None,
       "usage": {"input_tokens": 50, "cache_read_input_tokens": 2400,
                 "cache_creation_input_tokens": 120,
                 "cache_creation": {"ephemeral_5m_input_tokens": 120,
                                    "ephemeral_1h_input_tokens": 0},
                 "output_tokens": 310}}


def _rate(n: int, fn: Callable[[int], object]) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - t0)


def _threads(n: int, k: int, fn: Callable[[int], object]) -> float:
    per = n // k

    def work() -> None:
        for i in range(per):
            fn(i)

    pool = [threading.Thread(target=work) for _ in range(k)]
    t0 = time.perf_counter()
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    return per * k / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=5_000,
                        help="records per measurement (default 5000)")
    n = parser.parse_args().n
    obj = Message.model_validate(MSG)
    rec = parse_usage(obj, label="bench", session="s")
    rows: list[tuple[str, float, str, float]] = []
    rows.append(("parse_usage(Message)", _rate(n, lambda i: parse_usage(obj)),
                 "Message.model_dump()", _rate(n, lambda i: obj.model_dump())))
    rows.append(("parse_usage(dict)", _rate(n, lambda i: parse_usage(MSG)),
                 "UsageRecord(...) only", _rate(n, lambda i: UsageRecord(
                     provider="anthropic", uncached_input=50, cache_read=2400))))
    tracker = UsageTracker(warn=False, keep_records=False)
    mem = MemorySink()
    rows.append(("UsageTracker.add", _rate(n, lambda i: tracker.add(rec)),
                 "MemorySink.write", _rate(n, lambda i: mem.write(rec))))
    with tempfile.TemporaryDirectory() as tmp:
        line = rec.model_dump_json(exclude_defaults=True)
        with JsonlSink(Path(tmp) / "a.jsonl") as sink, open(Path(tmp) / "b.jsonl", "a") as fh:
            rows.append(("JsonlSink.write_line", _rate(n, lambda i: sink.write_line(line)),
                         "file.write (buffered)", _rate(n, lambda i: fh.write(line + "\n"))))
            rows.append(("JsonlSink.write_line x8 thr", _threads(n, 8, lambda i: sink.write_line(
                line)), "JsonlSink.write_line x1", _rate(n, lambda i: sink.write_line(line))))
    print(f"{'ours':<30}{'rec/s':>12}   {'baseline':<26}{'rec/s':>12}{'ratio':>8}")
    for ours, r1, base, r2 in rows:
        print(f"{ours:<30}{r1:>12,.0f}   {base:<26}{r2:>12,.0f}{r1 / r2:>8.2f}")


if __name__ == "__main__":
    main()
