"""Time ``promptcache explain`` on a 1,000-request log (goal: under 2 s on the dev machine).

The log: 100 interleaved Anthropic agent sessions of 10 turns (5 tools, a 2,000-token system
prompt with a breakpoint, growing history with the breakpoint on the last block, usage on
every line), no session ids, so sessions are inferred from prefix growth. One session in
five carries a fault: tools reordered, a timestamp in the system prompt, a history edit, a
tool_choice switch, or a 10-minute pause (TTL expiry).

Prints the explain time next to the time to only render the same requests (the floor:
explain renders each request exactly once), requests per second, and the ratio to the goal.

``--growing N`` measures memory instead: explain on a log of N requests of one growing
conversation (request k repeats all earlier turns, so the log is quadratic in size; no session
ids, a request every 20 s, usage on every line), run in a fresh child process. It prints the
child's peak resident set size (``ru_maxrss``) minus its RSS after the imports, i.e. the peak
memory explain added, beside the log's size and the run time.

    .venv/bin/python bench/explain_speed.py [--requests 1000] [--repeat 3]
    .venv/bin/python bench/explain_speed.py --growing 2000
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from promptcache.diff import explain
from promptcache.prefix import render

WORDS = ("cache prefix token model request system message tool result value order stable "
         "history context breakpoint block write read hit miss price cost user agent").split()
MODEL = "claude-sonnet-4-5"
GOAL_S = 2.0


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def build_log(n_requests: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    turns = 10
    n_sessions = max(1, n_requests // turns)
    tools = [{"name": f"tool_{k}", "description": words(rng, 120),
              "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}}}
             for k in range(5)]
    system = words(rng, 2000)
    sessions = []
    for s in range(n_sessions):
        fault = ("tools_reordered", "system_changed", "history_edit", "tool_choice",
                 "ttl")[s % 5] if s % 5 == 0 or rng.random() < 0.2 else None
        sessions.append({"id": s, "fault": fault, "msgs": [], "t": 1_700_000_000.0 + s,
                         "read": 0, "write": 0})
    lines: list[dict[str, Any]] = []
    for turn in range(turns):
        for sess in sessions:
            if len(lines) >= n_requests:
                break
            msgs = sess["msgs"]
            if msgs:
                msgs.append({"role": "assistant", "content": [
                    {"type": "text", "text": words(rng, 150)}]})
            msgs.append({"role": "user", "content": [{"type": "text",
                                                      "text": f"s{sess['id']} t{turn} "
                                                              + words(rng, 80)}]})
            body_tools = list(tools)
            sys_text = system
            choice: dict[str, Any] = {"type": "auto"}
            fault = sess["fault"] if turn == 5 else None
            if fault == "tools_reordered":
                body_tools = list(reversed(tools))
            elif fault == "system_changed":
                sys_text = system + f" Now: 2026-11-29T20:{turn:02d}:00Z"
            elif fault == "history_edit":
                msgs[0]["content"][0]["text"] += " (edited)"
            elif fault == "tool_choice":
                choice = {"type": "any"}
            sess["t"] += 700.0 if fault == "ttl" else rng.uniform(5, 60)
            marked = [{"role": m["role"], "content": [dict(b) for b in m["content"]]}
                      for m in msgs]
            marked[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
            body = {"model": MODEL, "max_tokens": 512, "tools": body_tools,
                    "tool_choice": choice,
                    "system": [{"type": "text", "text": sys_text,
                                "cache_control": {"type": "ephemeral"}}],
                    "messages": marked}
            total = 2000 + 5 * 140 + sum(160 for _ in msgs)
            missed = fault is not None or turn == 0
            read = 0 if missed else sess["read"] + sess["write"]
            usage = {"input_tokens": 3, "cache_read_input_tokens": read,
                     "cache_creation_input_tokens": max(0, total - read), "output_tokens": 150}
            sess["read"], sess["write"] = read, max(0, total - read)
            lines.append({"timestamp": sess["t"], "request": body, "usage": usage})
    return lines


def write_growing_log(path: Path, n_requests: int, seed: int = 11) -> None:
    """Write (streaming: the log is quadratic in size) one conversation of ``n_requests``
    requests, each repeating every earlier turn, the breakpoint on its last block."""
    rng = random.Random(seed)
    system = words(rng, 1500)
    msgs: list[str] = []  # each turn serialised once; every line joins them
    read = write = 0
    t = 1_700_000_000.0
    with path.open("w", encoding="utf-8") as out:
        for k in range(n_requests):
            if k:
                msgs.append(json.dumps({"role": "assistant",
                                        "content": [{"type": "text", "text": words(rng, 12)}]}))
            last = {"role": "user", "content": [{"type": "text", "text": f"t{k} "
                                                 + words(rng, 12),
                                                 "cache_control": {"type": "ephemeral"}}]}
            plain = {"role": "user", "content": [{"type": "text",
                                                  "text": last["content"][0]["text"]}]}
            body = ('{"model": "' + MODEL + '", "max_tokens": 512, "system": [{"type": "text", '
                    '"text": "' + system + '", "cache_control": {"type": "ephemeral"}}], '
                    '"messages": [' + ", ".join([*msgs, json.dumps(last)]) + "]}")
            msgs.append(json.dumps(plain))
            total = 1500 + 16 * len(msgs)
            read, write = (read + write, max(0, total - read - write)) if k else (0, total)
            usage = {"input_tokens": 3, "cache_read_input_tokens": read,
                     "cache_creation_input_tokens": write, "output_tokens": 20}
            t += 20.0
            out.write(f'{{"timestamp": {t:.1f}, "request": {body}, '
                      f'"usage": {json.dumps(usage)}}}\n')


def _rss_mb() -> float:
    """This process's peak resident set size so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_child(path: str) -> None:
    """Run explain once on ``path`` and print one JSON line: peak RSS added, time, report."""
    base = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    report = explain(path, progress=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"base_mb": base, "peak_mb": _rss_mb(), "wall": wall, "cpu": cpu,
                      "requests": len(report.requests), "sessions": report.sessions,
                      "misses": report.misses,
                      "compared_with_previous": sum(
                          1 for r in report.requests
                          if r.compared_with_line == r.line - 1)}))


