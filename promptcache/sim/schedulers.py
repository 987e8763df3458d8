"""Scheduling policies: which waiting request a replica admits next.

A policy sees a *window*: the oldest ``window`` waiting requests (default 32), in arrival
order, and returns the index of the one to admit. Requests behind the window wait their turn,
which bounds how far any policy can reorder (SGLang's scheduler also ranks a bounded queue
and falls back to FCFS when the queue is long).

- :class:`FCFS`: the oldest request.
- :class:`LongestPrefixFirst` (``lpm``): the request with the longest cached prefix now
  (SGLang's "longest prefix match"); ties go to the oldest. Keeps hot prefixes in use before
  they are evicted, at the price of possible starvation of requests that share nothing.
- :class:`LongestPrefixFirstAgeing` (``lpm-ageing``): ranks by ``cached tokens +
  ageing_tokens_per_s x seconds waited``, so a waiting request gains priority and cannot
  starve; the simulator reports the maximum wait of every policy so the effect is visible.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from promptcache.sim._checks import check_real
from promptcache.sim.workload import Request

__all__ = [
    "FCFS",
    "MAX_AGEING_TOKENS_PER_S",
    "POLICIES",
    "LongestPrefixFirst",
    "LongestPrefixFirstAgeing",
    "SchedulePolicy",
    "Waiting",
    "check_ageing",
    "make_policy",
]


@dataclass(slots=True)
class Waiting:
    """A request in a replica's queue and when it joined (seconds)."""

    request: Request
    enqueued_s: float


class SchedulePolicy(ABC):
    """Picks the next request to admit from a window of waiting requests."""

    name: str = ""

    @abstractmethod
    def pick(self, window: Sequence[Waiting], now_s: float,
             cached_tokens: Callable[[Request], int]) -> int:
        """Index into ``window`` (oldest first, non-empty) of the request to admit.

        Args:
            window: waiting requests, oldest first.
            now_s: the simulated time.
            cached_tokens: tokens of a request's prompt the cache would reuse now.
        """


class FCFS(SchedulePolicy):
    """First come, first served."""

    name = "fcfs"

    def pick(self, window: Sequence[Waiting], now_s: float,
             cached_tokens: Callable[[Request], int]) -> int:
        return 0


class LongestPrefixFirst(SchedulePolicy):
    """Longest cached prefix first; ties to the oldest."""

    name = "lpm"

    def pick(self, window: Sequence[Waiting], now_s: float,
             cached_tokens: Callable[[Request], int]) -> int:
        best, best_score = 0, -1
        for i, w in enumerate(window):
            score = cached_tokens(w.request)
            if score > best_score:
                best, best_score = i, score
        return best


#: The largest ``ageing_tokens_per_s`` (tokens of priority per second waited): 10**9, the
#: bound :data:`promptcache.usage.record.MAX_TOKENS` puts on a token count, so one second of
#: waiting outranks any plausible cached prefix; a larger rate ranks the same way (and an
#: infinite one made every score NaN or infinite). A plausibility bound, not a server fact.
MAX_AGEING_TOKENS_PER_S = 1e9


def check_ageing(value: object) -> float:
    """``ageing_tokens_per_s`` as a finite number in [0, :data:`MAX_AGEING_TOKENS_PER_S`].

    Raises:
        ValueError: NaN, infinite, negative, above the bound or not a number; the message
            starts with ``ageing_tokens_per_s``.
    """
    return check_real("ageing_tokens_per_s", value, 0.0, MAX_AGEING_TOKENS_PER_S,
                      unit="tokens/s", why="(MAX_AGEING_TOKENS_PER_S: one second of waiting "
                      "already outranks any cached prefix)")


class LongestPrefixFirstAgeing(SchedulePolicy):
    """Longest cached prefix first, plus ``ageing_tokens_per_s`` tokens per second waited.

    Args:
        ageing_tokens_per_s: priority (in tokens of cached prefix) gained per second of
            waiting (default 100: after 10 s a request outranks one with 1,000 more cached
            tokens).

    Raises:
        ValueError: a rate that is not a finite number in [0,
            :data:`MAX_AGEING_TOKENS_PER_S`] (the message starts with
            ``ageing_tokens_per_s``).
    """

    name = "lpm-ageing"

    def __init__(self, ageing_tokens_per_s: float = 100.0) -> None:
        self.ageing_tokens_per_s = check_ageing(ageing_tokens_per_s)

    def pick(self, window: Sequence[Waiting], now_s: float,
             cached_tokens: Callable[[Request], int]) -> int:
        rate = self.ageing_tokens_per_s
        best, best_score = 0, float("-inf")
        for i, w in enumerate(window):
            score = cached_tokens(w.request) + rate * (now_s - w.enqueued_s)
            if score > best_score:
                best, best_score = i, score
        return best


POLICIES: tuple[str, ...] = ("fcfs", "lpm", "lpm-ageing")
"""Policy names, in report order."""


def make_policy(name: str, *, ageing_tokens_per_s: float = 100.0) -> SchedulePolicy:
    """A policy by name (``fcfs``, ``lpm``, ``lpm-ageing``).

    Raises:
        ValueError: an unknown name, or (``lpm-ageing``) a bad ``ageing_tokens_per_s``.
    """
    if name == "fcfs":
        return FCFS()
    if name == "lpm":
        return LongestPrefixFirst()
    if name == "lpm-ageing":
        return LongestPrefixFirstAgeing(ageing_tokens_per_s)
    raise ValueError(f"unknown policy {name!r}; use one of {', '.join(POLICIES)}")
