"""What the wrapper does around one request: plan, lint, live diff, usage.

:class:`Observer` holds one wrapped client's settings and the state its copies share (the
sessions' previous requests, the findings already reported). Every public entry point of this
module is fault-isolated: an exception raised by promptcache's own planning, lint, diff or
usage tracking is caught and logged on the ``"promptcache"`` logger, and the call goes on
unchanged. The only exception the wrapper raises on purpose is
:class:`~promptcache._errors.PromptCacheLintError` (``lint="error"``), before anything is sent.

Per request, in this order (all on the outgoing keyword arguments; the caller's dict is never
mutated)::

    kwargs ─► strip promptcache_* overrides ─► payload (JSON body: kwargs without the SDK's
              request options, extra_body merged, pydantic models dumped as the SDK dumps them)
          ─► auto_cache: plan_breakpoints(render(payload), policy, previous plan of the session)
                         + apply_plan (markers kept, prompt_cache_key set when absent)
          ─► lint: lint_request's stable request-level rules, run on the views rendered here
                   (:func:`lint_views`; the session's previous request feeds the lookback rule)
          ─► live diff: first divergence from the session's previous request; when it lies at
                        or before that request's last breakpoint, diff() names the cause
          ─► send (the SDK's own method) ─► usage record ─► tracker
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import functools
import logging
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from promptcache._errors import InvalidRequestError, PromptCacheLintError, UnknownModelError
from promptcache._stored import stored_prompt_fields

if TYPE_CHECKING:
    from promptcache.planner import BreakpointPlan
    from promptcache.prefix import PrefixView
    from promptcache.usage import UsageEvent, UsageRecord, UsageTracker

__all__ = [
    "LintMode",
    "Observer",
    "PromptCacheWarning",
    "SentRequest",
    "Shape",
    "call_options",
    "logger",
]

logger = logging.getLogger("promptcache")

_TRACEBACKS: set[tuple[str, type]] = set()
_TRACEBACKS_LOCK = threading.Lock()


def _warn_both(message: str, stacklevel: int) -> None:
    """Report ``message`` through ``warnings.warn`` (:class:`PromptCacheWarning`) and, when the
    application has set up logging, the ``"promptcache"`` logger (warning level).

    Without any handler, Python prints a log record through its last-resort handler, beside the
    warning's own line: the same message twice. ``stacklevel`` counts from the caller.
    """
    if logger.hasHandlers():
        logger.warning("%s", message)
    warnings.warn(message, PromptCacheWarning, stacklevel=stacklevel + 1)


def fault(what: str, exc: BaseException, then: str = "the call goes on") -> None:
    """Log one of promptcache's own faults on the ``"promptcache"`` logger (warning level).

    The traceback is attached the first time a (what, exception type) pair is seen in the
    process; repeats log one line, so a sink failing on every call does not flood the log.
    """
    key = (what, type(exc))
    with _TRACEBACKS_LOCK:
        first = key not in _TRACEBACKS
        _TRACEBACKS.add(key)
    logger.warning("promptcache: %s failed (%s: %s); %s", what, type(exc).__name__, exc, then,
                   exc_info=exc if first else None)

LintMode = Literal["warn", "error", "off"]
Shape = Literal["anthropic", "openai-chat", "openai-responses"]

#: Keyword arguments of the SDK methods that are request options, not body fields.
_REQUEST_OPTIONS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})
#: Per-call overrides the wrapper reads and strips before sending.
OVERRIDES = ("promptcache_label", "promptcache_session", "promptcache_auto_cache",
             "promptcache_lint")
#: parse_usage wire format per request shape.
_USAGE_FORMAT: dict[str, str] = {"anthropic": "anthropic", "openai-chat": "openai",
                                 "openai-responses": "openai-responses"}


#: Flags the wrapper itself puts on records whose usage is unknown.
_OWN_FLAGS = frozenset({"stream_usage_missing", "usage_unparsable"})

#: Stream taps whose proxy was garbage-collected before its usage was recorded (a stream from
#: ``create(stream=True)`` dropped unread and never closed; the request was sent and billed),
#: with the time each was dropped. A proxy's ``__del__`` only appends here (it may run inside
#: any code, a tracker's lock held included); :func:`drain_dropped_streams` records them, at
#: the start of the next observed call, when a wrapped client's tracker is asked for, before
#: any tracker's results are read, and at exit.
DROPPED_STREAMS: deque[tuple[Any, float]] = deque(maxlen=1024)
#: How such a stream ended, in its warning.
DROPPED_HOW = "dropped unread and never closed"


def drain_dropped_streams() -> None:
    """Record the usage of every stream in :data:`DROPPED_STREAMS` (what its events showed
    before it was dropped, else unknown, with a one-time warning). Never raises."""
    while DROPPED_STREAMS:
        try:
            tap, when = DROPPED_STREAMS.popleft()
        except IndexError:  # drained by another thread meanwhile
            return
        try:
            tap.finish(DROPPED_HOW, end=when)
        except Exception as exc:
            fault("recording a dropped stream's usage", exc, "its usage is not recorded")


_DRAIN_REGISTERED = False


def _register_drain() -> None:
    """Dropped streams are recorded before a tracker's results are read (``tracker.summary()``
    on the tracker given to ``wrap``, not only ``tracker_of``) and at exit (a sink's last
    records): review 26. Registered when the first observer is made (a stream needs a wrapped
    client), not at import: importing the wrapper does not import the usage package."""
    global _DRAIN_REGISTERED
    if _DRAIN_REGISTERED:
        return
    _DRAIN_REGISTERED = True
    from promptcache.usage import tracker as _tracker

    def drain() -> None:
        if DROPPED_STREAMS:
            drain_dropped_streams()

    _tracker.BEFORE_READ.append(drain)
    atexit.register(drain)

_CALL_OPTIONS: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "promptcache_call_options", default=MappingProxyType({}))


def check_name(what: str, value: Any) -> None:
    """Refuse a label or session that is not a str (or None): a caller mistake, raised before
    anything is sent (a usage record's label and session are strings; an int user id sent as
    is would otherwise fail only after the paid response arrived).

    Raises:
        TypeError: ``value`` is neither a str nor None.
    """
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{what} must be a str or None, not {type(value).__name__} ({value!r}); "
                        f"pass str({value!r}) to use it")


def check_lint(what: str, value: Any) -> None:
    """Raises: ValueError: ``value`` is not ``"warn"``, ``"error"`` or ``"off"``."""
    if value not in ("warn", "error", "off"):
        raise ValueError(f"{what} must be 'warn', 'error' or 'off', got {value!r}")


def check_flag(what: str, value: Any) -> None:
    """Raises: TypeError: ``value`` is not a bool (``"yes"`` or ``"false"`` would read as True)."""
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be a bool (True or False), not {type(value).__name__} "
                        f"({value!r})")


@contextlib.contextmanager
def call_options(*, label: str | None = None, session: str | None = None,
                 auto_cache: bool | None = None, lint: LintMode | None = None
                 ) -> Iterator[None]:
    """Per-call overrides for every wrapped call made inside the block (type-checker friendly
    twin of the ``promptcache_*`` keyword arguments; those win when both are given).

    Context-local (``contextvars``): asyncio tasks started inside the block inherit it, other
    threads and tasks do not. Blocks nest; an inner block overrides what it names.

    Example::

        with call_options(session="chat-42", label="support"):
            client.messages.create(...)

    Raises:
        TypeError: ``label`` or ``session`` is not a str, or ``auto_cache`` not a bool.
        ValueError: ``lint`` is not ``"warn"``, ``"error"`` or ``"off"``.
    """
    check_name("call_options(label=...)", label)
    check_name("call_options(session=...)", session)
    if auto_cache is not None:
        check_flag("call_options(auto_cache=...)", auto_cache)
    if lint is not None:
        check_lint("lint", lint)
    given = {"label": label, "session": session, "auto_cache": auto_cache, "lint": lint}
    merged = {**_CALL_OPTIONS.get(), **{k: v for k, v in given.items() if v is not None}}
    token = _CALL_OPTIONS.set(merged)
    try:
        yield
    finally:
        _CALL_OPTIONS.reset(token)


class PromptCacheWarning(UserWarning):
    """Warned by the wrapper: a lint finding (``lint="warn"``), a streamed response whose usage
    is unknown, or a request that breaks its session's cached prefix."""


