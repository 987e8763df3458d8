"""Time promptcache.wrap() adds per call (auto_cache and lint on), beside the SDK's own time.

Both clients are the official SDK clients with the same transport: an httpx2.MockTransport
whose handler stamps the moment the request reaches it and answers at once with a response
body recorded from the in-process local backend (so the SDK parses a real response, and the
model's compute time, which would drown both numbers, is left out). Per call:

    SDK build   = request reaches the transport - call starts      (raw client)
    SDK total   = call returns - call starts                        (raw client)
    added       = wrapped total - raw total                         (medians)

The goal is ``added / SDK build <= 1.0``: the wrapper costs no more than the SDK's own request
building. Requests: a support-agent conversation of the given number of turns (5 tools, a
~1,500-token system prompt); the session grows by one turn each call, as a chat does.

Below the goal row, the same Anthropic chat with parts of the work switched off (lint only,
auto_cache only, live diff + usage only), and for every row the wrapper's two steps timed
inside the real calls: before sending (``Observer.prepare``) and after the response (the usage
record). Their sum need not match "added", a difference of two medians taken in separate
rounds (the SDK's own work also runs slower after the wrapper's, and, with auto_cache, on a
request with markers). The last line times each pre-send step alone, in a tight loop, where it
runs faster than inside a real call.

Run: .venv/bin/python bench/wrap_overhead.py [--iterations 200] [--turns 10]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import openai

from promptcache.sdk import PromptCacheWarning, wrap
from promptcache.sdk._observe import OVERRIDES, Call  # the control row's stand-in steps
from promptcache.sdk._wrap import observer_of  # the bench times its steps in place
from promptcache.usage import UsageTracker

A_MODEL = "claude-sonnet-4-6"
O_MODEL = "gpt-4o"
SYSTEM = ("You are the support agent of a plant nursery. Answer from the care sheets, cite "
          "them, ask before ordering, and never invent a species or a price. ") * 50
TOOLS = [{"name": f"tool_{i}", "description": f"Look up care sheet section {i}. " * 8,
          "input_schema": {"type": "object", "properties": {"q": {"type": "string"}},
                           "required": ["q"]}} for i in range(5)]


def _record_bodies() -> tuple[bytes, bytes]:
    """One Messages and one Chat Completions response body from the in-process backend."""
    from promptcache.local.testing import LocalBackend

    with LocalBackend(mode="fast", hidden_size=32, layers=1, heads=2, kv_heads=1,
                      pool_mb=8) as backend:
        http = backend.http_client()
        a = http.post("/v1/messages", headers={"x-api-key": "k"},
                      json={"model": A_MODEL, "max_tokens": 4,
                            "messages": [{"role": "user", "content": "hi"}]})
        o = http.post("/v1/chat/completions", headers={"authorization": "Bearer k"},
                      json={"model": O_MODEL, "max_tokens": 4,
                            "messages": [{"role": "user", "content": "hi"}]})
        a.raise_for_status()
        o.raise_for_status()
        return a.content, o.content


class _Stamp:
    def __init__(self, body: bytes) -> None:
        self.body = body
        self.reached = 0.0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.reached = time.perf_counter()
        return httpx2.Response(200, content=self.body,
                               headers={"content-type": "application/json"})


def _conversation(turns: int, provider: str, chat: int = 0) -> list[list[dict[str, Any]]]:
    """The message list of each call of a growing chat (call i has i+1 user turns).

    Every chat has its own turns (``chat`` is in each of them): only what a real chat repeats
    (the system prompt, the tools and the chat's own earlier turns) can be found again by the
    wrapper's render memo.
    """
    out: list[list[dict[str, Any]]] = []
    msgs: list[dict[str, Any]] = [] if provider == "anthropic" else [
        {"role": "system", "content": SYSTEM}]
    for t in range(turns):
        msgs = [*msgs, {"role": "user",
                        "content": f"Chat {chat}, turn {t}: my fern has brown tips. " * 6}]
        out.append(msgs)
        msgs = [*msgs, {"role": "assistant",
                        "content": f"Chat {chat}: check the humidity and water. " * 6}]
    return out


class _Chats:
    """The conversations of the run, built before timing starts (chat -> its calls)."""

    def __init__(self, turns: int, provider: str, chats: int) -> None:
        self.calls = [_conversation(turns, provider, c) for c in range(chats)]


def _measure(call: Callable[[int], Any], stamp: _Stamp, iterations: int, turns: int
             ) -> tuple[list[float], list[float]]:
    builds: list[float] = []
    totals: list[float] = []
    for i in range(iterations):
        t0 = time.perf_counter()
        call(i)
        t1 = time.perf_counter()
        builds.append(stamp.reached - t0)
        totals.append(t1 - t0)
    return builds, totals


class _Split:
    """Times the wrapper's two steps inside real calls: ``prepare`` (before sending: overrides,
    render, plan, lint, live diff) and ``record_response`` (after the response: usage record,
    tracker). The observer's bound methods are shadowed on the instance, so the wrapper calls
    the timed ones; two ``perf_counter`` reads per step are the instrument's own cost."""

    def __init__(self, obs: Any) -> None:
        self.before: list[float] = []
        self.after: list[float] = []
        self.on = False
        for name, into in (("prepare", self.before), ("record_response", self.after)):
            setattr(obs, name, self._timed(getattr(obs, name), into))

    def _timed(self, method: Callable[..., Any], into: list[float]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                if self.on:
                    into.append(time.perf_counter() - t0)
        return timed


class _Control:
    """The wrapper's two steps replaced by busy-waits of given lengths (seconds): the control
    row. A busy-wait reads the clock in a loop and touches almost no memory, so the added time
    of this row is what the wrapper's work would cost if only its length counted: the rest of
    the first row's added time is the SDK running slower after the wrapper's real work (its
    code and data pushed out of the CPU's caches)."""

    def __init__(self, obs: Any, prepare_s: float, record_s: float) -> None:
        self.prepare_s, self.record_s = prepare_s, record_s
        obs.prepare = self.prepare
        obs.record_response = self.record

    def prepare(self, shape: Any, kwargs: dict[str, Any], helper: str | None = None) -> Call:
        until = time.perf_counter() + self.prepare_s
        while time.perf_counter() < until:
            pass
        session = kwargs.get("promptcache_session")
        return Call(shape, {k: v for k, v in kwargs.items() if k not in OVERRIDES}, None,
                    session)

    def record(self, *args: Any, **kwargs: Any) -> None:
        until = time.perf_counter() + self.record_s
        while time.perf_counter() < until:
            pass


def _bench(provider: str, body: bytes, iterations: int, turns: int, *, auto_cache: bool = True,
           lint: str = "warn", control: tuple[float, float] | None = None) -> dict[str, float]:
    warmup = max(turns, 50)  # calls per side before timing (see below)
    chats = _Chats(turns, provider, (iterations + warmup) // turns + 2)
    stamp = _Stamp(body)
    http = httpx2.Client(transport=httpx2.MockTransport(stamp))
    raw: Any
    if provider == "anthropic":
        raw = anthropic.Anthropic(api_key="k", base_url="http://bench.test", http_client=http,
                                  max_retries=0)
    else:
        raw = openai.OpenAI(api_key="k", base_url="http://bench.test/v1", http_client=http,
                            max_retries=0)
    wrapped = wrap(raw, tracker=UsageTracker(keep_records=False), auto_cache=auto_cache,
                   lint=lint)  # type: ignore[arg-type]
    if control is not None:
        _Control(observer_of(wrapped), *control)
    split = _Split(observer_of(wrapped))

    def make(client: Any, session: bool) -> Callable[[int], Any]:
        counter = iter(range(10**9))

        def call(_: int) -> Any:
            i = next(counter)
            # each session is one chat growing by a turn per call; a new chat every `turns`
            chat, i = divmod(i, turns)
            extra = {"promptcache_session": f"chat-{chat}"} if session else {}
            messages = chats.calls[chat][i]
            if provider == "anthropic":
                return client.messages.create(model=A_MODEL, max_tokens=256, tools=TOOLS,
                                              system=SYSTEM, messages=messages, **extra)
            tools = [{"type": "function", "function": {
                "name": t["name"], "description": t["description"],
                "parameters": t["input_schema"]}} for t in TOOLS]
            return client.chat.completions.create(model=O_MODEL, max_tokens=256, tools=tools,
                                                  messages=messages, **extra)
        return call

    raw_call, wrapped_call = make(raw, False), make(wrapped, True)
    # warm-up: imports, caches, first-finding warnings, and the SDK's own path (on a quiet
    # 16-core machine, 10 warm-up calls left the first row's raw calls in a slow state: SDK
    # build 0.82 ms there, 0.50 ms in every later row)
    for _ in range(warmup):
        raw_call(0)
        wrapped_call(0)
    raw_build, raw_total, w_build, w_total = [], [], [], []
    for _ in range(5):  # interleave rounds so machine noise hits both sides alike
        b, t = _measure(raw_call, stamp, iterations // 5, turns)
        raw_build += b
        raw_total += t
        split.on = True
        b, t = _measure(wrapped_call, stamp, iterations // 5, turns)
        split.on = False
        w_build += b
        w_total += t
    med = statistics.median
    return {"sdk_build": med(raw_build), "sdk_total": med(raw_total),
            "wrapped_total": med(w_total), "added": med(w_total) - med(raw_total),
            "added_before_send": med(w_build) - med(raw_build),
            "prepare": med(split.before), "record": med(split.after)}


def _pieces(iterations: int, turns: int) -> dict[str, float]:
    """Median ms of each step the wrapper runs before sending (Anthropic request)."""
    from promptcache.catalog import get_policy
    from promptcache.planner import apply_plan, plan_breakpoints, prefix_digests
    from promptcache.prefix import remark, render
    from promptcache.sdk._observe import body_of, lint_views, marker_paths

    chats = _Chats(turns, "anthropic", iterations // turns + 1)
    policy = get_policy(A_MODEL)
    steps: dict[str, list[float]] = {k: [] for k in (
        "body", "render", "plan", "apply_plan", "remark (planned view)", "lint", "digests")}
    prev: Any = None
    for it in range(iterations):
        chat, i = divmod(it, turns)
        kwargs = {"model": A_MODEL, "max_tokens": 256, "tools": TOOLS, "system": SYSTEM,
                  "messages": chats.calls[chat][i]}
        marks = [time.perf_counter()]
        body = body_of(kwargs)
        marks.append(time.perf_counter())
        view = render(body, "anthropic", model=A_MODEL)
        marks.append(time.perf_counter())
        plan = plan_breakpoints(view, policy, prev if i else None)
        marks.append(time.perf_counter())
        planned = apply_plan(body, plan, share_unchanged=True)
        marks.append(time.perf_counter())
        paths = marker_paths(plan)
        final = remark(view, planned, paths) if paths is not None else None
        if final is None:
            final = render(planned, "anthropic", model=A_MODEL)
        else:  # as the wrapper does: markers are not content, the first view's chain holds
            prefix_digests(final, view)
        marks.append(time.perf_counter())
        lint_views(final, planned, A_MODEL, None)
        marks.append(time.perf_counter())
        prefix_digests(final)
        marks.append(time.perf_counter())
        for name, a, b in zip(steps, marks, marks[1:], strict=False):
            steps[name].append(b - a)
        prev = plan
    return {k: statistics.median(v) for k, v in steps.items()}


def _long_session(body: bytes, turns: int, words: int) -> dict[str, float]:
    """Added ms per call over the last turns of one long Anthropic chat, with the renderer's
    segment memo kept (as in use) and emptied before each call (every block rendered anew)."""
    from promptcache.prefix import render_cache_clear

    rng = __import__("random").Random(3)
    vocab = "fern soil light water root leaf pot humidity tip brown shade feed repot".split()
    msgs: list[dict[str, Any]] = []
    calls: list[list[dict[str, Any]]] = []
    for t in range(turns):
        msgs = [*msgs, {"role": "user", "content": f"Turn {t}: " + " ".join(
            rng.choice(vocab) for _ in range(words))}]
        calls.append(msgs)
        msgs = [*msgs, {"role": "assistant", "content": " ".join(
            rng.choice(vocab) for _ in range(words))}]
    stamp = _Stamp(body)
    http = httpx2.Client(transport=httpx2.MockTransport(stamp))
    raw = anthropic.Anthropic(api_key="k", base_url="http://bench.test", http_client=http,
                              max_retries=0)
    wrapped = wrap(raw, tracker=UsageTracker(keep_records=False), auto_cache=True,
                   lint="warn")  # type: ignore[arg-type]
    out: dict[str, float] = {}
    for label, clear in (("memo", False), ("cold", True)):
        added: list[float] = []
        for t, messages in enumerate(calls):
            kw = {"model": A_MODEL, "max_tokens": 256, "tools": TOOLS, "system": SYSTEM,
                  "messages": messages}
            t0 = time.perf_counter()
            raw.messages.create(**kw)
            raw_s = time.perf_counter() - t0
            if clear:
                render_cache_clear()
            t0 = time.perf_counter()
            wrapped.messages.create(**kw, promptcache_session=f"long-{label}")
            if t >= turns - 10:
                added.append(time.perf_counter() - t0 - raw_s)
        out[label] = statistics.median(added)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()
    logging.getLogger("promptcache").setLevel(logging.ERROR)  # findings are not the point here
    warnings.simplefilter("ignore", PromptCacheWarning)
    warnings.simplefilter("ignore", DeprecationWarning)
    a_body, o_body = _record_bodies()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (a busy machine "
          "stretches the longer wrapper steps more than the short SDK build)")
    print(f"median of {args.iterations} calls per side; chat of {args.turns} turns, 5 tools, "
          "~1.5k-token system prompt; auto_cache=True, lint='warn'")
    print(f"{'client':<22}{'SDK build ms':>14}{'SDK total ms':>14}{'added ms':>11}"
          f"{'added pre-send ms':>19}{'added / SDK build':>19}")
    rows: list[tuple[str, dict[str, float]]] = []

    def row(label: str, r: dict[str, float]) -> None:
        rows.append((label, r))
        print(f"{label:<22}{r['sdk_build'] * 1e3:>14.3f}{r['sdk_total'] * 1e3:>14.3f}"
              f"{r['added'] * 1e3:>11.3f}{r['added_before_send'] * 1e3:>19.3f}"
              f"{r['added'] / r['sdk_build']:>19.2f}")

    for provider, body in (("anthropic.Anthropic", a_body), ("openai.OpenAI", o_body)):
        row(provider, _bench("anthropic" if provider.startswith("anthropic") else "openai", body,
                             args.iterations, args.turns))
    # Anthropic with parts of the work switched off: what each part adds inside real calls.
    # Every row keeps the session (live diff) and usage tracking.
    row("  lint only", _bench("anthropic", a_body, args.iterations, args.turns,
                              auto_cache=False, lint="warn"))
    row("  auto_cache only", _bench("anthropic", a_body, args.iterations, args.turns,
                                    auto_cache=True, lint="off"))
    row("  live diff + usage", _bench("anthropic", a_body, args.iterations, args.turns,
                                      auto_cache=False, lint="off"))
    first = rows[0][1]
    row("  control", _bench("anthropic", a_body, args.iterations, args.turns,
                            control=(first["prepare"], first["record"])))
    print("goal: added / SDK build <= 1.0 (first row; the rows below it switch parts off; "
          "control: the first row's two steps replaced by busy-waits of their lengths)")
    print("the wrapper's two steps timed inside the real calls (medians, ms): before sending "
          "(prepare) | after the response (usage record)")
    for label, r in rows:
        print(f"  {label.strip():<20} {r['prepare'] * 1e3:7.3f} | {r['record'] * 1e3:7.3f}")
    long_turns, words = 60, 600
    r = _long_session(a_body, long_turns, words)
    print(f"long Anthropic chat ({long_turns} turns of ~{words} words each way, the last 10 "
          f"calls): added {r['memo'] * 1e3:.3f} ms per call with the segment memo, "
          f"{r['cold'] * 1e3:.3f} ms with it emptied before each call "
          f"({r['cold'] / r['memo']:.1f}x)")
    print("where the wrapper's time goes (Anthropic request, medians, ms):")
    pieces = _pieces(args.iterations, args.turns)
    print("  " + "  ".join(f"{k} {v * 1e3:.3f}" for k, v in pieces.items())
          + f"  | sum {sum(pieces.values()) * 1e3:.3f}")


if __name__ == "__main__":
    main()
