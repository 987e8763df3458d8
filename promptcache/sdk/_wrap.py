"""``wrap(client)``: the official anthropic / openai client, observed.

The wrapped client is a transparent proxy (``isinstance(wrapped, anthropic.Anthropic)`` holds
and type checkers see the client's own type): every attribute passes through to the client,
except the observed methods

=========================================  ==============================================
anthropic ``Anthropic`` / ``AsyncAnthropic``  ``messages.create`` (``stream=True`` too),
                                              ``messages.stream``, ``messages.parse``
openai ``OpenAI`` / ``AsyncOpenAI``           ``chat.completions.create`` (``stream=True``
(any ``base_url``: vLLM, SGLang, ...)          too), ``chat.completions.parse``,
                                              ``chat.completions.stream``,
                                              ``responses.create`` (``stream=True`` too),
                                              ``responses.parse``, ``responses.stream``
=========================================  ==============================================

and ``copy`` / ``with_options``, whose result is wrapped with the same settings and shared
state. (A method the installed SDK version lacks is simply absent, as on the client.) Observed
methods return the SDK's own objects unmodified; streams come back as a proxy that yields the
SDK's own events unchanged and passes every other attribute through; the stream managers of
``messages.stream`` / ``chat.completions.stream`` / ``responses.stream`` come back as a proxy
whose ``with`` / ``async with`` block yields such a stream proxy (the request is sent on
entering the block, as by the SDK). The ``parse`` helpers and the stream managers are planned,
linted and diffed on the body they send (a structured-output type turned into its JSON schema
by the SDK's own functions). The API's exceptions propagate unchanged; when a ``parse``
helper refuses an answer it received (openai's ``LengthFinishReasonError``,
``ContentFilterFinishReasonError``; an answer that does not validate against the output type,
a ``pydantic.ValidationError``), its usage is recorded first.

``with_raw_response.create`` (of ``messages``, ``chat.completions`` and ``responses``) is
observed too: the SDK's raw response wrapper is returned unchanged, and the usage is read from
its ``.parse()`` (which the SDK caches: the caller's own ``.parse()`` returns the same object);
a stream requested that way is not tracked (a warning says so once).

Passed through unobserved: ``with_streaming_response``, the other ``with_raw_response``
methods, the ``beta`` namespaces, and ``responses.stream(response_id=...)`` (it re-streams a
response created earlier: no prompt is sent, and its usage belongs to the request that created
it).

Per-call overrides (keyword arguments the wrapper reads and removes before sending):

- ``promptcache_label=`` (str): label of this request's usage record;
- ``promptcache_session=`` (str): session (conversation) of this request: live diff, planner
  history and usage session checks;
- ``promptcache_auto_cache=`` (bool): turn auto-cache on or off for this request;
- ``promptcache_lint=`` (``"warn"`` / ``"error"`` / ``"off"``): lint mode for this request.

A ``None`` for either of the last two means "not given" (``call_options``, else the wrapper's
setting), as in :func:`promptcache.sdk.call_options`; a label or session of None means none.

A value of another type (an int session id, ``"yes"`` for a bool) raises ``TypeError`` (a bad
lint mode ``ValueError``) before the request is sent.

Type checkers do not know these keywords (the SDK's signatures are kept); the same overrides
are available as a context manager, :func:`promptcache.sdk.call_options`.

Deviation from DESIGN.md: the wrapper is a proxy rather than a subclass of each client, so
one implementation serves the four client classes and their subclasses (Azure, Bedrock, ...)
without touching SDK internals.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from promptcache.sdk._observe import (
    DROPPED_STREAMS,
    OVERRIDES,
    LintMode,
    Observer,
    Shape,
    drain_dropped_streams,
    fault,
)
from promptcache.sdk._streams import (
    AsyncChatCompletionStreamManagerProxy,
    AsyncMessageStreamManagerProxy,
    AsyncResponseStreamManagerProxy,
    AsyncStreamProxy,
    ChatCompletionStreamManagerProxy,
    MessageStreamManagerProxy,
    ResponseStreamManagerProxy,
    StreamProxy,
)

if TYPE_CHECKING:
    from promptcache.usage import UsageTracker

__all__ = ["is_wrapped", "observer_of", "tracker_of", "unwrap", "wrap"]

T = TypeVar("T")

# path of attribute names from the client -> (shape, kind); kind: "create" (returns the
# response, or a raw stream with stream=True), "parse" (an SDK helper returning the parsed
# response) or "stream" (an SDK helper returning a stream manager). A path whose method the
# installed SDK lacks is simply never looked up.
# "raw": ``with_raw_response.create``, which returns the SDK's raw response wrapper (headers,
# ``.parse()``); its parsed response is recorded (the SDK caches it, so the caller's own
# ``.parse()`` returns the same object).
_ANTHROPIC_HOOKS: dict[tuple[str, ...], tuple[Shape, str]] = {
    ("messages", "create"): ("anthropic", "create"),
    ("messages", "stream"): ("anthropic", "stream"),
    ("messages", "parse"): ("anthropic", "parse"),
    ("messages", "with_raw_response", "create"): ("anthropic", "raw"),
}
_OPENAI_HOOKS: dict[tuple[str, ...], tuple[Shape, str]] = {
    ("chat", "completions", "create"): ("openai-chat", "create"),
    ("chat", "completions", "parse"): ("openai-chat", "parse"),
    ("chat", "completions", "stream"): ("openai-chat", "stream"),
    ("chat", "completions", "with_raw_response", "create"): ("openai-chat", "raw"),
    ("responses", "create"): ("openai-responses", "create"),
    ("responses", "parse"): ("openai-responses", "parse"),
    ("responses", "stream"): ("openai-responses", "stream"),
    ("responses", "with_raw_response", "create"): ("openai-responses", "raw"),
}

# stream manager proxy per shape: (sync, async)
_MANAGERS: dict[str, tuple[type[Any], type[Any]]] = {
    "anthropic": (MessageStreamManagerProxy, AsyncMessageStreamManagerProxy),
    "openai-chat": (ChatCompletionStreamManagerProxy, AsyncChatCompletionStreamManagerProxy),
    "openai-responses": (ResponseStreamManagerProxy, AsyncResponseStreamManagerProxy),
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


def _existing_response(kwargs: dict[str, Any]) -> bool:
    """``responses.stream(response_id=...)``: streams a response created earlier (no prompt is
    sent; its usage belongs to the request that created it)."""
    return any(kwargs.get(k) is not None and type(kwargs[k]).__name__ not in ("Omit", "NotGiven")
               for k in ("response_id", "starting_after"))


def _observed(method: Callable[..., Any], obs: Observer, shape: Shape, kind: str,
              is_async: bool) -> Callable[..., Any]:
    if kind == "stream":
        manager_proxy = _MANAGERS[shape][1 if is_async else 0]

        @functools.wraps(method)
        def stream(*args: Any, **kwargs: Any) -> Any:
            if shape == "openai-responses" and _existing_response(kwargs):
                return method(*args, **{k: v for k, v in kwargs.items() if k not in OVERRIDES})
            call = obs.prepare(shape, kwargs, "stream")
            call.start = time.time()
            call.stream = True
            manager = method(*args, **call.kwargs)
            return manager_proxy(manager, obs, call)

        return stream

    if kind == "parse":
        return _parsing(method, obs, shape, is_async)

    if kind == "raw":
        return _raw(method, obs, shape, is_async)

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


def _parsing(method: Callable[..., Any], obs: Observer, shape: Shape, is_async: bool
             ) -> Callable[..., Any]:
    """``messages.parse`` / ``chat.completions.parse`` / ``responses.parse``: as ``create``;
    the parsed response (a subclass of the plain one) carries the same usage. When the SDK
    refuses an answer it received (``openai.LengthFinishReasonError``,
    ``ContentFilterFinishReasonError``, or the answer does not validate against the output
    type: the request was billed), its usage is recorded before the exception propagates
    unchanged (:func:`_refused_completion`)."""
    if is_async:
        @functools.wraps(method)
        async def aparse(*args: Any, **kwargs: Any) -> Any:
            call = obs.prepare(shape, kwargs, "parse")
            call.start = time.time()
            try:
                result = await method(*args, **call.kwargs)
            except Exception as exc:
                refused = _received(exc, shape)
                if refused is not None:
                    await obs.arecord_response(call, refused, time.time())
                raise
            await obs.arecord_response(call, result, time.time())
            return result

        return aparse

    @functools.wraps(method)
    def parse(*args: Any, **kwargs: Any) -> Any:
        call = obs.prepare(shape, kwargs, "parse")
        call.start = time.time()
        try:
            result = method(*args, **call.kwargs)
        except Exception as exc:
            refused = _received(exc, shape)
            if refused is not None:
                obs.record_response(call, refused, time.time())
            raise
        obs.record_response(call, result, time.time())
        return result

    return parse


def _raw(method: Callable[..., Any], obs: Observer, shape: Shape, is_async: bool
         ) -> Callable[..., Any]:
    """``with_raw_response.create``: as ``create``, returning the SDK's raw response wrapper
    unchanged; the usage is read from its parsed response (``.parse()``, which the SDK caches:
    the caller's own ``.parse()`` returns the same object). A stream requested this way is
    returned unobserved, with a warning once (its events are not seen)."""
    def untracked_stream() -> None:
        obs.warn_once(f"raw-stream:{shape}",
                      "promptcache: a stream requested through with_raw_response is not "
                      "tracked (its usage is not recorded); use create(stream=True) or "
                      "the stream() helper")

    if is_async:
        @functools.wraps(method)
        async def araw(*args: Any, **kwargs: Any) -> Any:
            call = obs.prepare(shape, kwargs)
            call.start = time.time()
            result = await method(*args, **call.kwargs)
            if call.stream:
                untracked_stream()
                return result
            try:
                parsed = result.parse()
                if inspect.isawaitable(parsed):  # anthropic's AsyncAPIResponse
                    parsed = await parsed
            except Exception as exc:
                fault("reading a raw response", exc, "the response is returned unchanged")
                return result
            await obs.arecord_response(call, parsed, time.time())
            return result

        return araw

    @functools.wraps(method)
    def raw(*args: Any, **kwargs: Any) -> Any:
        call = obs.prepare(shape, kwargs)
        call.start = time.time()
        result = method(*args, **call.kwargs)
        if call.stream:
            untracked_stream()
            return result
        try:
            parsed = result.parse()
        except Exception as exc:
            fault("reading a raw response", exc, "the response is returned unchanged")
            return result
        obs.record_response(call, parsed, time.time())
        return result

    return raw


def _received(exc: BaseException, shape: Shape | None = None) -> Any:
    """:func:`_refused_completion`, never raising (a fault is logged: the SDK's exception
    propagates unchanged either way)."""
    try:
        return _refused_completion(exc, shape)
    except Exception as inner:
        fault("reading the response a parse helper refused", inner, "its usage is not recorded")
        return None


def _refused_completion(exc: BaseException, shape: Shape | None = None) -> Any:
    """The response a parse helper received and then refused, or None (nothing received).

    - openai's ``LengthFinishReasonError`` / ``ContentFilterFinishReasonError`` carry it
      (``.completion``);
    - any other exception raised while the SDK parsed a received answer (the answer is not
      valid JSON for the output type: a ``pydantic.ValidationError``, new-user trial 23) does
      not: the response the SDK built before parsing it is read from the traceback's frames
      below the wrapper's own (the SDK's ``post_parser`` holds it), by its class for
      ``shape`` (``anthropic.types.Message``, ``openai.types.chat.ChatCompletion``,
      ``openai.types.responses.Response``). The API's own errors (``APIError``: nothing was
      answered) are never read this way.
    """
    if type(exc).__name__ in ("LengthFinishReasonError", "ContentFilterFinishReasonError"):
        completion = getattr(exc, "completion", None)
        return completion if getattr(completion, "usage", None) is not None else None
    if shape is None:
        return None
    import anthropic
    import openai

    if isinstance(exc, (anthropic.APIError, openai.APIError)):
        return None
    if shape == "anthropic":
        cls: type = anthropic.types.Message
    elif shape == "openai-chat":
        cls = openai.types.chat.ChatCompletion
    else:
        cls = openai.types.responses.Response
    tb = exc.__traceback__
    tb = tb.tb_next if tb is not None else None  # the wrapper's own frame: the caller's data
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, cls) and getattr(value, "usage", None) is not None:
                return value
        tb = tb.tb_next
    return None


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
        lint: ``"warn"`` (``warnings.warn`` each distinct error- or warning-severity finding
            once, and log it on the ``"promptcache"`` logger when the application has set up
            logging; info findings, advice such as PC401's short OpenAI prompt, are only
            logged, at info level), ``"error"`` (raise
            :class:`~promptcache._errors.PromptCacheLintError` before sending when a request
            has error- or warning-severity findings; info findings are logged) or ``"off"``.

    Observed: ``messages.create`` / ``stream`` / ``parse`` (Anthropic);
    ``chat.completions.create`` / ``parse`` / ``stream`` and ``responses.create`` / ``parse`` /
    ``stream`` (OpenAI); sync and async. Everything else passes through unobserved (see the
    module docstring).

    Returns:
        The wrapped client, typed as ``client``. Streams: usage is recorded once, when the
        stream ends, is closed (context manager, ``close()``, leaving a stream manager's
        ``with`` block), is left early with ``break`` or gives its final object
        (``get_final_message()``, ``get_final_completion()``, ``get_final_response()``,
        ``until_done()``). OpenAI chat streams (``create(stream=True)`` and
        ``chat.completions.stream()``) carry usage only with
        ``stream_options={"include_usage": True}``; the wrapper never adds it (that would change
        the response) and records unknown usage with a one-time warning instead.

        Wrapping a wrapped client wraps the same SDK client again with only the new settings
        (tracker, label, session, auto_cache, lint; nothing is inherited); the two share the
        sessions' live-diff state, and the first wrapper, where still used, keeps its own.

    Raises:
        TypeError: ``client`` is not one of the four client classes; ``tracker`` is not a
            usage tracker (an object with an ``add(record)`` method); ``label`` or ``session``
            is not a str (or None); ``auto_cache`` is not a bool.
        ValueError: ``lint`` is not one of the three modes.

    The per-call overrides are checked the same way before anything is sent: a
    ``promptcache_label=`` / ``promptcache_session=`` that is not a str (an int user id, say)
    or a ``promptcache_auto_cache=`` that is not a bool raises ``TypeError`` from the call, a
    bad ``promptcache_lint=`` ``ValueError``; the request is not sent.
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

    Streams dropped unread since the last observed call are recorded first (see
    ``promptcache.sdk._streams``).

    Raises:
        TypeError: ``client`` was not returned by :func:`wrap`.
    """
    obs = observer_of(client)
    if DROPPED_STREAMS:  # a stream dropped unread: its usage belongs in what is read now
        drain_dropped_streams()
    return obs.tracker


def unwrap(client: T) -> T:
    """The SDK client behind a wrapped client (the client itself when it is not wrapped)."""
    if is_wrapped(client):
        base: T = object.__getattribute__(client, "_pc_target")
        return base
    return client
