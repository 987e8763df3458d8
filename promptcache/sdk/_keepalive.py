"""Bounded, priced cache keep-alive pings with a stop handle.

A ping re-sends a request's cached prefix with (almost) no output, so its cache entry's TTL is
refreshed by a cache read instead of lapsing:

- Anthropic: the same request, without ``stream``, with the catalog's pre-warm ``max_tokens``
  (:attr:`promptcache.catalog.ProviderRules.prewarm_max_tokens`, 0: prefill only, writes and
  reads the cache at the breakpoints, returns ``content: []`` with a filled ``usage``). The
  settings a pre-warm is rejected with (thinking enabled, a forced ``tool_choice``,
  ``output_config.format``, ...) are catalog data too (``prewarm_rejects``, checked by
  :meth:`~promptcache.catalog.ProviderRules.check_prewarm`, the same check the builder runs;
  source https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/prompt-caching.md,
  also https://platform.claude.com/docs/en/build-with-claude/prompt-caching).
- OpenAI chat: ``max_completion_tokens=1`` (one output token at most; OpenAI has no pre-warm).
  Responses: the catalog's ``min_max_output_tokens`` (16), the smallest value the Responses
  API accepts; UNCONFIRMED, no official source, only the API's error text quoted in
  https://github.com/vectorize-io/hindsight/issues/58.

Pings are bounded three ways: ``max_pings``, ``max_usd`` (a spend cap, priced with the catalog
through :meth:`promptcache.usage.UsageTracker.cost_of`) and :meth:`KeepAlive.stop`. Peers'
keep-alives were criticised for silent, unbounded spending (Aider #3548, #4372; Claude Code
#95728, reference peer-tools.md "Warming"); every ping here is a usage record with its cost.

Spend cap rule: before each ping the handle checks ``spent + estimate <= max_usd``, where the
estimate is the most expensive ping so far (before the first ping: the cost of writing the
whole prompt at the highest write rate, an upper bound). A ping whose cost is unknown (no
prices) stops the loop when a cap is set.

Interval rule: ``every`` must be below the shortest TTL of the entries the request keeps (the
TTLs of its cache markers as :func:`promptcache.prefix.render` reads them: Anthropic
``cache_control`` with its ``ttl``, default 5m, block-level or top-level; OpenAI
``prompt_cache_breakpoint`` with ``prompt_cache_options.ttl``, default 30m; a GPT-5.6+ request
without markers: its implicit breakpoint's ``prompt_cache_options.ttl`` or the catalog's
``default_ttl``; a wrapped ``auto_cache`` client adds the catalog's ``default_ttl`` of the
markers it places). A slower ping arrives after the entry expired and writes the prefix again
(1.25x on Anthropic) instead of reading it, so :func:`keepalive` refuses it. An OpenAI model
without a TTL (in-memory retention, cleared after some minutes idle) is not checked.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from promptcache.sdk._observe import body_of, logger

if TYPE_CHECKING:
    from promptcache.usage import UsageRecord, UsageTracker

__all__ = ["KeepAlive", "keepalive"]


# One output token: the smallest output limit that is not zero, for providers without a
# pre-warm or a catalog minimum (a ping design choice, not a provider fact).
_ONE_TOKEN = 1


def _ping_request(kind: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """The ping's keyword arguments for a request of ``kind``.

    Raises:
        InvalidRequestError: the request cannot be pre-warmed (a setting of the catalog's
            Anthropic ``prewarm_rejects``; the path names it, e.g. ``thinking.type``).
    """
    from promptcache.catalog import provider_rules

    ping = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
    if kind == "anthropic":
        rules = provider_rules("anthropic")
        rules.check_prewarm(ping)
        ping["max_tokens"] = (_ONE_TOKEN if rules.prewarm_max_tokens is None
                              else rules.prewarm_max_tokens)
    elif kind == "openai-chat":
        ping.pop("max_tokens", None)
        ping["max_completion_tokens"] = _ONE_TOKEN
        ping.pop("n", None)
    else:
        least = provider_rules("openai").min_max_output_tokens
        ping["max_output_tokens"] = _ONE_TOKEN if least is None else least
    return ping


def _ping_output_limit(ping: Mapping[str, Any]) -> int:
    """The most output tokens one ping may produce (its token-limit parameter)."""
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = ping.get(key)
        if isinstance(value, int):
            return value
    return 0


def _check_bounds(every: Any, max_pings: Any, max_usd: Any) -> tuple[float, int, Decimal | None]:
    """``every`` (seconds), ``max_pings`` and the spend cap, checked.

    Raises:
        ValueError: ``every`` is not a finite number > 0, ``max_pings`` not a whole number
            >= 0, or ``max_usd`` not None and not a finite amount >= 0.
    """
    try:
        if isinstance(every, (bool, str, bytes)):
            raise TypeError
        seconds = float(every)
    except (TypeError, ValueError):
        raise ValueError(f"every must be a number of seconds > 0, not {every!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"every must be a finite number of seconds > 0, not {every!r}")
    if isinstance(max_pings, bool) or not isinstance(max_pings, int) or max_pings < 0:
        raise ValueError(f"max_pings must be a whole number >= 0, not {max_pings!r}")
    if max_usd is None:
        return seconds, max_pings, None
    try:
        if isinstance(max_usd, bool):
            raise TypeError
        cap = Decimal(str(max_usd))
    except (TypeError, ValueError, InvalidOperation):
        raise ValueError(f"max_usd must be an amount in USD (e.g. \"0.50\") or None, not "
                         f"{max_usd!r}") from None
    if not cap.is_finite():
        raise ValueError(f"max_usd must be a finite amount in USD (None: no cap), not "
                         f"{max_usd!r}")
    if cap < 0:
        raise ValueError(f"max_usd must be >= 0, not {max_usd!r}")
    return seconds, max_pings, cap


def _auto_cache(client: Any, ping: Mapping[str, Any]) -> bool:
    """Whether a wrapped client places its own cache markers on the ping (``auto_cache``)."""
    if not _is_wrapped(client):
        return False
    from promptcache.sdk._wrap import observer_of

    override = ping.get("promptcache_auto_cache")
    return bool(observer_of(client).auto_cache if override is None else override)


def _entry_ttls(kind: str, body: Mapping[str, Any], auto_cache: bool) -> list[str] | None:
    """TTLs of the cache entries a ping of ``body`` refreshes (see the module docstring);
    None when they cannot be known (a request the renderer cannot read, an OpenAI model
    without a TTL or unknown to the catalog).

    Raises:
        ValueError: the request caches nothing (an Anthropic request without a cache marker,
            an OpenAI request in ``prompt_cache_options`` explicit mode without a breakpoint),
            so a ping has nothing to keep alive.
    """
    from promptcache._errors import InvalidRequestError
    from promptcache.catalog import find_policy
    from promptcache.prefix import render

    model = body.get("model")
    model = model if isinstance(model, str) else None
    try:
        view = render(body, kind, model=model)
    except InvalidRequestError as exc:
        logger.warning("promptcache: keepalive cannot read the request's cache markers (%s); "
                       "every is not checked against their TTL", exc)
        return None
    ttls = [bp.ttl for bp in (s.breakpoint for s in view.segments)
            if bp is not None and bp.ttl is not None]
    if view.automatic is not None and view.automatic.ttl is not None:
        ttls.append(view.automatic.ttl)
    policy = find_policy(model)
    if auto_cache and policy is not None and policy.default_ttl is not None:
        ttls.append(policy.default_ttl)  # the markers the wrapper's planner places
    if ttls:
        return ttls
    if kind == "anthropic":
        raise ValueError(
            "the request has no cache marker (cache_control on a block or at the top level): "
            "Anthropic caches nothing without one, so a ping would keep nothing alive")
    opts = body.get("prompt_cache_options")
    opts = opts if isinstance(opts, Mapping) else {}
    if opts.get("mode") == "explicit":
        raise ValueError(
            "the request is in prompt_cache_options explicit mode without a "
            "prompt_cache_breakpoint: it caches nothing, so a ping would keep nothing alive")
    if policy is None or not policy.automatic_caching or policy.default_ttl is None:
        return None  # no TTL (in-memory retention) or a model the catalog does not know
    ttl = opts.get("ttl")
    return [ttl if isinstance(ttl, str) else policy.default_ttl]  # the implicit breakpoint's


def _check_every(every: float, ttls: list[str] | None) -> None:
    """Refuse an interval that is not below the shortest of ``ttls``.

    Raises:
        ValueError: ``every`` >= the shortest TTL (in seconds).
    """
    from promptcache.usage.classify import ttl_seconds

    known: list[tuple[float, str]] = []
    for ttl in ttls or ():
        try:
            known.append((ttl_seconds(ttl), ttl))
        except ValueError:
            continue
    if not known:
        return
    seconds, ttl = min(known)
    if every >= seconds:
        raise ValueError(
            f"every={every:g} s is not below the request's {ttl} TTL ({seconds:g} s): each ping "
            f"would write the prefix again instead of reading it; use every < {seconds:g}")


def _kind(client: Any) -> str:
    from promptcache.sdk._wrap import _family

    family, is_async = _family(client)
    if is_async:
        raise TypeError("keepalive() needs a sync client (anthropic.Anthropic or openai.OpenAI)")
    return family


class KeepAlive:
    """Handle of a keep-alive loop (see :func:`keepalive`).

    Attributes:
        pings: pings sent so far.
        spent_usd: their total cost (USD, Decimal; ``None`` once a ping could not be priced).
        records: the pings' usage records.
        stopped: why the loop ended (``"stopped"``, ``"max_pings"``, ``"spend_cap"``,
            ``"unpriced"``, ``"error: ..."``), None while it runs.
        error: the exception that ended the loop, if any (never raised from the thread).
    """

    def __init__(self, send: Callable[[], Any], *, usage_format: str, every: float,
                 max_pings: int, max_usd: Decimal | None, tracker: UsageTracker,
                 first_estimate: Decimal | None, sleep: Callable[[float], None] | None,
                 clock: Callable[[], float], label: str | None) -> None:
        self._send = send
        self._format = usage_format
        self.every = every
        self.max_pings = max_pings
        self.max_usd = max_usd
        self._tracker = tracker
        self._estimate = first_estimate
        self._stop = threading.Event()
        #: held while the loop decides to ping and while stop() sets the event: once stop()
        #: returns, the loop has either decided on a ping (in flight) or will see the stop
        self._gate = threading.Lock()
        self._sleep = sleep
        self._clock = clock
        self._label = label
        self._thread: threading.Thread | None = None
        self.pings = 0
        self.spent_usd: Decimal | None = Decimal(0)
        self.records: list[UsageRecord] = []
        self.stopped: str | None = None
        self.error: BaseException | None = None

    # ------------------------------------------------------------------ control
    def stop(self) -> None:
        """Ask the loop to stop; no ping starts after this returns (one in flight finishes)."""
        with self._gate:
            self._stop.set()

    def start(self) -> KeepAlive:
        """Run the loop in a daemon thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.run, name="promptcache-keepalive",
                                            daemon=True)
            self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> None:
        """Wait for the loop's thread to end."""
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        """True while the loop has not ended."""
        return self.stopped is None

    # ------------------------------------------------------------------ loop
    def _wait(self) -> bool:
        """Sleep one interval; True when stopped meanwhile."""
        if self._sleep is None:
            return self._stop.wait(self.every)
        self._sleep(self.every)
        return self._stop.is_set()

    def _cap_reached(self) -> bool:
        if self.max_usd is None:
            return False
        if self.spent_usd is None:
            return True
        estimate = self._estimate if self._estimate is not None else Decimal(0)
        return self.spent_usd + estimate > self.max_usd

    def run(self) -> None:
        """Run the loop in this thread: sleep ``every`` seconds, ping, repeat until a bound.

        The bounds are checked before each sleep (the spend only changes with a ping), so the
        loop ends right after its last ping instead of one interval later."""
        try:
            while True:
                if self.pings >= self.max_pings:
                    self.stopped = "max_pings"
                    return
                if self._cap_reached():
                    self.stopped = "unpriced" if self.spent_usd is None else "spend_cap"
                    if self.pings == 0 and self.spent_usd is not None:
                        logger.warning(
                            "promptcache: keepalive sent no ping: the first ping's worst case "
                            "($%s: the whole prompt written again) exceeds max_usd ($%s)",
                            self._estimate, self.max_usd)
                    return
                if self._wait():
                    self.stopped = "stopped"
                    return
                with self._gate:  # a stop() that lands after the wait still wins
                    if self._stop.is_set():
                        self.stopped = "stopped"
                        return
                self._ping()
        except Exception as exc:  # the API's error ends the loop; it is kept, not raised
            self.error = exc
            self.stopped = f"error: {type(exc).__name__}: {exc}"
            logger.warning("promptcache: keepalive stopped by an error (%s: %s)",
                           type(exc).__name__, exc)

    def _ping(self) -> None:
        from promptcache.usage import parse_usage

        start = self._clock()
        response = self._send()
        self.pings += 1
        record = parse_usage(response, provider=self._format, label=self._label, start=start,
                             end=self._clock())
        self.records.append(record)
        cost = self._tracker.cost_of(record)
        total = None if cost is None else cost.total
        if total is None or self.spent_usd is None:
            self.spent_usd = None
            return
        self.spent_usd += total
        if self._estimate is None or total > self._estimate or self.pings == 1:
            self._estimate = total