@dataclass(frozen=True)
class SentRequest:
    """One request as the wrapper sent it (for :func:`promptcache.sdk.assert_cache_stable`).

    Attributes:
        provider: request shape (``"anthropic"``, ``"openai-chat"``, ``"openai-responses"``).
        payload: the JSON body as sent (after auto_cache), request options left out.
        session: the session it belongs to (None: none given).
        label: its label.
        start: when it was sent (seconds since the epoch).
        usage: its usage record, set when its response (or its stream's usage) arrives; None
            before that or when unknown (a dict of the response's usage is accepted too, when
            you build one yourself).
    """

    provider: str
    payload: Mapping[str, Any]
    session: str | None
    label: str | None
    start: float
    usage: Any = field(default=None, compare=False)


@dataclass
class _SessionState:
    payload: Mapping[str, Any]
    provider: str
    view: PrefixView
    digests: list[str]
    last_breakpoint: int | None
    plan: BreakpointPlan | None
    #: the request as the caller sent it (before auto_cache): its segments are the ones the
    #: render memo hands out again next time, so the next digest chain resumes from it
    first_view: PrefixView | None = None
    #: its usage record, once its response arrived (the live diff calibrates to it)
    usage: UsageRecord | None = None


@dataclass
class Call:
    """One observed request in flight (internal; passed to the stream proxies).

    Attributes:
        shape: request shape.
        kwargs: the keyword arguments to send.
        label / session: effective label and session.
        model: the request's model id (None if absent).
        start: when it was sent (seconds since the epoch; set just before sending).
        prefix_hash: digest of the prefix up to the last breakpoint (None: not computed).
        breakpoint_hashes / breakpoint_tokens: the chained digest and the prompt tokens up to
            each breakpoint, and to the entry the planner expects the request to read, in
            render order (empty: not computed).
        kept_prefix: whether the request still holds the prefix its session's previous
            request ended its cache at (None: no previous request, or unknown).
        state: its session state (None: not remembered), where its usage goes for the live
            diff of the session's next request.
    """

    shape: Shape
    kwargs: dict[str, Any]
    label: str | None
    session: str | None
    model: str | None = None
    start: float = 0.0
    prefix_hash: str | None = None
    breakpoint_hashes: tuple[str, ...] = ()
    breakpoint_tokens: tuple[int, ...] = ()
    kept_prefix: bool | None = None
    #: the request's ``prompt_cache_retention`` (OpenAI), for the usage record's session checks
    retention: str | None = None
    stream: bool = False
    state: _SessionState | None = None
    sent: SentRequest | None = None


#: Keys a client remembers as reported (:meth:`Observer.once`) before it starts over.
_MAX_REPORTED = 4096


