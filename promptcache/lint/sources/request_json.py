"""Request JSON files: one Anthropic or OpenAI request body (shape auto-detected).

Accepted shapes (the request is rendered with :func:`promptcache.prefix.render`):

* a request object (``{"model": ..., "messages": [...]}``, ``{"system": ...}``,
  ``{"input": ...}``);
* a wrapper holding one under ``request`` / ``body`` / ``payload`` / ``params`` (recorded
  calls), optionally with the response ``usage`` beside it;
* a bare list of chat messages (``[{"role": "system", ...}, ...]``), linted as ``messages``;
* a list of recorded exchanges (``[{"request": {"body": {...}}, "response": {...}}, ...]``),
  linted as a request log (see :mod:`promptcache.lint.sources.log_jsonl`).

A JSON file that is none of these (``package.json``) is skipped, not an error. A ``.json``
file that fails to parse but contains Jinja syntax (``{{`` / ``{%``; promptfoo writes chat
templates this way) is linted as a Jinja template.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from promptcache._errors import InputError, InvalidRequestError
from promptcache._times import timestamp_of
from promptcache.lint.engine import LogContext, RequestContext
from promptcache.lint.facts import facts_for
from promptcache.lint.sources.base import Document, LoadOptions, parse_suppressions
from promptcache.lint.sources.jsonpos import JsonLocator, LineIndex
from promptcache.prefix import render

__all__ = ["SOURCE", "RequestJsonSource", "find_request", "load_json", "make_context",
           "usage_of"]

#: Keys a logger or recorder wraps a request body in (every command looks under the same ones).
WRAPPER_KEYS = ("request", "body", "payload", "params", "kwargs", "json", "data")



def _looks_like_request(obj: Mapping[str, Any]) -> bool:
    if isinstance(obj.get("messages"), list) or ("messages" in obj and "model" in obj):
        return True
    if "system" in obj and ("model" in obj or "messages" in obj or "max_tokens" in obj):
        return True
    return ("input" in obj or "instructions" in obj) and "model" in obj


def find_request(obj: Any, depth: int = 0) -> tuple[Mapping[str, Any], list[str | int]] | None:
    """The request object inside ``obj`` and the path to it, or None.

    Looks at ``obj`` itself and then (up to 3 levels) under the wrapper keys ``request``,
    ``body``, ``payload``, ``params``, ``kwargs``, ``json``, ``data``.
    """
    if not isinstance(obj, Mapping) or depth > 3:
        return None
    if _looks_like_request(obj):
        return obj, []
    for key in WRAPPER_KEYS:
        inner = obj.get(key)
        if isinstance(inner, Mapping):
            found = find_request(inner, depth + 1)
            if found is not None:
                return found[0], [key, *found[1]]
    return None


def usage_of(record: Any) -> Mapping[str, Any] | None:
    """The response usage recorded next to a request (``usage``, ``response.usage``,
    ``response.body.usage``), or None."""
    if not isinstance(record, Mapping):
        return None
    for candidate in (record.get("usage"), _dig(record, "response", "usage"),
                      _dig(record, "response", "body", "usage"),
                      _dig(record, "response", "json", "usage")):
        if isinstance(candidate, Mapping):
            return candidate
    return None


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def make_context(payload: Mapping[str, Any], *, file: str, locator: JsonLocator | None,
                 options: LoadOptions, usage: Mapping[str, Any] | None = None,
                 timestamp: float | None = None, entry: int | None = None,
                 where: str | None = None) -> RequestContext:
    """Render one payload into a :class:`RequestContext`.

    Raises:
        InputError: the payload is not a valid request (names the payload path and reason).
    """
    try:
        view = render(payload, options.provider, model=options.model)
    except InvalidRequestError as exc:
        prefix = f"{where}: " if where else ""
        raise InputError(file, f"{prefix}invalid request at {exc.path or '<root>'}: "
                               f"{exc.reason}") from None
    ctx = RequestContext(view=view, payload=payload,
                         facts=facts_for(view.provider, options.model or view.model),
                         file=file, usage=usage, timestamp=timestamp, entry=entry)
    if locator is not None:
        ctx.locator = locator
    return ctx


class InvalidJsonError(InputError):
    """Text that is not JSON (not raised for JSON nested too deeply to read)."""


def load_json(file: str, text: str, line: int | None = None) -> Any:
    """``json.loads`` with bad input turned into :class:`InputError` (names line and column).

    ``line``: the file's line ``text`` is (one line of a JSONL log), whose number the error
    names instead of the decoder's "line 1".
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if line is not None:
            raise InvalidJsonError(file, f"line {line}, column {exc.colno}: "
                                         f"invalid JSON ({exc.msg})") from None
        raise InvalidJsonError(file, f"invalid JSON at line {exc.lineno} column {exc.colno}: "
                                     f"{exc.msg}") from None
    except RecursionError:
        where = f"line {line}: " if line is not None else ""
        raise InputError(file, f"{where}JSON nested too deeply") from None