def growing(n_requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "growing.jsonl"
        write_growing_log(path, n_requests)
        size_mb = path.stat().st_size / 1e6
        proc = subprocess.run([sys.executable, __file__, "--_measure", str(path)],
                              capture_output=True, text=True, check=True)
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"growing conversation: {n_requests} requests, {size_mb:.1f} MB log, "
          f"{r['sessions']} session(s) inferred, {r['misses']} misses, "
          f"{r['compared_with_previous']} compared with the line before")
    added = r["peak_mb"] - r["base_mb"]
    print(f"explain peak RSS added (ru_maxrss in a fresh process, minus RSS after imports): "
          f"{added:.1f} MB = {added / size_mb:.2f}x the log (after imports "
          f"{r['base_mb']:.1f} MB, peak {r['peak_mb']:.1f} MB)")
    print(f"explain time: {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--growing", type=int, metavar="N",
                        help="measure peak memory on a growing conversation of N requests")
    parser.add_argument("--_measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._measure:
        measure_child(args._measure)
        return
    if args.growing:
        growing(args.growing)
        return
    lines = build_log(args.requests)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.jsonl"
        path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
        size_mb = path.stat().st_size / 1e6
        explain_wall, explain_cpu, render_wall, render_cpu = [], [], [], []
        report = None
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            for x in lines:
                render(x["request"], "anthropic")
            render_wall.append(time.perf_counter() - t0)
            render_cpu.append(time.process_time() - c0)
            t0, c0 = time.perf_counter(), time.process_time()
            report = explain(path, progress=False)
            explain_wall.append(time.perf_counter() - t0)
            explain_cpu.append(time.process_time() - c0)
    assert report is not None
    ew, ec, rw, rc = min(explain_wall), min(explain_cpu), min(render_wall), min(render_cpu)
    print(f"log: {len(lines)} requests, {size_mb:.1f} MB, {report.sessions} sessions inferred, "
          f"{report.misses} misses")
    print(f"{'best of ' + str(args.repeat):24}{'wall s':>10}{'CPU s':>10}{'req/s':>10}"
          f"{'CPU/goal':>10}")
    print(f"{'explain (file)':24}{ew:10.3f}{ec:10.3f}{len(lines) / ew:10.0f}{ec / GOAL_S:10.2f}")
    print(f"{'render only (floor)':24}{rw:10.3f}{rc:10.3f}{len(lines) / rw:10.0f}"
          f"{rc / GOAL_S:10.2f}")
    print(f"explain / render-only (CPU): {ec / rc:.2f}x; goal < {GOAL_S:.0f} s: "
          f"{'met' if ec < GOAL_S else 'NOT met'} on CPU time, "
          f"{'met' if ew < GOAL_S else 'NOT met'} on wall time (shared machine)")
    by_cause = ", ".join(f"{s.cause} {s.count}" for s in report.summary)
    print(f"causes: {by_cause}")


if __name__ == "__main__":
    main()