def _first_estimate(tracker: UsageTracker, usage_format: str, body: Mapping[str, Any],
                    kind: str, ttls: list[str] | None = None) -> Decimal | None:
    """Upper bound of one ping's cost: the whole prompt, counted at the top of its count's
    error bound (an Anthropic count is an estimate, +-15 %), written again at the write rate of
    the longest TTL its entries use (``ttls``, :func:`_entry_ttls`; the 1h rate when they are
    not known), plus the ping's output limit in output tokens."""
    import math

    from promptcache.usage import UsageRecord

    try:
        from promptcache.prefix import render
        from promptcache.tokens import view_count_bound

        view = render(body, kind, model=body.get("model"))
        _exact, bound = view_count_bound(view)
        tokens = math.ceil(view.total_tokens * (1 + bound))
        model = body.get("model")
        output = _ping_output_limit(body)
        # an Anthropic write is priced by its TTL: 5m only when every entry is a 5m one
        five_minutes = kind == "anthropic" and ttls is not None and set(ttls) == {"5m"}
        worst = [UsageRecord(provider=usage_format, model=model, uncached_input=0, cache_read=0,
                             cache_write=tokens, cache_write_5m=tokens if five_minutes else 0,
                             cache_write_1h=0 if five_minutes else tokens, output=output),
                 UsageRecord(provider=usage_format, model=model, uncached_input=tokens,
                             cache_read=0, output=output)]
        costs = [tracker.cost_of(r) for r in worst]
        known = [c.total for c in costs if c is not None and c.total is not None]
        return max(known) if known else None
    except Exception as exc:
        logger.warning("promptcache: keepalive could not estimate a ping's cost (%s)", exc)
        return None