def exchanges_to_log(file: str, text: str, items: Sequence[Any], options: LoadOptions,
                     line_offsets: Sequence[int] | None = None) -> LogContext | None:
    """A :class:`LogContext` from records that each hold a request (None if none does)."""
    entries: list[RequestContext] = []
    lines = LineIndex(text)
    seen: set[tuple[str, str]] = set()  # (code, path) already located in this log
    last: dict[tuple[str, str | None, tuple[str, ...]], RequestContext] = {}
    for i, record in enumerate(items):
        found = find_request(record)
        if found is None:
            continue
        payload, root = found
        if line_offsets is not None:
            locator = JsonLocator(text, line_offsets[i], root, lines)
            where = f"line {lines.line_col(line_offsets[i])[0]}"
        else:
            locator = JsonLocator(text, 0, [i, *root], lines)
            where = f"item {i}"
        ctx = make_context(payload, file=file, locator=locator, options=options,
                           usage=usage_of(record), timestamp=timestamp_of(record),
                           entry=len(entries), where=where)
        family = _family(ctx)
        ctx.previous = last.get(family)
        ctx.scratch["log_seen"] = seen
        entries.append(ctx)
        last[family] = ctx
    if not entries:
        return None
    return LogContext(file, entries)


def _family(ctx: RequestContext) -> tuple[str, str | None, tuple[str, ...]]:
    """Which earlier request a request is compared with: the latest one of the same provider,
    model and tool set (names, any order), so interleaved agents in one log are not compared
    with each other."""
    names: list[str] = []
    for seg in ctx.view.segments:
        if seg.tier != "tools":
            break
        try:
            node = json.loads(seg.data)
        except ValueError:
            continue
        if isinstance(node, Mapping):
            fn = node.get("function")
            name = fn.get("name") if isinstance(fn, Mapping) else node.get("name")
            names.append(str(name))
    return (ctx.view.provider, ctx.view.model, tuple(sorted(names)))


class RequestJsonSource:
    """``.json`` files: one request (or a recorded exchange list; see the module doc)."""

    name = "request"
    suffixes: tuple[str, ...] = (".json",)

    def load(self, file: str, text: str, options: LoadOptions) -> Document:
        """See :class:`promptcache.lint.sources.base.Source`."""
        if not text.strip():
            raise InputError(file, "empty file")
        try:
            data = load_json(file, text)
        except InputError:
            if "{{" in text or "{%" in text:
                from promptcache.lint.sources.jinja import SOURCE as JINJA

                return JINJA.load(file, text, options)
            raise
        doc = Document(file, suppressions=parse_suppressions(text))
        if isinstance(data, list):
            if data and all(isinstance(m, Mapping) and "role" in m for m in data):
                messages = {"messages": data}
                doc.contexts.append(make_context(
                    messages, file=file, locator=_ListLocator(text), options=options))
                return doc
            log = exchanges_to_log(file, text, data, options)
            if log is None:
                doc.skipped = "not a request (a JSON array of neither messages nor exchanges)"
            else:
                doc.contexts.append(log)
            return doc
        found = find_request(data)
        if found is None:
            doc.skipped = "not a request (no messages / system / input)"
            return doc
        payload, root = found
        doc.contexts.append(make_context(payload, file=file, locator=JsonLocator(text, 0, root),
                                         options=options, usage=usage_of(data),
                                         timestamp=timestamp_of(data)))
        return doc


class _ListLocator(JsonLocator):
    """A bare message list linted as ``{"messages": [...]}``: drop the ``messages`` step."""

    def __call__(self, path: str | None, offset: int | None = None) -> tuple[int, int]:
        if path and path.startswith("messages"):
            path = path[len("messages"):].lstrip(".")
        return super().__call__(path or None, offset)


SOURCE = RequestJsonSource()