@dataclass
class _Shared:
    """State shared by a wrapped client and its copies (``with_options`` / ``copy``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    sessions: dict[str | None, _SessionState] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)
    history: deque[SentRequest] = field(default_factory=lambda: deque(maxlen=256))


_SCALARS = (str, int, float, bool, type(None))
#: the same, for a hashed ``type(v) in`` test
_SCALAR_TYPES = frozenset(_SCALARS)


def _dump(value: Any, depth: int = 4) -> Any:
    """A snapshot of ``value``: its dicts and lists copied down to ``depth`` levels, pydantic
    models dumped as the SDKs dump them (``exclude_unset``, ``mode="json"``, ``by_alias``);
    scalars, and every node below ``depth``, shared.

    The copy is what the wrapper keeps of a sent request (:class:`SentRequest`, the session's
    previous request for the live diff): an agent loop appends to and edits its ``messages``
    list in place, and a kept reference would show the request as it is later, not as it was
    sent (new-user trial 13). Strings are immutable, so copying the containers is a snapshot
    of what those edits reach: :func:`body_of` copies the messages (or Responses input) six
    levels down (list -> message -> content list -> block -> a tool_result's content list ->
    its blocks, whose text an agent clears in place; review 13), and the other fields three.
    Below that (an image's ``source``, a tool input's nested values) nodes are shared. SDK
    response objects that callers pass back (``message.content``, Responses output items) sit
    within these levels too.
    """
    t = type(value)
    if t is dict:
        if depth == 0:
            return value
        # a C-level copy, then only the non-scalar values replaced (same keys, same order)
        out = value.copy()
        for k, v in out.items():
            if type(v) not in _SCALAR_TYPES:
                out[k] = _dump(v, depth - 1)
        return out
    if t is list:
        if depth == 0:
            return value
        return [v if type(v) in _SCALAR_TYPES else _dump(v, depth - 1) for v in value]
    if t in _SCALAR_TYPES:
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_unset=True, mode="json", by_alias=True)
    if depth == 0:
        return value
    if isinstance(value, Mapping):
        return _dump(dict(value), depth)
    if isinstance(value, list | tuple):
        return [_dump(v, depth - 1) for v in value]
    return value


def _given(value: Any) -> bool:
    name = type(value).__name__
    return name not in ("NotGiven", "Omit")


#: Body fields whose pydantic models may sit five levels down (tool_result content blocks).
_DEEP_KEYS = frozenset({"messages", "input"})


def body_of(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body the SDK will send for ``kwargs`` (request options left out, ``extra_body``
    merged over the fields, NOT_GIVEN / omit dropped, pydantic models dumped), as a snapshot:
    its containers are copies down to the content blocks (see :func:`_dump`), so the caller's
    later edits of its ``messages`` (or ``system``, ``tools``) do not reach it."""
    body = {k: v for k, v in kwargs.items() if k not in _REQUEST_OPTIONS and _given(v)}
    extra = kwargs.get("extra_body")
    if isinstance(extra, Mapping):
        body.update(extra)
    for key, value in body.items():
        if type(value) in _SCALAR_TYPES:
            continue
        # three levels below the body: a message's content blocks, a tool's schema (OpenAI:
        # tools[i].function.parameters) may be pydantic models; six in the messages, where a
        # tool_result's own content blocks sit two levels below its block (copied too)
        body[key] = _dump(value, 6 if key in _DEEP_KEYS else 3)
    return body