def keepalive(client: Any, request: Mapping[str, Any], *, every: float = 240.0,
              max_pings: int = 10, max_usd: Decimal | float | str | None = "1.00",
              tracker: UsageTracker | None = None, label: str | None = "keepalive",
              sleep: Callable[[float], None] | None = None,
              clock: Callable[[], float] = time.time, start: bool = True) -> KeepAlive:
    """Keep a request's cache entries warm with bounded, priced pings.

    Example::

        handle = keepalive(client, request, every=240, max_pings=6, max_usd="0.50")
        ...                        # the user is thinking; the prefix stays cached
        handle.stop()

    Args:
        client: a sync ``anthropic.Anthropic`` or ``openai.OpenAI`` (wrapped or not; a wrapped
            client also records the pings in its own tracker).
        request: keyword arguments of the request whose prefix to keep warm
            (``messages.create`` for Anthropic; ``chat.completions.create``, or
            ``responses.create`` when it has ``input``, for OpenAI).
        every: seconds between pings; must be below the shortest TTL of the request's cache
            entries (5m entries need < 300 s; see the module docstring's interval rule).
        max_pings: most pings ever sent (0: none).
        max_usd: spend cap in USD, a Decimal, number or decimal string (None: no cap); see
            the module docstring for the rule.
        tracker: prices the pings (default: a private tracker with catalog prices).
        label: label of the pings' usage records.
        sleep: injectable sleeper ``sleep(seconds)`` (tests: advance a manual clock); default
            waits on the stop event, so :meth:`KeepAlive.stop` interrupts the wait.
        clock: wall clock for the records' start/end (seconds since the epoch).
        start: run the loop in a daemon thread now; with False call :meth:`KeepAlive.run`.

    Returns:
        The :class:`KeepAlive` handle.

    Raises:
        InvalidRequestError: the request cannot be pinged: it holds a setting an Anthropic
            pre-warm is rejected with (catalog ``prewarm_rejects``: thinking enabled, a forced
            ``tool_choice``, ``output_config.format``; ``stream`` is dropped from the ping).
        TypeError: not a sync anthropic / openai client.
        ValueError: ``every`` is not a finite number > 0, or is not below the shortest TTL of
            the request's cache entries (each ping would write the prefix again instead of
            reading it); the request caches nothing (an Anthropic request without a
            ``cache_control`` marker, unless a wrapped ``auto_cache`` client places one; an
            OpenAI request in ``prompt_cache_options`` explicit mode without a breakpoint);
            ``max_pings`` is not a whole number >= 0; ``max_usd`` is not None and not a finite
            amount >= 0 (e.g. ``"abc"``, ``-1``).

        All before any ping is sent.
    """
    every, max_pings, cap = _check_bounds(every, max_pings, max_usd)
    family = _kind(client)
    if family == "anthropic":
        kind, fmt = "anthropic", "anthropic"
        method = client.messages.create
    elif "input" in request and "messages" not in request:
        kind, fmt = "openai-responses", "openai-responses"
        method = client.responses.create
    else:
        kind, fmt = "openai-chat", "openai"
        method = client.chat.completions.create
    ping = _ping_request(kind, request)
    ttls = _entry_ttls(kind, body_of(ping), _auto_cache(client, ping))
    _check_every(every, ttls)
    if tracker is None:
        from promptcache.usage import UsageTracker

        tracker = UsageTracker(keep_records=False)
    estimate = _first_estimate(tracker, fmt, body_of(ping), kind, ttls)
    if label is not None and _is_wrapped(client):
        ping["promptcache_label"] = label  # the wrapper labels the pings in its own tracker

    def send() -> Any:
        return method(**ping)

    handle = KeepAlive(send, usage_format=fmt, every=every, max_pings=max_pings, max_usd=cap,
                       tracker=tracker, first_estimate=estimate, sleep=sleep, clock=clock,
                       label=label)
    return handle.start() if start else handle


def _is_wrapped(client: Any) -> bool:
    from promptcache.sdk._wrap import is_wrapped

    return is_wrapped(client)
