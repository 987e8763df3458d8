"""Workloads for the simulator: a seeded synthetic chat workload and a JSONL replay reader.

Synthetic chat (defaults of :class:`WorkloadConfig`, from issue 9)::

    400 conversations start over one hour     Poisson process (given the count, start times
                                              are sorted uniform draws on [0, duration))
    system prompt: one of 10, 300-2,000 tok   uniform choice; lengths uniform in the range
    turns per conversation                    geometric, mean 4, capped at 12
    user message                              log-normal, median 80 tokens (sigma 0.5)
    reply                                     log-normal, median 250 tokens (sigma 0.5)
    think time before the next turn           exponential, mean 30 s, counted from the
                                              moment the previous reply finished
    adapter                                   one of N (``adapter-0`` ...), uniform, from
                                              a generator of its own: the conversations
                                              are the same for every ``adapters``

Turn ``t`` of a conversation resends the whole history::

    stream = system | user_0 | reply_0 | user_1 | reply_1 | ...
    turn t: prompt = stream[: end of user_t]      reply = the next reply_t tokens

so one token list per conversation backs all its requests (no copies), and every finished
request inserts ``prompt + reply`` into the cache. Token ids are synthetic (uniform in
``[0, vocab)``), deterministic for a seed.

Only :meth:`random.Random.random` is used (plus closed-form transforms), because it is the one
method whose sequence Python promises to keep across versions (for an int seed and, for the
adapter generator, a str seed); the pinned statistics in the tests therefore hold on every
Python >= 3.11.

Replay (:func:`read_replay`): one JSON object per line::

    {"arrival_s": 0.5, "tokens": [1, 2, 3], "reply_tokens": [4, 5], "adapter": "a1"}
    {"arrival_s": 1.0, "text": "You are ...", "reply": "Sure.", "output_tokens": 120}

``tokens`` (ids) or ``text`` (tokenised with :func:`promptcache.tokens.encode`, o200k_base) is
the prompt; ``reply_tokens``/``reply`` optionally give the reply that is inserted into the cache
with the prompt; ``output_tokens`` is the number of tokens decoded (default: the reply's length,
else 0). Replayed requests are open-loop: each arrives at its ``arrival_s``. Every value is
bounded as the matching option is (``arrival_s`` by :data:`MAX_DURATION_S`, token counts by
:data:`MAX_REQUEST_TOKENS`, ``adapter`` by :data:`MAX_ADAPTER_CHARS`); a value out of bounds is
an :class:`~promptcache._errors.InputError` naming ``file:line`` and the field.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptcache._errors import InputError
from promptcache._times import _MAX_SECONDS
from promptcache.sim._checks import check_count, check_real, check_seed

__all__ = [
    "MAX_ADAPTERS",
    "MAX_ADAPTER_CHARS",
    "MAX_CONVERSATIONS",
    "MAX_DURATION_S",
    "MAX_REQUEST_TOKENS",
    "MIN_DURATION_S",
    "Request",
    "Workload",
    "WorkloadConfig",
    "generate_workload",
    "read_replay",
]


#: The most conversations :func:`generate_workload` makes (``--conversations``): 25 times the
#: default 400, about 40,000 requests. A bound on the work, not a fact about servers: memory
#: grows by about 0.15 MB per conversation (token lists, block hashes, the radix tree; about
#: 0.8 GB at 5,000) and one run over 5,000 conversations takes about 10 s on one core, so a
#: default sweep (30 runs) at the limit takes minutes. Simulate a sample and scale the rates.
MAX_CONVERSATIONS = 10_000

#: The longest ``duration_s`` (seconds over which conversations start): the range of send
#: times a usage record holds (the epoch to the end of the year 9999), the same bound as
#: :data:`promptcache.usage.breakeven.MAX_SPAN_SECONDS`. Beyond it a 30 s think time is lost
#: in the rounding of the arrival times, so waits and TTFTs would be meaningless.
MAX_DURATION_S = _MAX_SECONDS

#: The shortest ``duration_s``: one millisecond (conversations that start closer together are
#: a burst either way).
MIN_DURATION_S = 0.001

#: The most LoRA adapters (``--adapters``): a plausibility bound (S-LoRA serves thousands of
#: adapters from one server; https://arxiv.org/abs/2311.03285). With more adapters than
#: conversations each conversation almost surely has its own.
MAX_ADAPTERS = 1_000_000

#: The most tokens one request may hold (replay: ``tokens``/``text`` + ``reply_tokens``/``reply``,
#: and ``tokens``/``text`` + ``output_tokens``): 10**9, the bound
#: :data:`promptcache.usage.record.MAX_TOKENS` puts on any token count and the largest KV pool
#: (:data:`promptcache.sim.simulator.MAX_CAPACITY_TOKENS`), so a larger request could never
#: run at any capacity the simulator accepts. A plausibility bound.
MAX_REQUEST_TOKENS = 10**9

#: The longest ``adapter`` id in a replay line (characters): 1,024. An adapter id is a name
#: (a LoRA's path or label); a longer string is a mistake in the log, not a name. A
#: plausibility bound.
MAX_ADAPTER_CHARS = 1_024

_CONVERSATIONS_WHY = ("(MAX_CONVERSATIONS: memory and time grow with the workload; simulate "
                      "a sample)")
_DURATION_WHY = "(MAX_DURATION_S: the epoch to the year 9999)"
_ADAPTERS_WHY = "(MAX_ADAPTERS: an implausible number of adapters)"
_ARRIVAL_WHY = "(MAX_DURATION_S: the epoch to the year 9999, as --duration)"
_REQUEST_WHY = ("(MAX_REQUEST_TOKENS: a usage record's token bound and the largest KV pool; no "
                "capacity could run a larger request)")


@dataclass(frozen=True, slots=True, eq=False)
class Request:
    """One request of a workload.

    Attributes:
        index: position in :attr:`Workload.requests` (also the request id).
        conversation: conversation id (replay: the line number).
        turn: turn number in the conversation (0 = first).
        adapter: adapter (LoRA) id; ``""`` = the base model. Folded into the cache key.
        arrival_s: absolute arrival time in seconds, or ``None`` for a follow-up turn that
            arrives ``think_s`` after the previous turn finishes (closed loop).
        think_s: seconds between the previous turn's finish and this arrival.
        stream: token ids; ``stream[:prompt_len]`` is the prompt and the rest (up to
            ``insert_len``) the reply. Shared between the turns of one conversation.
        prompt_len: prompt tokens.
        insert_len: tokens inserted into the cache when the request finishes (prompt + the
            known reply tokens).
        output_tokens: tokens decoded (for the decode time).
        next_turn: index of the follow-up request, if any.
    """

    index: int
    conversation: int
    turn: int
    adapter: str
    arrival_s: float | None
    think_s: float
    stream: list[int] = field(repr=False)
    prompt_len: int
    insert_len: int
    output_tokens: int
    next_turn: int | None = None

    @property
    def prompt(self) -> list[int]:
        """The prompt token ids (a fresh list)."""
        return self.stream[: self.prompt_len]

    @property
    def inserted(self) -> list[int]:
        """The token ids inserted into the cache on finish: prompt + reply (a fresh list)."""
        return self.stream[: self.insert_len]


@dataclass(frozen=True, slots=True)
class Workload:
    """A list of requests plus what describes it.

    Attributes:
        requests: all requests; follow-up turns are reached through :attr:`Request.next_turn`.
        description: one line for reports.
        seed: the generator seed (``None`` for a replay).
    """

    requests: tuple[Request, ...]
    description: str
    seed: int | None = None

    @property
    def first_arrivals(self) -> list[Request]:
        """Requests with a fixed arrival time (first turns; every replayed request)."""
        return [r for r in self.requests if r.arrival_s is not None]

    @property
    def prompt_tokens(self) -> int:
        """Sum of prompt tokens over all requests."""
        return sum(r.prompt_len for r in self.requests)

    @property
    def output_tokens(self) -> int:
        """Sum of decoded tokens over all requests."""
        return sum(r.output_tokens for r in self.requests)

    @property
    def max_request_tokens(self) -> int:
        """The largest KV footprint of one request: ``max(prompt + output, inserted)`` tokens."""
        return max((max(r.prompt_len + r.output_tokens, r.insert_len) for r in self.requests),
                   default=0)


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """Parameters of the synthetic chat workload (issue 9 defaults). Units: tokens, seconds.

    Raises:
        ValueError: a parameter out of range; the message starts with its name and gives the
            range. ``conversations`` is an integer in [1, :data:`MAX_CONVERSATIONS`],
            ``duration_s`` a finite number in [:data:`MIN_DURATION_S`,
            :data:`MAX_DURATION_S`], ``adapters`` an integer in [1, :data:`MAX_ADAPTERS`].
    """

    conversations: int = 400
    duration_s: float = 3600.0
    system_prompts: int = 10
    system_tokens_min: int = 300
    system_tokens_max: int = 2000
    turns_mean: float = 4.0
    turns_max: int = 12
    user_tokens_median: float = 80.0
    reply_tokens_median: float = 250.0
    lognormal_sigma: float = 0.5
    think_s_mean: float = 30.0
    adapters: int = 1
    vocab: int = 100_000

    def __post_init__(self) -> None:
        check_count("conversations", self.conversations, 1, MAX_CONVERSATIONS,
                    _CONVERSATIONS_WHY)
        check_real("duration_s", self.duration_s, MIN_DURATION_S, MAX_DURATION_S, unit="s",
                   why=_DURATION_WHY)
        check_count("adapters", self.adapters, 1, MAX_ADAPTERS, _ADAPTERS_WHY)
        checks = [
            (self.system_prompts >= 1, "system_prompts must be >= 1"),
            (1 <= self.system_tokens_min <= self.system_tokens_max,
             "need 1 <= system_tokens_min <= system_tokens_max"),
            (self.turns_mean >= 1, "turns_mean must be >= 1"),
            (self.turns_max >= 1, "turns_max must be >= 1"),
            (self.user_tokens_median >= 1 and self.reply_tokens_median >= 1,
             "token medians must be >= 1"),
            (self.lognormal_sigma >= 0, "lognormal_sigma must be >= 0"),
            (self.think_s_mean >= 0, "think_s_mean must be >= 0"),
            (self.vocab >= 2, "vocab must be >= 2"),
        ]
        for ok, reason in checks:
            if not ok:
                raise ValueError(reason)


class _Draws:
    """Distributions built on ``Random.random()`` only (stable across Python versions)."""

    def __init__(self, seed: int | str) -> None:
        self._u = random.Random(seed).random

    def uniform(self) -> float:
        """Float uniform on ``[0, 1)``."""
        return self._u()

    def uniform_int(self, lo: int, hi: int) -> int:
        """Integer uniform on ``[lo, hi]``."""
        return lo + min(int(self._u() * (hi - lo + 1)), hi - lo)

    def exponential(self, mean: float) -> float:
        return -mean * math.log(1.0 - self._u())

    def normal(self) -> float:
        # Box-Muller (one of the pair; simple and deterministic).
        u1 = 1.0 - self._u()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * self._u())

    def lognormal_tokens(self, median: float, sigma: float) -> int:
        """Log-normal with the given median, rounded, clamped to ``[1, 20 * median]``."""
        value = median * math.exp(sigma * self.normal())
        return max(1, min(round(value), int(20 * median)))

    def geometric(self, mean: float, cap: int) -> int:
        """Geometric on ``{1, 2, ...}`` with the given mean (``p = 1/mean``), capped."""
        if mean <= 1.0:
            return 1
        p = 1.0 / mean
        k = 1 + int(math.log(1.0 - self._u()) / math.log(1.0 - p))
        return min(k, cap)

    def tokens(self, n: int, vocab: int) -> list[int]:
        u = self._u
        return [int(u() * vocab) for _ in range(n)]


def _adapter_seed(seed: int) -> str:
    """The seed of the adapter generator of workload seed ``seed``: a string (Python hashes
    a str seed with SHA-512, the same on every version), distinct from ``seed`` itself."""
    return f"promptcache.sim adapters {seed}"


def generate_workload(config: WorkloadConfig | None = None, *, seed: int = 0) -> Workload:
    """Generate the seeded synthetic chat workload (see the module docstring).

    Args:
        config: the parameters (issue 9 defaults when ``None``).
        seed: the random seed; the same seed always gives the same requests and token ids.

    Returns:
        A :class:`Workload` whose first turns have arrival times and whose follow-up turns
        arrive ``think_s`` after the previous turn finishes.

    Raises:
        ValueError: ``seed`` not an integer >= 0 (a negative seed would repeat its absolute
            value).
    """
    seed = check_seed("seed", seed)
    cfg = config or WorkloadConfig()
    draw = _Draws(seed)
    # Adapters come from their own generator, so ``adapters`` changes only the labels: the
    # same seed gives the same conversations (lengths, tokens, arrivals) for 1 or N adapters,
    # and a comparison across adapter counts shows the cost of splitting the cache alone
    # (drawing them from ``draw`` shifted every later draw: 60 conversations were 247
    # requests with one adapter and 255 with two).
    adapter_draw = _Draws(_adapter_seed(seed))
    systems = [
        draw.tokens(draw.uniform_int(cfg.system_tokens_min, cfg.system_tokens_max), cfg.vocab)
        for _ in range(cfg.system_prompts)
    ]
    starts = sorted(draw.uniform() * cfg.duration_s for _ in range(cfg.conversations))
    requests: list[Request] = []
    for conv, start in enumerate(starts):
        system = systems[draw.uniform_int(0, cfg.system_prompts - 1)]
        adapter = (f"adapter-{adapter_draw.uniform_int(0, cfg.adapters - 1)}"
                   if cfg.adapters > 1 else "")
        turns = draw.geometric(cfg.turns_mean, cfg.turns_max)
        stream = list(system)
        pieces: list[tuple[int, int, float]] = []  # (prompt_len, reply_len, think_s)
        for turn in range(turns):
            user = draw.lognormal_tokens(cfg.user_tokens_median, cfg.lognormal_sigma)
            reply = draw.lognormal_tokens(cfg.reply_tokens_median, cfg.lognormal_sigma)
            think = 0.0 if turn == 0 else draw.exponential(cfg.think_s_mean)
            stream.extend(draw.tokens(user, cfg.vocab))
            prompt_len = len(stream)
            stream.extend(draw.tokens(reply, cfg.vocab))
            pieces.append((prompt_len, reply, think))
        first = len(requests)
        for turn, (prompt_len, reply, think) in enumerate(pieces):
            index = first + turn
            requests.append(Request(
                index=index, conversation=conv, turn=turn, adapter=adapter,
                arrival_s=start if turn == 0 else None, think_s=think, stream=stream,
                prompt_len=prompt_len, insert_len=prompt_len + reply, output_tokens=reply,
                next_turn=index + 1 if turn + 1 < turns else None,
            ))
    desc = (f"synthetic chat: {cfg.conversations} conversations over {cfg.duration_s:g} s, "
            f"{cfg.system_prompts} system prompts, {len(requests)} requests, seed {seed}")
    return Workload(tuple(requests), desc, seed)


def _token_list(value: Any, where: str) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 2**32 for t in value
    ):
        raise ValueError(f"{where} must be a list of token ids (integers in [0, 2**32))")
    if len(value) > MAX_REQUEST_TOKENS:
        raise ValueError(f"{where} holds {len(value):,} tokens, over MAX_REQUEST_TOKENS = "
                         f"{MAX_REQUEST_TOKENS:,} {_REQUEST_WHY}")
    return value


def _text(value: Any, where: str) -> list[int]:
    if not isinstance(value, str):
        raise ValueError(f"{where} must be a string")
    if _SURROGATE.search(value):
        raise ValueError(f"{where} holds a lone surrogate: the text is not valid Unicode")
    return _encode(value)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _parse_line(obj: Any) -> tuple[float, list[int], list[int], int, str]:
    """One replay line -> ``(arrival_s, prompt ids, reply ids, output_tokens, adapter)``.

    Raises:
        ValueError: the message starts with the field (``'arrival_s'``, ``'tokens'``, ...):
            ``arrival_s`` not a finite number in [0, :data:`MAX_DURATION_S`]; not exactly
            one of ``tokens`` / ``text``, or both ``reply_tokens`` and ``reply``; a token
            list not of integers in [0, 2**32); a text with a lone surrogate; an empty
            prompt; ``output_tokens`` not an integer in [0, :data:`MAX_REQUEST_TOKENS`];
            prompt + reply or prompt + output over :data:`MAX_REQUEST_TOKENS`; ``adapter``
            not a string of at most :data:`MAX_ADAPTER_CHARS` characters (or one with a lone
            surrogate).
    """
    if not isinstance(obj, dict):
        raise ValueError("each line must be a JSON object")
    if "arrival_s" not in obj:
        raise ValueError("'arrival_s' is missing: give the arrival time in seconds")
    arrival = check_real("'arrival_s'", obj["arrival_s"], 0.0, MAX_DURATION_S, unit="s",
                         why=_ARRIVAL_WHY)
    if ("tokens" in obj) == ("text" in obj):
        raise ValueError("give exactly one of 'tokens' (ids) or 'text'")
    if "tokens" in obj:
        prompt = _token_list(obj["tokens"], "'tokens'")
    else:
        prompt = _text(obj["text"], "'text'")
    if not prompt:
        raise ValueError("the prompt is empty")
    if "reply_tokens" in obj and "reply" in obj:
        raise ValueError("give at most one of 'reply_tokens' or 'reply'")
    reply: list[int] = []
    if "reply_tokens" in obj:
        reply = _token_list(obj["reply_tokens"], "'reply_tokens'")
    elif "reply" in obj:
        reply = _text(obj["reply"], "'reply'")
    output = check_count("'output_tokens'", obj.get("output_tokens", len(reply)), 0,
                         MAX_REQUEST_TOKENS, _REQUEST_WHY)
    for what, n in (("reply", len(reply)), ("output_tokens", output)):
        if len(prompt) + n > MAX_REQUEST_TOKENS:
            raise ValueError(f"'{what}': the prompt ({len(prompt):,} tokens) plus {what} "
                             f"({n:,} tokens) is over MAX_REQUEST_TOKENS = "
                             f"{MAX_REQUEST_TOKENS:,} (no capacity could run a larger "
                             "request)")
    adapter = obj.get("adapter", "")
    if not isinstance(adapter, str):
        raise ValueError(f"'adapter' must be a string, not {type(adapter).__name__}")
    if len(adapter) > MAX_ADAPTER_CHARS or _SURROGATE.search(adapter):
        raise ValueError(f"'adapter' must be a name of at most {MAX_ADAPTER_CHARS:,} "
                         "characters of valid Unicode (MAX_ADAPTER_CHARS: a longer id is a "
                         f"mistake in the log), got {len(adapter):,} characters")
    return arrival, prompt, reply, output, adapter


def _encode(text: str) -> list[int]:
    from promptcache.tokens import encode

    return encode(text)


def read_replay(path: str | Path, lines: Sequence[str] | None = None) -> Workload:
    """Read a replay workload from a JSONL file (format in the module docstring).

    Args:
        path: the file (also used in error messages).
        lines: the file's lines, if already read (tests; ``path`` then only names them).

    Returns:
        An open-loop :class:`Workload`, requests sorted by arrival time (stable).

    Raises:
        InputError: the file cannot be read, is empty, or a line is bad: not JSON, or a field
            of the wrong type or out of its bound (``file:line``; the reason names the field
            and its range). Bounds: ``arrival_s`` a finite number in [0,
            :data:`MAX_DURATION_S`] (as ``--duration``); ``output_tokens`` an integer in [0,
            :data:`MAX_REQUEST_TOKENS`]; prompt + reply and prompt + output tokens at most
            :data:`MAX_REQUEST_TOKENS`; token ids integers in [0, 2**32); ``adapter`` a string
            of at most :data:`MAX_ADAPTER_CHARS` characters; no lone surrogate in a text.
    """
    name = str(path)
    if lines is None:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(name, f"cannot read: {exc}") from None
    parsed: list[tuple[float, int, list[int], list[int], int, str]] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            arrival, prompt, reply, output, adapter = _parse_line(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InputError(f"{name}:{lineno}", f"invalid JSON: {exc.msg}") from None
        except RecursionError:
            raise InputError(f"{name}:{lineno}", "invalid JSON: nested too deeply for a "
                                                 "replay line") from None
        except ValueError as exc:
            raise InputError(f"{name}:{lineno}", str(exc)) from None
        parsed.append((arrival, lineno, prompt, reply, output, adapter))
    if not parsed:
        raise InputError(name, "no requests (the file is empty)")
    parsed.sort(key=lambda p: (p[0], p[1]))
    requests = tuple(
        Request(index=i, conversation=lineno, turn=0, adapter=adapter, arrival_s=arrival,
                think_s=0.0, stream=prompt + reply, prompt_len=len(prompt),
                insert_len=len(prompt) + len(reply), output_tokens=output)
        for i, (arrival, lineno, prompt, reply, output, adapter) in enumerate(parsed)
    )
    return Workload(requests, f"replay of {name}: {len(requests)} requests")