def helper_kwargs(shape: Shape, helper: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The ``create()`` keyword arguments an SDK helper method sends for ``kwargs``.

    The helpers (``messages.parse`` / ``messages.stream``, ``chat.completions.parse`` /
    ``stream``, ``responses.parse`` / ``stream``) take a structured-output *type* that the SDK
    turns into a JSON schema before sending: Anthropic ``output_format`` (merged into
    ``output_config.format``), OpenAI chat ``response_format``, Responses ``text_format``
    (into ``text.format``; ``parse_as`` only reads the answer). This is that conversion, made
    with the SDK's own schema functions, so lint and the live diff see the body as sent. A
    ``stream`` helper sends ``stream: true``. The caller's mapping is not mutated.

    A type the schema functions reject is left out of the payload (the SDK raises its own error
    for it when sending).
    """
    out = dict(kwargs)
    try:
        if shape == "anthropic":
            fmt = out.pop("output_format", None)
            if fmt is not None and _given(fmt) and not isinstance(fmt, Mapping):
                cfg = out.get("output_config")
                base = dict(cfg) if isinstance(cfg, Mapping) else {}
                base["format"] = _anthropic_output_format(fmt)
                out["output_config"] = base
        elif shape == "openai-chat":
            rf = out.get("response_format")
            if rf is not None and _given(rf) and not isinstance(rf, Mapping):
                del out["response_format"]
                from openai.lib._parsing._completions import type_to_response_format_param

                out["response_format"] = type_to_response_format_param(rf)
        else:
            out.pop("parse_as", None)
            fmt = out.pop("text_format", None)
            if fmt is not None and _given(fmt):
                from openai.lib._parsing._responses import type_to_text_format_param

                text = out.get("text")
                base = dict(text) if isinstance(text, Mapping) else {}
                base["format"] = type_to_text_format_param(fmt)
                out["text"] = base
    except Exception as exc:
        fault("reading the structured-output type", exc,
              "the request is checked without its schema")
    if helper == "stream":
        out["stream"] = True
    return out


def _anthropic_output_format(fmt: Any) -> dict[str, Any]:
    """What ``messages.parse`` / ``stream`` send for ``output_format=fmt`` (a type)."""
    import anthropic
    import pydantic

    schema = pydantic.TypeAdapter(fmt).json_schema()
    return {"type": "json_schema", "schema": anthropic.transform_schema(schema)}


def _unmarkable_instructions(call: Call, view: PrefixView, policy: Any,
                             plan: BreakpointPlan) -> str | None:
    """The warning for a GPT-5.6+ Responses request whose shared prompt sits in
    ``instructions``, or None. Those models write and read only at breakpoints, and
    ``instructions`` cannot carry one: with no other place for a marker, each call writes its
    whole prompt at the implicit breakpoint on its newest input, which only the next turn of
    the same conversation reads; every new conversation writes the instructions again
    (new-user trial 9; trial 12 for the continuation; source: ../shared/reference/hosted-api-rules.md 2.3,
    https://developers.openai.com/api/docs/guides/prompt-caching)."""
    if call.shape != "openai-responses" or not getattr(policy, "explicit_breakpoints", False):
        return None
    if any(b.source in ("planner", "user") for b in plan.breakpoints):
        return None
    instructions = next((s for s in view.segments if s.path == "instructions"), None)
    minimum = int(getattr(policy, "min_cacheable_tokens", 0) or 0)
    if instructions is None or instructions.end_token < minimum:
        return None
    return (f"promptcache: auto_cache: {policy.model_id} caches only at breakpoints, and "
            f"`instructions` ({instructions.tokens} tokens) cannot carry one: each call writes "
            "its prompt at the implicit breakpoint on its newest input, which only the next "
            "turn of the same conversation reads, so every new conversation writes the "
            "instructions again. Send the shared prompt as a leading developer message in `input` (as "
            "PromptBuilder.to_openai_responses does) so a breakpoint can close it.")


def _collecting(tracker: Any, method: str) -> Any:
    """The tracker's ``add_collecting`` / ``aadd_collecting`` (``method``: "add" / "aadd"),
    or None: the observer then calls ``method`` itself. None for a duck-typed tracker and for
    a :class:`~promptcache.usage.UsageTracker` subclass that overrides ``method`` (a subclass
    forwarding each record to its metrics: the wrapper must keep calling its override)."""
    from promptcache.usage import UsageTracker

    if not isinstance(tracker, UsageTracker):
        return None
    if getattr(type(tracker), method, None) is not getattr(UsageTracker, method):
        return None
    return getattr(tracker, method + "_collecting", None)


class Observer:
    """Settings of one ``wrap()`` call plus the state its copies share.

    Args:
        tracker: where usage records go (a new :class:`~promptcache.usage.UsageTracker` when
            None).
        label / session: defaults for every request (overridable per call).
        auto_cache: plan cache markers on outgoing requests.
        lint: ``"warn"``, ``"error"`` or ``"off"``.
        shared: state shared with other observers (copies of the client).
    """

    def __init__(self, *, tracker: UsageTracker | None, label: str | None, session: str | None,
                 auto_cache: bool, lint: LintMode, shared: _Shared | None = None) -> None:
        check_lint("lint", lint)
        check_name("label", label)
        check_name("session", session)
        check_flag("auto_cache", auto_cache)
        _register_drain()
        if tracker is None:
            from promptcache.usage import UsageTracker

            tracker = UsageTracker()
        elif not callable(getattr(tracker, "add", None)):
            raise TypeError(f"tracker must be a promptcache.usage.UsageTracker (an object with "
                            f"an add(record) method), not {type(tracker).__name__} "
                            f"({tracker!r})")
        self.tracker = tracker
        self.label = label
        self.session = session
        self.auto_cache = bool(auto_cache)
        self.lint: LintMode = lint
        self.shared = shared if shared is not None else _Shared()

    # ------------------------------------------------------------------ reporting
    def once(self, key: str) -> bool:
        """True the first time ``key`` is seen by this client (and its copies)."""
        if key in self.shared.reported:  # seen: no lock needed (a read of a set)
            return False
        with self.shared.lock:
            if key in self.shared.reported:
                return False
            if len(self.shared.reported) >= _MAX_REPORTED:
                # bounded: a long-lived client forgets what it reported and may say it again
                self.shared.reported.clear()
            self.shared.reported.add(key)
            return True

    def warn_once(self, key: str, message: str) -> None:
        """``warnings.warn`` ``message`` and log it (see :func:`_warn_both`), once per ``key``."""
        if self.once(key):
            _warn_both(message, stacklevel=4)

    # ------------------------------------------------------------------ before sending
    def prepare(self, shape: Shape, kwargs: dict[str, Any], helper: str | None = None) -> Call:
        """Strip the overrides, plan, lint and diff one request (see the module docstring).

        ``helper``: ``"parse"`` or ``"stream"`` when ``kwargs`` are those of an SDK helper
        method (``messages.parse``, ``chat.completions.stream``, ...): the payload is then the
        body that helper sends (:func:`helper_kwargs`); None for ``create``.

        Returns:
            The :class:`Call` to send (``call.kwargs``: what goes to the SDK method).

        Raises:
            PromptCacheLintError: ``lint="error"`` and the request has error- or
                warning-severity findings.
            TypeError: ``promptcache_label=`` / ``promptcache_session=`` is not a str (or
                None), or ``promptcache_auto_cache=`` not a bool (None: not given).
            ValueError: ``promptcache_lint=`` is not one of the three modes.

            All before anything is sent (caller mistakes). Nothing else: internal faults are
            logged.
        """
        if DROPPED_STREAMS:
            drain_dropped_streams()
        kwargs = dict(kwargs)
        scoped = _CALL_OPTIONS.get()
        label = kwargs.pop("promptcache_label", scoped.get("label", self.label))
        check_name("promptcache_label", label)
        session = kwargs.pop("promptcache_session", scoped.get("session", self.session))
        check_name("promptcache_session", session)
        # None: not given (the scoped call_options, else the wrapper's setting), as in
        # call_options(auto_cache=None, lint=None)
        auto = kwargs.pop("promptcache_auto_cache", None)
        if auto is None:
            auto = scoped.get("auto_cache", self.auto_cache)
        check_flag("promptcache_auto_cache", auto)
        lint: LintMode | None = kwargs.pop("promptcache_lint", None)
        if lint is None:
            lint = scoped.get("lint", self.lint)
        check_lint("promptcache_lint", lint)
        call = Call(shape, kwargs, label, session, stream=kwargs.get("stream") is True)
        blocking: list[Any] = []
        try:
            blocking = self._prepare(call, auto, lint, helper)
        except InvalidRequestError as exc:
            # a request promptcache's renderer cannot read: most often malformed (the API
            # answers 400), else a shape it does not know; either way not a fault of
            # promptcache's own to trace: one line, once per path and reason
            self.warn_once(f"invalid-request:{exc}",
                           f"promptcache: cannot read this request ({exc}); sending it "
                           "unchanged, without planning, lint or live diff")
        except Exception as exc:  # promptcache's own fault: the call goes on unchanged
            fault("request preparation", exc, "sending the request unchanged")
        if blocking:
            lines = "; ".join(f"{f.code} {f.path or ''}: {f.message}" for f in blocking)
            raise PromptCacheLintError(
                f"promptcache lint found {len(blocking)} problem(s) before sending: {lines}",
                blocking)
        return call

    def _prepare(self, call: Call, auto: bool, lint: LintMode, helper: str | None = None
                 ) -> list[Any]:
        body = body_of(call.kwargs if helper is None
                       else helper_kwargs(call.shape, helper, call.kwargs))
        model = body.get("model")
        call.model = model if isinstance(model, str) else None
        retention = body.get("prompt_cache_retention")
        if retention is not None and isinstance(retention, str):
            call.retention = retention
        with self.shared.lock:
            prev = self.shared.sessions.get(call.session)
        if prev is not None and prev.provider != call.shape:
            prev = None
        if not auto and lint == "off" and call.session is None:
            self._remember(call, body, None, None)
            return []
        from promptcache.planner import prefix_digests
        from promptcache.prefix import render

        view = first = render(body, call.shape, model=call.model)
        if prev is not None and prev.first_view is not None:
            prefix_digests(view, prev.first_view)  # resumes the previous request's chain
        plan = None
        if auto:
            body, view, plan = self._auto_cache(call, body, view, prev, lint)
        blocking = self._lint(call, body, view, prev, lint) if lint != "off" else []
        self._remember(call, body, view, plan, prev, first)
        return blocking

    def _auto_cache(self, call: Call, body: dict[str, Any], view: PrefixView,
                    prev: _SessionState | None, lint: LintMode = "off"
                    ) -> tuple[dict[str, Any], PrefixView, BreakpointPlan | None]:
        from promptcache.catalog import get_policy
        from promptcache.planner import apply_plan, plan_breakpoints, prefix_digests
        from promptcache.prefix import remark, render

        if call.model is None:
            return body, view, None
        try:
            policy = get_policy(call.model)
        except UnknownModelError:  # e.g. a vLLM / SGLang model name: nothing to plan with
            self.warn_once(f"auto-cache-model:{call.model}",
                           f"promptcache: auto_cache: the catalog does not know model "
                           f"{call.model!r}; its requests are sent without planned cache "
                           f"markers or prompt_cache_key")
            return body, view, None
        previous: Any = None
        if prev is not None:
            previous = prev.plan if prev.plan is not None else prev.view
        plan = plan_breakpoints(view, policy, previous)
        # with lint on, rule PC308 reports the same request (once, or as an error)
        unmarkable = _unmarkable_instructions(call, view, policy, plan) if lint == "off" else None
        if unmarkable is not None:
            self.warn_once(f"auto-cache-instructions:{policy.model_id}", unmarkable)
        for e in plan.marker_edits:
            # lint runs on the repaired request, so say here what happened to the caller's marker
            where = f" to {e.to_path}" if e.to_path else ""
            self.warn_once(f"marker-edit:{e.action}:{e.path}",
                           f"promptcache: auto_cache: {e.action.replace('_', ' ')} of your "
                           f"cache marker at {e.path}{where}: {e.reason}")
        for name in plan.dropped_params:
            self.warn_once(f"dropped-param:{policy.model_id}:{name}",
                           f"promptcache: auto_cache: removed {name} from the request: "
                           f"{policy.model_id} does not take it (GPT-5.6+ only; the API "
                           "answers 400)")
        new = apply_plan(body, plan, share_unchanged=True)
        if new == body:
            return body, view, plan
        extra = call.kwargs.get("extra_body")
        extra_keys = set(extra) if isinstance(extra, Mapping) else set()
        new_extra = dict(extra) if isinstance(extra, Mapping) else None
        for key, value in new.items():
            if key in body and body[key] == value:
                continue
            if key in extra_keys and new_extra is not None:
                new_extra[key] = value
            else:
                call.kwargs[key] = value
        for key in plan.dropped_params:
            if key in body and key not in new:
                call.kwargs.pop(key, None)
                if new_extra is not None:
                    new_extra.pop(key, None)
        if new_extra is not None:
            call.kwargs["extra_body"] = new_extra
        paths = marker_paths(plan)
        final = remark(view, new, paths) if paths is not None else None
        if final is None:
            return new, render(new, call.shape, model=call.model), plan
        prefix_digests(final, view)  # markers are not content: the first view's chain holds
        return new, final, plan

    def _lint(self, call: Call, body: Mapping[str, Any], view: PrefixView,
              prev: _SessionState | None, lint: LintMode) -> list[Any]:
        # the previous request feeds the lookback rule only within an explicit session: without
        # one, the last request may belong to another conversation
        previous = None if prev is None or call.session is None else (prev.view, prev.payload)
        findings = lint_views(view, body, call.model, previous)
        blocking: list[Any] = []
        for f in findings:
            sev = getattr(f.severity, "value", f.severity)
            if lint == "error" and sev in ("error", "warning"):
                blocking.append(f)
                continue
            # one problem, one warning: keyed by rule and place, not by the matched value (a
            # clock in the system prompt matches another value on every request; trial 16)
            if self.once(f"lint:{f.code}:{f.path or ''}"):
                msg = f"promptcache {f.code} ({sev}) at {f.path or '<request>'}: {f.message}"
                if f.fix:
                    msg += f" Fix: {f.fix}"
                if sev == "info":
                    # advice, not a break (e.g. PC401: an OpenAI prompt under 1,024 tokens,
                    # which every short chat is): logged at info level, never a warning
                    logger.info("%s", msg)
                else:
                    _warn_both(msg, stacklevel=5)
        return blocking

    def _remember(self, call: Call, body: Mapping[str, Any], view: PrefixView | None,
                  plan: BreakpointPlan | None, prev: _SessionState | None = None,
                  first: PrefixView | None = None) -> None:
        """Live diff against the session's previous request, then store this one."""
        entry = call.sent = SentRequest(call.shape, body, call.session, call.label, time.time())
        if view is None:
            with self.shared.lock:
                self.shared.history.append(entry)
            return
        from promptcache.planner import prefix_digests

        # as the provider caches the request: on a model that strips earlier thinking blocks on
        # a plain user turn, the chain leaves them out, so the previous request's entries past
        # one are lost and the live diff says why (trial 19)
        policy = _stripping_policy(call.model) if call.shape == "anthropic" else None
        digests = prefix_digests(view, policy=policy) if policy is not None \
            else prefix_digests(view)
        last_bp = last_breakpoint(view)
        if last_bp is not None:
            call.prefix_hash = digests[last_bp]
            # the entries the request writes (its breakpoints) and the one the planner expects
            # it to read through the lookback (an earlier request's): the usage tracker groups
            # concurrent cold writes by the longest of these two requests share
            end_set = {s.index for s in view.breakpoints()} or {last_bp}
            read = plan.read_entry if plan is not None else None
            if read is not None and read.segment_index < len(digests):
                end_set.add(read.segment_index)
            ends = sorted(end_set)
            call.breakpoint_hashes = tuple(digests[i] for i in ends)
            if policy is not None:  # the prefix sizes the hashes stand for (thinking stripped)
                from promptcache.planner import cached_prefix_tokens

                cached_ends, _ = cached_prefix_tokens(view, policy)
                call.breakpoint_tokens = tuple(cached_ends[i] for i in ends)
            else:
                call.breakpoint_tokens = tuple(view.segments[i].end_token for i in ends)
        if prev is not None and call.session is not None:
            # whether the previous request's cached prefix is still this one's (the tracker
            # tells a changed prefix from an expiry or eviction by it)
            loss = prefix_loss(prev.payload, prev.view, prev.digests, prev.last_breakpoint,
                               body, view, digests, call.shape, call.model)
            if loss is not None and loss.kind == "stored_prompt":
                call.kept_prefix = False
                logger.warning("promptcache: session %r: cause stored_prompt_changed; %s",
                               call.session, loss.detail)
            elif prev.last_breakpoint is not None:
                call.kept_prefix = loss is None
                if loss is not None and loss.kind == "content":
                    self._report_divergence(call, prev, body, loss.cut)
                elif loss is not None:  # the diff decides whether the setting loses it
                    call.kept_prefix = not self._report_divergence(
                        call, prev, body, loss.cut, setting=loss.detail or loss.kind)
        state = _SessionState(body, call.shape, view, digests, last_bp, plan, first)
        call.state = state
        with self.shared.lock:
            self.shared.sessions[call.session] = state
            self.shared.history.append(entry)

    def _report_divergence(self, call: Call, prev: _SessionState, body: Mapping[str, Any],
                           cut: int, setting: str | None = None) -> bool:
        """Log why the request loses the previous request's cached prefix; True when logged.

        ``setting``: None when the contents diverge at segment ``cut`` (logged unless the diff
        finds a chained turn healthy); else the request setting that changed (``"model"``,
        ``"tool_choice"``...) or ``"breakpoints"`` (none reaches the previous entry), logged only
        when the diff finds a miss."""
        where = (prev.view.segments[cut].path if cut < len(prev.view.segments)
                 else "<end of request>")
        try:
            # calibrated to the previous request's reported usage when its response arrived;
            # each body's own model (a model given here would hide a model switch)
            result = _diff(prev.payload, body, call.shape, None, usage_a=prev.usage)
            if result.verdict != "miss_explained" and (
                    setting is not None or stored_prompt_fields(body, call.shape)):
                # B's prompt starts with stored items the server prepends (previous_response_id,
                # conversation, prompt): its body holds only the new input, so the bodies
                # diverge at the start (new-user trial 12); only a miss the diff finds is a break
                return False
            explanation = _explanation(result)
        except Exception as exc:  # the diff's fault, not the caller's
            if setting is not None:
                fault("live diff", exc, "the request is sent unchanged")
                return False
            explanation = f"(diff failed: {type(exc).__name__}: {exc})"
        if setting == "model":
            logger.warning("promptcache: session %r: the request's model changed (%s -> %s): "
                           "caches are per model, so the cached prefix is lost: %s",
                           call.session, prev.payload.get("model"), body.get("model"),
                           explanation)
            return True
        if setting is not None:
            what = ("its breakpoints no longer reach the previous request's cache entry"
                    if setting == "breakpoints" else f"its {setting} changed")
            logger.warning("promptcache: session %r: the request keeps the previous one's "
                           "content, but %s, so the cached prefix is lost: %s", call.session,
                           what, explanation)
            return True
        logger.warning(
            "promptcache: session %r: the request diverges from the previous one at %s, before "
            "its last breakpoint, so the cached prefix from there on is lost: %s", call.session,
            where, explanation)
        return True

    # ------------------------------------------------------------------ after the response
    def record_response(self, call: Call, response: Any, end: float,
                        first_token: float | None = None) -> None:
        """Parse a non-streamed response's usage and add it to the tracker.

        Never raises (the response has arrived and is the caller's): a fault is logged.
        """
        try:
            rec = self._parsed_record(call, response, end, first_token)
            if rec is not None:
                self.add(rec, call)
        except Exception as exc:
            fault("usage tracking", exc, "the response is returned unchanged")

    async def arecord_response(self, call: Call, response: Any, end: float) -> None:
        """:meth:`record_response` for asyncio code (sink writes in a worker thread)."""
        try:
            rec = self._parsed_record(call, response, end, None)
            if rec is None:
                return
            self._keep_usage(call, rec)
            collecting = _collecting(self.tracker, "aadd")
            try:
                if collecting is not None:  # a UsageTracker: one failing sink starves no other
                    events, errors = await collecting(rec)
                    self._sink_faults(errors)
                else:
                    events = await self.tracker.aadd(rec)
            except Exception as exc:
                fault("usage tracking", exc, "the response is returned unchanged")
                events = ()
            self._log_events(events)
            self._check_prices(rec)
        except Exception as exc:
            fault("usage tracking", exc, "the response is returned unchanged")

    @staticmethod
    def _sink_faults(errors: list[Exception]) -> None:
        for exc in errors:
            fault("usage tracking", exc, "the response is returned unchanged")

    def _parsed_record(self, call: Call, response: Any, end: float,
                       first_token: float | None) -> UsageRecord | None:
        """The response's usage record; an unknown one when its usage cannot be read; None
        (fault logged) when even that cannot be built."""
        try:
            from promptcache.usage import parse_usage

            return parse_usage(response, provider=_USAGE_FORMAT[call.shape],
                               **self._fields(call, end, first_token, response))
        except InvalidRequestError as exc:
            # the response's own shape (no usage object: a proxy or server that leaves it
            # out), not promptcache's fault: one line per shape and reason, no traceback, not
            # one per call (new-user trial 23)
            if self.once(f"usage-unreadable:{call.shape}:{exc}"):
                logger.warning("promptcache: reading the response's usage failed (%s); "
                               "recording it as unknown (reported once per reason)", exc)
        except Exception as exc:
            fault("reading the response's usage", exc, "recording it as unknown")
        try:
            return self.unknown_record(call, end, first_token, "usage_unparsable")
        except Exception as exc:
            fault("recording unknown usage", exc, "the response is returned unchanged")
            return None

    def _fields(self, call: Call, end: float, first_token: float | None,
                response: Any = None) -> dict[str, Any]:
        fields = self.stream_fields(call)
        fields["end"] = end
        if first_token is not None:
            fields["first_token"] = first_token
        rid = getattr(response, "_request_id", None)
        if isinstance(rid, str):
            fields["request_id"] = rid
        return fields

    def stream_fields(self, call: Call) -> dict[str, Any]:
        """Record fields known before a stream starts (label, session, start, the prefix
        digests, whether the session's previous prefix is kept, the request's
        ``prompt_cache_retention``)."""
        fields: dict[str, Any] = {k: v for k, v in {
            "label": call.label, "session": call.session,
            "start": call.start, "prefix_hash": call.prefix_hash,
            "kept_prefix": call.kept_prefix,
            "prompt_cache_retention": call.retention}.items() if v is not None}
        if call.breakpoint_hashes:
            fields["breakpoint_hashes"] = call.breakpoint_hashes
            fields["breakpoint_tokens"] = call.breakpoint_tokens
        return fields

    def unknown_record(self, call: Call, end: float, first_token: float | None,
                       flag: str) -> UsageRecord:
        """A record whose counts are unknown (None), flagged with ``flag``."""
        from promptcache.usage import UsageRecord

        return UsageRecord(provider=_USAGE_FORMAT[call.shape], model=call.model,
                           first_token=first_token, end=end, flags=(flag,),
                           **self.stream_fields(call))

    def add(self, rec: UsageRecord, call: Call | None = None) -> None:
        """Add a record to the tracker; a failing sink or price lookup is logged, not raised.

        ``call``: the request the record belongs to; its session state keeps the record, so
        the live diff of the session's next request is calibrated to this reported usage."""
        if call is not None:
            self._keep_usage(call, rec)
        collecting = _collecting(self.tracker, "add")
        try:
            if collecting is not None:  # a UsageTracker: one failing sink starves no other
                events, errors = collecting(rec)
                self._sink_faults(errors)
            else:
                events = self.tracker.add(rec)
        except Exception as exc:
            fault("usage tracking", exc, "the response is returned unchanged")
            events = ()
        self._log_events(events)
        self._check_prices(rec)

    def _keep_usage(self, call: Call, rec: UsageRecord) -> None:
        if rec.flags and not _OWN_FLAGS.isdisjoint(rec.flags):
            return
        with self.shared.lock:
            if call.state is not None:
                call.state.usage = rec
            if call.sent is not None:  # frozen for users; filled once, when the usage arrives
                object.__setattr__(call.sent, "usage", rec)

    def _check_prices(self, rec: UsageRecord) -> None:
        """Once per model: log why its cost will be unknown (even when a sink failed first)."""
        if rec.model is None or not self.once(f"priced:{rec.model}"):
            return
        try:
            table = self.tracker.prices_for(rec)
        except Exception as exc:
            fault("price lookup", exc, "costs stay unknown")
            return
        if table is None:
            logger.warning("promptcache: no prices for model %r (%s); its cost is unknown",
                           rec.model, _price_error(rec.model))

    def _log_events(self, events: tuple[UsageEvent, ...]) -> None:
        for ev in events:
            if ev.kind == "unpriced":
                continue  # reported once per model by _check_prices
            if ev.kind == "usage_anomaly":
                if set(ev.record.flags) <= _OWN_FLAGS:
                    continue  # already reported when the record was made
                # once per kind of anomaly (an agent that leaves its Anthropic streams early
                # flags each one stream_incomplete: one line, not one per call; trial 23); the
                # tracker's events keep every one
                if not self.once("anomaly:" + ",".join(sorted(ev.record.flags))):
                    continue
                logger.warning("promptcache: %s: %s (logged once per kind; the tracker's events "
                               "keep every one)", ev.kind, ev.message)
                continue
            logger.warning("promptcache: %s: %s", ev.kind, ev.message)


@functools.lru_cache(maxsize=64)
def _stripping_policy(model: str | None) -> Any:
    """The catalog policy of ``model`` when it strips earlier thinking blocks on a plain user
    turn (``strips_prior_thinking``, hosted-api-rules.md 1.7), else None."""
    if model is None:
        return None
    from promptcache.catalog import find_policy

    policy = find_policy(model)
    return policy if getattr(policy, "strips_prior_thinking", False) else None


@functools.lru_cache(maxsize=4)
def _setting_keys(family: str) -> tuple[str, ...]:
    """Top-level request fields whose change invalidates cache entries without changing the
    cached content: the keys of the catalog's invalidation table (``tool_choice``,
    ``thinking``, ``output_config``, ``speed``...; hosted-api-rules.md 1.7 and 2.1). A
    ``model`` change is checked before these (:func:`prefix_loss`). Routing hints
    (``prompt_cache_key``) are left out: a change there makes a read uncertain, not lost."""
    from promptcache.catalog import invalidation_rules

    keys = {k.split(".")[0] for r in invalidation_rules(family)  # type: ignore[arg-type]
            for k in r.keys} - {"prompt_cache_key", "model"}
    return tuple(sorted(keys))


def _changed_setting(before: Mapping[str, Any], after: Mapping[str, Any],
                     shape: str) -> str | None:
    """The first of :func:`_setting_keys` whose value differs between two bodies, or None."""
    for key in _setting_keys("anthropic" if shape == "anthropic" else "openai"):
        if before.get(key) != after.get(key):
            return key
    return None


def _reaches_entry(before: PrefixView, before_bp: int | None, view: PrefixView,
                   model: str | None) -> bool:
    """Whether some breakpoint of ``view`` can read the entry the previous request ``before``
    wrote at its last breakpoint (segment ``before_bp``): on Anthropic a read looks back at
    most the policy's lookback (20 positions) from each breakpoint (hosted-api-rules.md 1.4);
    other providers have no such limit. True when it cannot be told (no policy, no previous
    breakpoint)."""
    if view.provider != "anthropic" or before_bp is None:
        return True
    from promptcache.catalog import find_policy

    policy = find_policy(model)
    lookback = getattr(policy, "lookback_positions", None) if policy is not None else None
    if not lookback:
        return True
    start = before.segments[before_bp].position
    return any(0 <= s.position - start <= lookback for s in view.breakpoints())


@dataclass(frozen=True, slots=True)
class PrefixLoss:
    """Why a request may not read what the previous request of its session cached.

    Attributes:
        kind: ``"stored_prompt"`` (a Responses stored prompt template changed: certain, the
            bodies cannot show where), ``"content"`` (the contents diverge at or before the
            previous request's last breakpoint), ``"setting"`` (a request setting that
            invalidates entries changed: ``model``, ``tool_choice``, ``thinking``...) or
            ``"breakpoints"`` (no breakpoint reaches the previous entry through the lookback).
            The last three are suspicions the diff confirms or not.
        detail: the stored-prompt sentence, the changed setting's name, or "".
        cut: the first segment whose chained digest differs.
    """

    kind: Literal["stored_prompt", "content", "setting", "breakpoints"]
    detail: str
    cut: int


def prefix_loss(before: Mapping[str, Any], before_view: PrefixView, before_digests: list[str],
                before_bp: int | None, body: Mapping[str, Any], view: PrefixView,
                digests: list[str], shape: str, model: str | None) -> PrefixLoss | None:
    """What may make ``body`` lose the prefix ``before`` (the session's previous request)
    cached, checked in that order (:class:`PrefixLoss`); None when nothing does. Shared by
    the live diff and :func:`~promptcache.sdk.assert_cache_stable` (new-user trial 14: both
    missed model, setting and lookback changes, which leave the content digests equal)."""
    if shape == "openai-responses" and (body.get("prompt") is not None
                                        or before.get("prompt") is not None):
        from promptcache.diff._engine import stored_prompt_change

        why = stored_prompt_change(before, body, shape)
        if why is not None:  # the digests (of the bodies) cannot see the template
            return PrefixLoss("stored_prompt", why, 0)
    cut = first_divergence(before_digests, digests)
    if before.get("model") != body.get("model"):
        # the digests are seeded with the model, so they differ from the first segment: the
        # cause is the switch, not a change there (new-user trial 16)
        return PrefixLoss("setting", "model", cut)
    if before_bp is not None and cut <= before_bp:
        return PrefixLoss("content", "", cut)
    setting = _changed_setting(before, body, shape)
    if setting is not None:
        return PrefixLoss("setting", setting, cut)
    if not _reaches_entry(before_view, before_bp, view, model):
        return PrefixLoss("breakpoints", "", cut)
    return None


def marker_paths(plan: BreakpointPlan) -> set[str] | None:
    """Segment paths whose cache marker ``apply_plan(payload, plan)`` may change (markers set,
    dropped, moved or re-timed); None when the plan also deletes a block (an empty one the
    caller marked), which shifts the paths after it."""
    paths = {b.path for b in plan.breakpoints if b.source in ("planner", "user")}
    for e in plan.marker_edits:
        if e.action == "remove_block":
            return None
        paths.add(e.path)
    return paths


_RULES: list[Any] | None = None


def lint_views(view: PrefixView, body: Mapping[str, Any], model: str | None,
               previous: tuple[PrefixView, Mapping[str, Any]] | None) -> list[Any]:
    """``promptcache.lint.lint_request`` on views the wrapper already rendered.

    Same rules (every stable request-level rule) and the same context as ``lint_request``;
    reusing the views saves two renders per call (the request and its predecessor).
    """
    global _RULES
    from promptcache.lint.engine import RequestContext
    from promptcache.lint.facts import facts_for

    if _RULES is None:
        from promptcache.lint.rules import all_rules

        _RULES = [r() for r in all_rules() if r.status == "stable" and "request" in r.inputs]
    ctx = RequestContext(view, body, facts_for(view.provider, model or view.model))
    if previous is not None:
        ctx.previous = RequestContext(previous[0], previous[1], ctx.facts)
    out: list[Any] = []
    for rule in _RULES:
        out.extend(rule.check_request(ctx))
    return out


def _price_error(model: str | None) -> str:
    if model is None:
        return "the response names no model"
    try:
        from promptcache.catalog import get_prices

        get_prices(model)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "the tracker's price table failed"


def last_breakpoint(view: PrefixView) -> int | None:
    """Index of the segment the request's last cache entry ends at, or None.

    Anthropic and OpenAI explicit mode: the last segment carrying a breakpoint (markers and the
    automatic one). OpenAI implicit caching caches the whole prompt: the last segment.
    """
    bps = view.breakpoints()
    if bps:
        return max(s.index for s in bps)
    if view.provider != "anthropic" and view.segments:
        return len(view.segments) - 1
    return None


def first_divergence(before: list[str], after: list[str]) -> int:
    """Index of the first segment whose chained digest differs (``len(before)`` when ``after``
    extends ``before``; ``len(after)`` when ``after`` is a strict prefix of ``before``)."""
    n = min(len(before), len(after))
    if n and before[n - 1] == after[n - 1]:  # chained digests: equal at n-1 means equal before
        return n
    lo, hi = 0, n
    while lo < hi:  # first index whose digests differ (they differ from there on)
        mid = (lo + hi) // 2
        if before[mid] == after[mid]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def explain_break(a: Mapping[str, Any], b: Mapping[str, Any], provider: str,
                  model: str | None, usage_a: Any = None) -> str:
    """One paragraph: the diff's cause code, where, and the fix, for request ``b`` after ``a``
    (``usage_a``: ``a``'s reported usage, a :class:`~promptcache.usage.UsageRecord`, to which
    the token counts are calibrated; None: estimates)."""
    return _explanation(_diff(a, b, provider, model, usage_a=usage_a))


def _diff(a: Mapping[str, Any], b: Mapping[str, Any], provider: str, model: str | None,
          usage_a: Any = None) -> Any:
    from promptcache.diff import diff

    return diff(a, b, provider=provider, model=model, usage_a=usage_a)


def _explanation(result: Any) -> str:
    """One paragraph from a :class:`~promptcache.diff.DiffResult` (see :func:`explain_break`)."""
    parts = [f"cause {result.cause}"]
    primary = result.primary
    if primary is not None:
        parts.append(primary.title)
        if primary.path:
            parts.append(f"at {primary.path}")
    div = result.divergence
    if div is not None:
        parts.append(f"first divergence {div.path} (tier {div.tier}, token {div.token_offset}): "
                     f"{div.before!r} -> {div.after!r}")
    if result.lost_tokens is not None:
        parts.append(f"{result.lost_tokens} cached tokens lost")
    if primary is not None and primary.fix_hint:
        parts.append(f"fix: {primary.fix_hint}")
    return "; ".join(parts)
