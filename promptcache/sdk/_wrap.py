"""``wrap(client)``: the official anthropic / openai client, observed.

The wrapped client is a transparent proxy (``isinstance(wrapped, anthropic.Anthropic)`` holds
and type checkers see the client's own type): every attribute passes through to the client,
except the observed methods

=========================================  ==============================================
anthropic ``Anthropic`` / ``AsyncAnthropic``  ``messages.create`` (``stream=True`` too),
                                              ``messages.stream``
openai ``OpenAI`` / ``AsyncOpenAI``           ``chat.completions.create`` (``stream=True``
(any ``base_url``: vLLM, SGLang, ...)          too), ``responses.create`` (``stream=True`` too)
=========================================  ==============================================

and ``copy`` / ``with_options``, whose result is wrapped with the same settings and shared
state. Observed methods return the SDK's own objects unmodified; streams come back as a proxy
that yields the SDK's own events unchanged and passes every other attribute through. The API's
exceptions propagate unchanged. ``with_raw_response`` / ``with_streaming_response`` and the
``beta`` namespaces are passed through unobserved.

Per-call overrides (keyword arguments the wrapper reads and removes before sending):

- ``promptcache_label=`` (str): label of this request's usage record;
- ``promptcache_session=`` (str): session (conversation) of this request: live diff, planner
  history and usage session checks;
- ``promptcache_auto_cache=`` (bool): turn auto-cache on or off for this request;
- ``promptcache_lint=`` (``"warn"`` / ``"error"`` / ``"off"``): lint mode for this request.

Type checkers do not know these keywords (the SDK's signatures are kept); the same overrides
are available as a context manager, :func:`promptcache.sdk.call_options`.

Deviation from DESIGN.md: the wrapper is a proxy rather than a subclass of each client, so
one implementation serves the four client classes and their subclasses (Azure, Bedrock, ...)
without touching SDK internals.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from promptcache.sdk._observe import LintMode, Observer, Shape
from promptcache.sdk._streams import (
    AsyncMessageStreamManagerProxy,
    AsyncStreamProxy,
    MessageStreamManagerProxy,
    StreamProxy,
)

if TYPE_CHECKING:
    from promptcache.usage import UsageTracker

__all__ = ["is_wrapped", "observer_of", "tracker_of", "unwrap", "wrap"]

T = TypeVar("T")

# path of attribute names from the client -> (shape, kind); kind: "create" | "stream"
_ANTHROPIC_HOOKS: dict[tuple[str, ...], tuple[Shape, str]] = {
    ("messages", "create"): ("anthropic", "create"),
    ("messages", "stream"): ("anthropic", "stream"),
}
_OPENAI_HOOKS: dict[tuple[str, ...], tuple[Shape, str]] = {
    ("chat", "completions", "create"): ("openai-chat", "create"),
    ("responses", "create"): ("openai-responses", "create"),
}


def _prefixes(hooks: dict[tuple[str, ...], Any]) -> frozenset[tuple[str, ...]]:
    return frozenset(path[:i] for path in hooks for i in range(1, len(path)))


_FAMILIES: dict[str, tuple[dict[tuple[str, ...], tuple[Shape, str]], frozenset[tuple[str, ...]]]] = {
    "anthropic": (_ANTHROPIC_HOOKS, _prefixes(_ANTHROPIC_HOOKS)),
    "openai": (_OPENAI_HOOKS, _prefixes(_OPENAI_HOOKS)),
}


def _family(client: Any) -> tuple[str, bool]:
    """("anthropic" | "openai", is_async) of a client instance.

    Raises:
        TypeError: not an anthropic or openai client.
    """
    import anthropic
    import openai

    if isinstance(client, anthropic.AsyncAnthropic):
        return "anthropic", True
    if isinstance(client, anthropic.Anthropic):
        return "anthropic", False
    if isinstance(client, openai.AsyncOpenAI):
        return "openai", True
    if isinstance(client, openai.OpenAI):
        return "openai", False
    raise TypeError(
        f"wrap() takes an anthropic.Anthropic, anthropic.AsyncAnthropic, openai.OpenAI or "
        f"openai.AsyncOpenAI client, not {type(client).__module__}.{type(client).__name__}")


class _Proxy:
    """Transparent attribute proxy over a client or one of its resource namespaces."""

    __slots__ = ("_pc_async", "_pc_cache", "_pc_family", "_pc_obs", "_pc_path", "_pc_target")

    def __init__(self, target: Any, obs: Observer, family: str, is_async: bool,
                 path: tuple[str, ...] = ()) -> None:
        object.__setattr__(self, "_pc_target", target)
        object.__setattr__(self, "_pc_obs", obs)
        object.__setattr__(self, "_pc_family", family)
        object.__setattr__(self, "_pc_async", is_async)
        object.__setattr__(self, "_pc_path", path)
        object.__setattr__(self, "_pc_cache", {})

    # isinstance(proxy, anthropic.Anthropic) is True, as for the client itself
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(self._pc_target)

    def __getattr__(self, name: str) -> Any:
        cache: dict[str, Any] = self._pc_cache
        if name in cache:
            return cache[name]
        value = getattr(self._pc_target, name)
        path = (*self._pc_path, name)
        hooks, prefixes = _FAMILIES[self._pc_family]
        hook = hooks.get(path)
        out: Any
        if hook is not None and callable(value):
            out = _observed(value, self._pc_obs, hook[0], hook[1], self._pc_async)
        elif path in prefixes:
            out = _Proxy(value, self._pc_obs, self._pc_family, self._pc_async, path)
        elif not self._pc_path and name in ("copy", "with_options") and callable(value):
            out = _rewrapping(value, self._pc_obs)
        else:
            return value  # not cached: plain attributes may change
        cache[name] = out
        return out

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._pc_target, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._pc_target, name)

    def __dir__(self) -> list[str]:
        return dir(self._pc_target)

    def __repr__(self) -> str:
        return f"<promptcache.wrap {self._pc_target!r}>"

    # context managers: `with wrap(client) as c:` yields the wrapped client
    def __enter__(self) -> Any:
        self._pc_target.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._pc_target.__exit__(*exc)

    async def __aenter__(self) -> Any:
        await self._pc_target.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._pc_target.__aexit__(*exc)


def _rewrapping(method: Callable[..., Any], obs: Observer) -> Callable[..., Any]:
    @functools.wraps(method)
    def copy(*args: Any, **kwargs: Any) -> Any:
        new = method(*args, **kwargs)
        new_obs = Observer(tracker=obs.tracker, label=obs.label, session=obs.session,
                           auto_cache=obs.auto_cache, lint=obs.lint, shared=obs.shared)
        return _make(new, new_obs)

    return copy


def _observed(method: Callable[..., Any], obs: Observer, shape: Shape, kind: str,
              is_async: bool) -> Callable[..., Any]:
    if kind == "stream":
        @functools.wraps(method)
        def stream(*args: Any, **kwargs: Any) -> Any:
            call = obs.prepare(shape, kwargs)
            call.start = time.time()
            call.stream = True
            manager = method(*args, **call.kwargs)
            if is_async:
                return AsyncMessageStreamManagerProxy(manager, obs, call)
            return MessageStreamManagerProxy(manager, obs, call)

        return stream

    if is_async:
        @functools.wraps(method)
        async def acreate(*args: Any, **kwargs: Any) -> Any:
            call = obs.prepare(shape, kwargs)
            call.start = time.time()
            result = await method(*args, **call.kwargs)
            if call.stream:
                return AsyncStreamProxy(result, obs, call)
            await obs.arecord_response(call, result, time.time())
            return result

        return acreate

    @functools.wraps(method)
    def create(*args: Any, **kwargs: Any) -> Any:
        call = obs.prepare(shape, kwargs)
        call.start = time.time()
        result = method(*args, **call.kwargs)
        if call.stream:
            return StreamProxy(result, obs, call)
        obs.record_response(call, result, time.time())
        return result

    return create


def _make(client: Any, obs: Observer) -> Any:
    family, is_async = _family(client)
    return _Proxy(client, obs, family, is_async)


def wrap(client: T, *, tracker: UsageTracker | None = None, label: str | None = None,
         session: str | None = None, auto_cache: bool = False, lint: LintMode = "warn") -> T:
    """Observe an official anthropic / openai client: usage, cache markers, lint, live diff.

    Example::

        import anthropic, promptcache
        from promptcache.usage import UsageTracker

        tracker = UsageTracker()
        client = promptcache.wrap(anthropic.Anthropic(), tracker=tracker, auto_cache=True)
        msg = client.messages.create(model="claude-sonnet-4-5", max_tokens=512, system=[...],
                                     messages=[...], promptcache_session="chat-42")
        tracker.summary().hit_rate

    Args:
        client: ``anthropic.Anthropic``, ``anthropic.AsyncAnthropic``, ``openai.OpenAI`` or
            ``openai.AsyncOpenAI`` (any ``base_url``: vLLM and SGLang speak OpenAI's API).
        tracker: where usage records go; a new
            :class:`~promptcache.usage.UsageTracker` when None (see :func:`tracker_of`).
        label: default label of the usage records (per call: ``promptcache_label=``).
        session: default session (conversation id; per call: ``promptcache_session=``). The
            live diff compares each request with the previous request of its session.
        auto_cache: place cache breakpoints with ``promptcache.planner`` (keeping the caller's
            markers; OpenAI: ``prompt_cache_key`` when absent). Off by default: it changes the
            request.
        lint: ``"warn"`` (log and ``warnings.warn`` each distinct finding once), ``"error"``
            (raise :class:`~promptcache._errors.PromptCacheLintError` before sending when a
            request has error- or warning-severity findings; info findings are warned) or
            ``"off"``.

    Returns:
        The wrapped client, typed as ``client``. Streams: usage is recorded when the stream
        ends, is closed (context manager, ``close()``), is left early with ``break`` or gives
        its final message (``get_final_message()``). OpenAI chat streams carry usage only with
        ``stream_options={"include_usage": True}``; the wrapper never adds it (that would change
        the response) and records unknown usage with a one-time warning instead.

    Raises:
        TypeError: ``client`` is not one of the four client classes.
        ValueError: ``lint`` is not one of the three modes.
    """
    if isinstance(client, _Proxy):
        base = object.__getattribute__(client, "_pc_target")
        shared = object.__getattribute__(client, "_pc_obs").shared
    else:
        base, shared = client, None
    obs = Observer(tracker=tracker, label=label, session=session, auto_cache=auto_cache,
                   lint=lint, shared=shared)
    proxy: T = _make(base, obs)
    return proxy


def is_wrapped(client: Any) -> bool:
    """Whether ``client`` is a client returned by :func:`wrap`."""
    return isinstance(client, _Proxy)


def observer_of(client: Any) -> Observer:
    """The :class:`~promptcache.sdk._observe.Observer` of a wrapped client.

    Raises:
        TypeError: ``client`` was not returned by :func:`wrap`.
    """
    if not is_wrapped(client):
        raise TypeError("not a client returned by promptcache.wrap()")
    obs: Observer = object.__getattribute__(client, "_pc_obs")
    return obs


def tracker_of(client: Any) -> UsageTracker:
    """The usage tracker of a wrapped client (the one given to :func:`wrap`, or its own).

    Raises:
        TypeError: ``client`` was not returned by :func:`wrap`.
    """
    return observer_of(client).tracker


def unwrap(client: T) -> T:
    """The SDK client behind a wrapped client (the client itself when it is not wrapped)."""
    if is_wrapped(client):
        base: T = object.__getattribute__(client, "_pc_target")
        return base
    return client
