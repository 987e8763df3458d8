"""Test helpers for users' own suites: the requests a wrapped client sent, and
:func:`assert_cache_stable`, which fails with the diff's explanation when a request breaks the
prefix the previous request of its session cached.

Use with the pytest plugin's local-backend fixtures, or with any wrapped client::

    def test_agent_keeps_its_prefix(promptcache_anthropic):
        client = promptcache.wrap(promptcache_anthropic, session="t")
        run_my_agent(client)
        assert_cache_stable(client)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from promptcache._errors import InvalidRequestError
from promptcache.sdk._observe import SentRequest, explain_break, last_breakpoint, prefix_loss

__all__ = ["assert_cache_stable", "sent_requests"]


def sent_requests(client: Any) -> list[SentRequest]:
    """The requests a wrapped client (and its copies) sent, oldest first (the last 256).

    Raises:
        TypeError: ``client`` was not returned by :func:`promptcache.sdk.wrap`.
    """
    from promptcache.sdk._wrap import observer_of

    obs = observer_of(client)
    with obs.shared.lock:
        return list(obs.shared.history)


def _loses_reads(a: SentRequest, b: SentRequest, provider: str, model: str | None) -> bool:
    """Whether the diff of ``b`` after ``a`` finds a miss (lost reads beyond its tolerance; a
    "cannot tell" verdict, e.g. ``b`` chained on another response, is not one),
    with their reported usage where known: ``b``'s observed read settles it (an entry an
    earlier request wrote and ``a`` only read is read by ``b`` too)."""
    from promptcache.diff import diff

    return diff(a.payload, b.payload, provider=provider, model=model, usage_a=a.usage,
                usage_b=b.usage).verdict not in ("no_miss", "cannot_tell")


def _as_sent(item: Any, provider: str | None) -> SentRequest:
    if isinstance(item, SentRequest):
        return item
    if isinstance(item, Mapping):
        from promptcache.lint.sources.request_json import find_request, usage_of
        from promptcache.prefix import detect_provider

        found = find_request(item)  # a bare body, or a log record with it under "request"...
        if found is None:
            raise InvalidRequestError("", "no request in this mapping: expected a request "
                                          "body (with messages, input or system) or a log "
                                          "record holding one under request / body / payload")
        body = found[0]
        usage = usage_of(item) if found[1] else None  # the response's usage beside it
        return SentRequest(provider or detect_provider(body), body, None, None, 0.0,
                           usage or None)  # an empty usage object: unknown
    raise TypeError(f"assert_cache_stable takes request payloads (mappings) or SentRequest "
                    f"records, not {type(item).__name__}")


def _items(requests: Any) -> list[Any]:
    """``requests`` as a list, refusing the two usual mistakes with a message that names them:
    an SDK client that was not wrapped, and one request (a mapping) instead of a list.

    Raises:
        TypeError: ``requests`` is an unwrapped anthropic / openai client, a single request
            mapping or :class:`SentRequest`, or not iterable.
    """
    module = type(requests).__module__.split(".")[0]
    if module in ("anthropic", "openai") and hasattr(requests, "with_options"):
        raise TypeError(f"assert_cache_stable got an unwrapped {type(requests).__name__} client: "
                        "wrap it first (client = promptcache.wrap(client, session=...)) and "
                        "make the calls through the wrapped client, then pass that")
    if isinstance(requests, Mapping | SentRequest):
        raise TypeError("assert_cache_stable takes the requests in send order (a list, or a "
                        "wrapped client), not one request: pass [request_a, request_b, ...]")
    if isinstance(requests, str | bytes):
        raise TypeError(f"assert_cache_stable takes request payloads (mappings), not "
                        f"{type(requests).__name__}: parse JSON text with json.loads first")
    try:
        return list(requests)
    except TypeError:
        raise TypeError(f"assert_cache_stable takes the requests in send order (a list of "
                        f"payloads or SentRequest records, or a wrapped client), not "
                        f"{type(requests).__name__}") from None


def assert_cache_stable(requests: Iterable[SentRequest | Mapping[str, Any]] | Any, *,
                        provider: str | None = None, model: str | None = None) -> None:
    """Fail when a request breaks the prefix the previous request of its session cached.

    For each session (payloads given as plain mappings form one session), every request is
    compared with the one before it: when their rendered prefixes diverge at or before the
    earlier request's last breakpoint (Anthropic markers and the automatic breakpoint; OpenAI:
    the whole earlier prompt), what that request cached cannot all be read, and the assertion
    fails with :func:`promptcache.diff.diff`'s cause, first divergence and fix, unless the diff
    finds no miss: the tokens that cannot be read are within its estimate noise (32 tokens or
    2 % of the readable prefix, e.g. a new two-token question after a turn-end breakpoint).
    Cached content is compared as the API reads it: markers ignored, a string ``system`` /
    ``content`` equal to one text block with the same text. Where a request's reported usage is
    known, its observed cache read settles the question (an entry an earlier request wrote and
    the previous one only read is read again). A Responses request whose stored prompt
    template (``prompt``: id, version, variables) differs from the previous one's fails too
    (cause ``stored_prompt_changed``): the server expands the template into the prompt.

    Args:
        requests: payloads in send order, log records holding one under ``request`` /
            ``body`` / ``payload`` (with the response's usage beside it, which is then used),
            :class:`SentRequest` records, or a wrapped client (its :func:`sent_requests`,
            with the usage each response reported).
        provider: request shape of plain payloads (detected when None).
        model: model id for the diff's token counts (default: the payloads' own).

    Raises:
        AssertionError: a request breaks its session's cached prefix (the message names the
            request indexes, the session and the diff's explanation).
        InvalidRequestError: a payload is malformed, or a mapping holds no request.
        TypeError: ``requests`` is an SDK client that was not wrapped, one request instead of
            a sequence, text, or an item that is neither a mapping nor a
            :class:`SentRequest`.
    """
    from promptcache.planner import prefix_digests
    from promptcache.prefix import render
    from promptcache.sdk._wrap import is_wrapped

    items = sent_requests(requests) if is_wrapped(requests) else _items(requests)
    last: dict[str | None, tuple[int, SentRequest, list[str], int | None, Any]] = {}
    for i, item in enumerate(items):
        sent = _as_sent(item, provider)
        payload_model = sent.payload.get("model")
        m = model or (payload_model if isinstance(payload_model, str) else None)
        view = render(sent.payload, sent.provider, model=m)
        digests = prefix_digests(view)
        prev = last.get(sent.session)
        if prev is not None and prev[1].provider == sent.provider:
            j, before, before_digests, before_bp, before_view = prev
            loss = prefix_loss(before.payload, before_view, before_digests, before_bp,
                               sent.payload, view, digests, sent.provider, m)
            session = "" if sent.session is None else f" of session {sent.session!r}"
            if loss is not None and loss.kind == "stored_prompt":
                raise AssertionError(f"request {i}{session} breaks the prefix request {j} "
                                     f"cached: cause stored_prompt_changed; {loss.detail}")
            # each body's own model unless the caller named one (one model for both would
            # hide a model switch); the diff decides whether the suspicion is a miss
            if loss is not None and _loses_reads(before, sent, sent.provider, model):
                if loss.kind == "content":
                    where = ("they diverge at " + (
                        before_view.segments[loss.cut].path
                        if loss.cut < len(before_view.segments) else "<end>"))
                elif loss.kind == "setting":
                    where = f"its {loss.detail} changed"
                else:
                    where = "its breakpoints no longer reach that entry"
                why = explain_break(before.payload, sent.payload, sent.provider, model,
                                    usage_a=before.usage)
                upto = (f" (up to {before_view.segments[before_bp].path})"
                        if before_bp is not None else "")
                raise AssertionError(
                    f"request {i}{session} breaks the prefix request {j} cached{upto}: "
                    f"{where}; {why}")
        last[sent.session] = (i, sent, digests, last_breakpoint(view), view)
