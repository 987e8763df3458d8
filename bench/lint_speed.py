"""Lint speed: promptcache lint beside the peers promptcachelint and cacheguardian.

Inputs (the same for every tool that can take them):

1. the corpus (../shared/corpus): every file, for promptcache (MB/s over all bytes); the
   request bodies found in it (request JSON files and recorded exchanges), for every tool
   (requests/s and MB/s over the bodies' JSON bytes);
2. one synthetic ~100k-token Anthropic request (tools, a cached system prompt with a
   timestamp, a 60-turn conversation), linted repeatedly.

Peers run in a separate virtual environment (default /work/benchenv; override with
PROMPTCACHE_BENCH_PEERS=/path/to/venv) and are never dependencies of promptcache:

    python -m venv /work/benchenv
    /work/benchenv/bin/pip install promptcachelint cacheguardian anthropic

What each peer can take, and what is skipped:

* promptcachelint: ``lint_request(get_provider(name), body)`` — request bodies only; it has no
  template or Python-source input, so the corpus' templates and source files are skipped for it.
* cacheguardian: ``dry_run(wrap(anthropic.Anthropic()), **body)`` — its pre-send check (no
  network call); Anthropic bodies only through an Anthropic client and OpenAI bodies through an
  OpenAI client; no file, template or source input.

Prints one table; the ratio column is promptcache's speed divided by the peer's. Every rate is
the median time of one pass over the input (about 101 passes over the corpus bodies, 31 over
the 100k-token request), for promptcache and the peers alike; promptcache's passes are cold
(its render memo and scan memo are emptied before each pass, outside the pass's time). The
passes are taken in 10 interleaved rounds (each tool's in turn), every tool kept running in
its own interpreter between rounds, so that drift in this shared machine's speed reaches every
tool alike. Every tool runs in four interpreters (hash seeds 0-3, :data:`PEER_SEEDS`),
promptcache as well as the peers: a tool's speed differs from one process to the next on this
machine, and each tool's fastest process is the one compared (the notes list every process's
time). The "rules only" row (the request already rendered) and the "token counting only" row
(the counter over the rendered segments' text, about what the renderer counts) are timed in
this interpreter; a note gives the counter's table size beside the CPU's L3 cache. No number is hard-coded: every figure
is measured on this machine in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from promptcache.lint import lint_paths, lint_request  # noqa: E402
from promptcache.lint.sources.request_json import find_request  # noqa: E402
from promptcache.prefix import render  # noqa: E402
from promptcache.tokens import get_counter, get_encoding_name  # noqa: E402

#: Rounds per input: each tool's passes in turn, repeated (see :class:`Peer`).
ROUNDS = 10
#: Hash seeds of the interpreters each tool runs in, one interpreter per seed: a tool's speed
#: differs from one process to the next on this machine (cacheguardian on the 100k-token
#: request by up to about 1.8x, promptcachelint on the corpus bodies by up to about 1.6x), so
#: every tool, promptcache included, is timed in several and its fastest process is compared.
PEER_SEEDS = (0, 1, 2, 3)
#: The tools timed on request bodies, each in its own interpreters (promptcache first).
TOOLS = ("promptcache", "promptcachelint", "cacheguardian")
CORPUS = ROOT.parent / "shared" / "corpus"
PEERS = Path(os.environ.get("PROMPTCACHE_BENCH_PEERS", "/work/benchenv"))
WORDS = ("cache prefix token model request system message tool result value order stable "
         "section history context breakpoint block write read hit miss price cost user agent "
         "server client time date file code test data state list text line word page").split()


def big_request(target_tokens: int = 100_000) -> dict[str, Any]:
    """A deterministic Anthropic request of about ``target_tokens`` tokens."""
    import random

    rng = random.Random(7)

    def prose(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    tools = [{"name": f"tool_{i:02d}", "description": prose(150),
              "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
             for i in range(20)]
    system = [{"type": "text", "text": "You are an agent. Current time: 2026-01-02 03:04:05.\n"
               + prose(8000), "cache_control": {"type": "ephemeral"}}]
    messages: list[dict[str, Any]] = []
    per_turn = max(10, (target_tokens - 11_000) // 120)
    for _turn in range(60):
        messages.append({"role": "user", "content": prose(per_turn)})
        messages.append({"role": "assistant", "content": prose(per_turn)})
    messages.append({"role": "user", "content": [{"type": "text", "text": "next step",
                                                  "cache_control": {"type": "ephemeral"}}]})
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "tools": tools,
            "system": system, "messages": messages}


def corpus_bodies() -> list[dict[str, Any]]:
    """Request bodies in the corpus (request JSON files and recorded exchanges)."""
    out: list[dict[str, Any]] = []
    for path in sorted(CORPUS.rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        items = data if isinstance(data, list) else [data]
        for item in items:
            found = find_request(item)
            if found is not None:
                out.append(dict(found[0]))
    return out


def timed(fn: Any, repeat: int, warm: bool = True) -> list[float]:
    """Seconds of each of ``repeat`` calls of ``fn``, cold: the per-text scan memo and the
    renderer's segment memo are emptied before each call, so repeating the same inputs measures
    the work a new request costs."""
    from promptcache.lint.volatile import scan_cache_clear
    from promptcache.prefix import render_cache_clear

    if warm:
        fn()  # warm-up (encoders, imports)
    times: list[float] = []
    for _ in range(repeat):
        scan_cache_clear()
        render_cache_clear()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


_PEER_SCRIPT = r'''
import json, sys, time
tool, path = sys.argv[1], sys.argv[2]
bodies = json.load(open(path))
before = None  # run before each timed pass, outside its time
def provider_of(b):
    return "anthropic" if ("system" in b or "claude" in str(b.get("model", ""))) else "openai"
if tool == "promptcachelint":
    from promptcachelint import lint_request, get_provider
    provs = {n: get_provider(n) for n in ("anthropic", "openai")}
    def run():
        for b in bodies:
            lint_request(provs[provider_of(b)], b)
elif tool == "promptcache":
    sys.path.insert(0, sys.argv[3])
    from promptcache.lint import lint_request
    from promptcache.lint.volatile import scan_cache_clear
    from promptcache.prefix import render_cache_clear
    def run():
        for b in bodies:
            lint_request(b)
    def before():  # cold: a new request's work, not a memo hit (as ``timed`` does)
        scan_cache_clear()
        render_cache_clear()
elif tool == "cacheguardian":
    import logging
    logging.disable(logging.CRITICAL)
    import cacheguardian, anthropic, openai
    clients = {"anthropic": cacheguardian.wrap(anthropic.Anthropic(api_key="sk-bench")),
               "openai": cacheguardian.wrap(openai.OpenAI(api_key="sk-bench"))}
    import contextlib, io
    def run():
        for b in bodies:
            kw = dict(b)
            kw.setdefault("max_tokens", 16)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                cacheguardian.dry_run(clients[provider_of(b)], **kw)
run()  # warm-up
print("ready", flush=True)
for line in sys.stdin:  # "N": time N passes and print their seconds; "quit": stop
    if line.strip() == "quit":
        break
    times = []
    for _ in range(int(line)):
        if before is not None:
            before()
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    print(json.dumps(times), flush=True)
'''


class Peer:
    """One tool in its own interpreter, kept running so that its passes can be interleaved with
    the other tools': this machine's speed drifts by up to 2x within a minute, and rounds taken
    side by side expose every tool to the same drift. A peer runs in its venv; promptcache runs
    in this interpreter's (the project venv), from this checkout."""

    def __init__(self, tool: str, bodies: list[dict[str, Any]], tmp: Path, seed: int) -> None:
        self.tool = tool
        self.seed = seed
        self.proc: subprocess.Popen[str] | None = None
        self.why = ""
        self.times: list[float] = []
        python = Path(sys.executable) if tool == "promptcache" else PEERS / "bin" / "python"
        if not python.exists():
            self.why = f"no peer venv at {PEERS} (see the module docstring)"
            return
        path = tmp / f"bodies-{tool}.json"
        path.write_text(json.dumps(bodies), encoding="utf-8")
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        self.proc = subprocess.Popen([str(python), "-c", _PEER_SCRIPT, tool, str(path),
                                      str(ROOT)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        if self._readline() != "ready":
            self._fail()

    def _readline(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def _fail(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        _, err = self.proc.communicate(timeout=60)
        last = (err.strip().splitlines() or ["failed"])[-1]
        self.why = f"{self.tool} failed: {last[:120]}"
        self.proc = None

    def run(self, passes: int) -> None:
        """Time ``passes`` passes over the bodies (seconds kept in :attr:`times`)."""
        if self.proc is None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{passes}\n")
        self.proc.stdin.flush()
        line = self._readline()
        if not line.startswith("["):
            self._fail()
            return
        self.times += json.loads(line)

    def close(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=60)


def _cache_note() -> str:
    """The token counter's table size beside this CPU's last-level cache: when the tables
    barely fit a cache shared with other tenants, counting speed follows their load."""
    try:
        from toktok import _toktok

        tables = _toktok.Tokenizer(get_encoding_name(None)).memory_bytes / 2**20
        size = f"{tables:.1f} MiB"
    except Exception as exc:  # toktok missing or changed: say so, do not guess
        size = f"unknown ({type(exc).__name__})"
    llc = "unknown"
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    levels = sorted(base.glob("index*")) if base.exists() else []
    for idx in levels:
        try:
            if (idx / "level").read_text().strip() == "3":
                llc = (idx / "size").read_text().strip()
        except OSError:
            continue
    return (f"the token counter's BPE tables take {size} (toktok, "
            f"{get_encoding_name(None)}); this CPU's L3 cache: {llc}")


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    rows: list[tuple[str, str, str, str, str]] = []
    notes: list[str] = []

    # 1. whole corpus, promptcache only (peers take no templates / Python source)
    files = [p for p in CORPUS.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    secs = statistics.median(timed(lambda: lint_paths([str(CORPUS)]), 3))
    rows.append(("promptcache", f"corpus, all {len(files)} files", f"{total / secs / 1e6:.2f}",
                 f"{len(files) / secs:.0f} files/s", "-"))
    notes.append("corpus templates / Python source: promptcachelint and cacheguardian have no "
                 "input for them (request bodies only): skipped for the peers")

    # 2. corpus request bodies and 3. the 100k-token request: every tool, in interleaved rounds
    med = statistics.median
    for label, bodies, repeat in (("corpus request bodies", corpus_bodies(), 101),
                                  ("one 100k-token request", [big_request()], 31)):
        nbytes = sum(len(json.dumps(b)) for b in bodies)
        views = [render(b) for b in bodies]

        def rules(b: list[dict[str, Any]] = bodies, v: list[Any] = views) -> None:
            for x, w in zip(b, v, strict=True):
                lint_request(x, view=w)

        rules()
        # what the renderer hands the token counter (text, or the JSON of tools and schemas)
        counter = get_counter(bodies[0].get("model"))
        texts = [seg.data.decode("utf-8", "replace") if seg.kind in ("tool", "schema")
                 else seg.text or "" for w in views for seg in w.segments]

        def count(t: list[str] = texts, n: Any = counter.count) -> None:
            for x in t:
                n(x)

        counting: list[float] = []
        rules_only: list[float] = []
        with tempfile.TemporaryDirectory() as tmp:
            procs = [Peer(tool, bodies, Path(tmp), seed) for tool in TOOLS for seed in PEER_SEEDS]
            per_round = -(-repeat // ROUNDS)
            for _ in range(ROUNDS):
                rules_only += timed(rules, per_round, warm=False)
                counting += timed(count, per_round, warm=False)
                for p in procs:
                    p.run(per_round)
            for p in procs:
                p.close()
        # each tool's fastest process (a tool's speed differs between processes)
        fastest: dict[str, float] = {}
        for tool in TOOLS:
            runs = [p for p in procs if p.tool == tool]
            secs = {p.seed: med(p.times) for p in runs if p.times}
            if not secs:
                notes.append(f"{tool} on {label}: {runs[0].why}")
                continue
            fastest[tool] = min(secs.values())
            notes.append(f"{tool} on {label}, ms per pass by process (PYTHONHASHSEED): " + ", ".join(
                f"{seed}: {t * 1e3:.2f}" for seed, t in sorted(secs.items())))
        if "promptcache" not in fastest:
            raise SystemExit(f"promptcache failed in its own interpreter: {notes[-1]}")
        mine = fastest["promptcache"]
        rows.append(("promptcache", f"{label} ({len(bodies)})", f"{nbytes / mine / 1e6:.2f}",
                     f"{len(bodies) / mine:.1f}", "1.00"))
        r = med(rules_only)
        rows.append(("promptcache rules only*", f"{label} ({len(bodies)})",
                     f"{nbytes / r / 1e6:.2f}", f"{len(bodies) / r:.1f}", f"{mine / r:.2f}"))
        c = med(counting)
        rows.append(("token counting only**", f"{label} ({len(bodies)})",
                     f"{nbytes / c / 1e6:.2f}", f"{len(bodies) / c:.1f}", f"{mine / c:.2f}"))
        for tool in TOOLS[1:]:
            if tool not in fastest:
                rows.append((tool, label, "-", "-", "skipped"))
                continue
            secs_peer = fastest[tool]
            rows.append((tool, f"{label} ({len(bodies)})", f"{nbytes / secs_peer / 1e6:.2f}",
                         f"{len(bodies) / secs_peer:.1f}", f"{secs_peer / mine:.2f}"))

    widths = [max(len(r[i]) for r in [("tool", "input", "MB/s", "req/s", "promptcache x"), *rows])
              for i in range(5)]
    header = ("tool", "input", "MB/s", "req/s", "promptcache x")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    print("* rules only: the request already rendered by promptcache.prefix.render (the SDK "
          "wrapper passes its view); the difference to the full row is the renderer's share")
    print("** token counting only: the counter (toktok) over the rendered segments' text and "
          "tool JSON, about what the renderer counts, in this interpreter")
    print(f"note: {_cache_note()}")
    for n in notes:
        print(f"note: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
