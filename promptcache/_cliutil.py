"""Small helpers the CLI commands share: one-line input errors and the explicit-model check.

Every command reports bad input the same way: one line ``promptcache: FILE: reason`` on
stderr and exit status 2 (never click's usage block, never a traceback). A model id given
with ``--model`` that the catalog does not know is bad input too: the answer would be silently
wrong (no minimum, no prices), so the command stops and names the closest catalog ids.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import click

from promptcache._errors import InputError, UnknownModelError
from promptcache._stored import STORED_PROMPT_FIELDS

__all__ = ["NOT_A_REQUEST", "PLOT_FORMATS", "REQUEST_FIELDS", "check_model", "fail",
           "incomplete_last_line", "is_blank_file", "json_document_reason", "loads_json",
           "not_a_request_reason", "plot_target_problem", "read_json_object", "read_request",
           "read_text", "unknown_model_message", "unwrap_request", "warn_incomplete_last_line"]

#: Top-level fields of which a request (Anthropic Messages, OpenAI chat or Responses) has at
#: least one; an object with none of them is "not a request".
REQUEST_FIELDS = ("messages", "system", "input", "instructions")
#: The reason given for a JSON object that holds no request (the words ``promptcache lint`` uses).
NOT_A_REQUEST = "not a request (no messages / system / input)"


def fail(message: str) -> NoReturn:
    """Print ``promptcache: MESSAGE`` on stderr and exit with status 2."""
    click.echo(f"promptcache: {message}", err=True)
    raise SystemExit(2)


def unknown_model_message(exc: UnknownModelError, option: str = "--model") -> str:
    """One line naming the unknown model and up to three close catalog ids."""
    model = exc.model
    if exc.suggestions:
        hint = f"closest catalog ids: {', '.join(exc.suggestions[:3])}"
    else:
        hint = "no close catalog id"
    return f"{option} {model}: unknown model; {hint}"


def check_model(model: str | None, option: str = "--model") -> str | None:
    """None when ``model`` is None or a catalog id (or alias); else the one-line error.

    Raises nothing: a catalog that cannot load is reported as the error line.
    """
    if model is None:
        return None
    from promptcache._errors import CatalogError
    from promptcache.catalog import get_policy

    try:
        get_policy(model)
    except UnknownModelError as exc:
        return unknown_model_message(exc, option)
    except CatalogError as exc:
        return f"{option} {model}: the catalog cannot be read ({exc})"
    return None


def read_text(name: str) -> str:
    """The text of file ``name`` (``"-"``: standard input), as UTF-8.

    Raises:
        InputError: the file cannot be read, or is not UTF-8 text.
    """
    try:
        if name == "-":
            data = sys.stdin.buffer.read()
        else:
            data = Path(name).read_bytes()
    except OSError as exc:
        raise InputError(name, exc.strerror or str(exc)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(name, f"not UTF-8 text (byte {exc.start})") from None


def loads_json(text: str, name: str, *, hint: str = "") -> Any:
    """``json.loads(text)``; bad JSON raises :class:`InputError` naming file ``name``.

    A document nested too deeply for the parser (``[[[[...]]]]``) is bad input too (it
    raises RecursionError inside ``json``), never a traceback. ``hint`` is appended to the
    invalid-JSON reason.

    Raises:
        InputError: ``invalid JSON (...)`` or ``JSON nested too deeply``.
    """
    import json

    try:
        return json.loads(text)
    except ValueError as exc:
        raise InputError(name, f"invalid JSON ({exc}){hint}") from None
    except RecursionError:
        raise InputError(name, "JSON nested too deeply") from None


def read_json_object(name: str, *, hint: str = "") -> dict[str, Any]:
    """The JSON object (a request) in file ``name``; on bad input, :func:`fail` (exit 2).

    ``hint`` is appended to the invalid-JSON reason (``"; use --text for text"``).
    """
    try:
        text = read_text(name)
    except InputError as exc:
        fail(str(exc))
    if not text.strip():
        fail(f"{name}: empty file")
    try:
        obj = loads_json(text, name, hint=hint)
    except InputError as exc:
        fail(str(exc))
    if not isinstance(obj, dict):
        fail(f"{name}: expected a JSON object (a request), got {type(obj).__name__}")
    return obj


def unwrap_request(obj: Any) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """``(request, wrapper)`` found in a JSON object, or None when it holds no request.

    A bare request body (any of :data:`REQUEST_FIELDS` at the top) is the request itself,
    with an empty wrapper. Otherwise the request is looked for the way ``promptcache lint``
    does (:func:`promptcache.lint.sources.request_json.find_request`: under its
    ``WRAPPER_KEYS``, ``request`` / ``body`` / ``payload`` / ..., up to three levels), and the
    wrapper is the whole object (it may hold ``usage``, ``response``, ``timestamp``). Failing
    that, an object under one of those keys with a request field is returned so that rendering
    it reports what is wrong with it.
    """
    if not isinstance(obj, Mapping):
        return None
    if any(k in obj for k in REQUEST_FIELDS):
        return obj, {}
    from promptcache.lint.sources.request_json import WRAPPER_KEYS, find_request

    found = find_request(obj)
    if found is not None:
        return found[0], obj
    for key in WRAPPER_KEYS:
        inner = obj.get(key)
        if isinstance(inner, Mapping) and any(k in inner for k in REQUEST_FIELDS):
            return inner, obj
    return None


#: ``--plot`` file suffixes and the matplotlib format each one selects.
PLOT_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def plot_target_problem(path: str) -> str | None:
    """Why ``--plot path`` cannot be written, or None: a directory, a suffix that is not
    ``.png`` / ``.svg`` / ``.pdf`` (matplotlib would append ``.png`` to a name without one, and
    refuse others late, after the work), a missing or unwritable parent directory, or matplotlib
    not installed. Checked before any work, so a bad target costs nothing."""
    import importlib.util
    import os

    suffixes = ", ".join(PLOT_FORMATS)
    if os.path.isdir(path):
        return "is a directory (--plot takes a file name)"
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in PLOT_FORMATS:
        what = f"suffix {suffix!r}" if suffix else "no suffix"
        return f"{what}: --plot writes {suffixes} (the suffix picks the format)"
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        return f"directory {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK) or (
            os.path.exists(path) and not os.access(path, os.W_OK)):
        return "permission denied"
    if importlib.util.find_spec("matplotlib") is None:
        return "plotting needs matplotlib: pip install 'promptcache[plot]'"
    return None




def not_a_request_reason(obj: Any) -> str:
    """Why ``obj`` (a JSON value :func:`unwrap_request` found no request in) is not one:
    :data:`NOT_A_REQUEST`, or, for an OpenAI Responses body whose prompt is stored server-side
    (``prompt`` / ``previous_response_id`` / ``conversation`` and no input), that its text is
    not in the request, so nothing can be rendered, counted or compared."""
    if isinstance(obj, Mapping):
        from promptcache.lint.sources.request_json import WRAPPER_KEYS

        for inner in (obj, *(obj.get(k) for k in WRAPPER_KEYS)):
            if isinstance(inner, Mapping):
                held = [k for k in STORED_PROMPT_FIELDS if k in inner]
                if held:
                    return (f"not a request promptcache can read: its prompt is stored "
                            f"server-side ({' / '.join(held)}) and its text is not in the "
                            "request (add the input or instructions it stands for)")
    return NOT_A_REQUEST


def read_request(name: str, *, hint: str = "") -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """``(request, wrapper)`` from the request JSON file ``name`` (see :func:`unwrap_request`).

    On bad input (unreadable, not JSON, nested too deeply, not an object, or an object that
    holds no request: ``{}``, ``{"foo": 1}``, ``{"request": 5}``) :func:`fail` (exit 2).
    ``hint`` is appended to the invalid-JSON and not-a-request reasons.
    """
    obj = read_json_object(name, hint=hint)
    found = unwrap_request(obj)
    if found is None:
        reason = not_a_request_reason(obj)
        if reason == NOT_A_REQUEST:
            reason = f"{NOT_A_REQUEST[:-1]}{hint})"
        fail(f"{name}: {reason}")
    return found


def json_document_reason(path: str, holds: str, *, text: str | None = None) -> str | None:
    """Why JSONL file ``path`` is not JSONL, when it is one (pretty-printed) JSON document.

    Called after the first non-blank line failed to parse: when the whole file parses as one
    JSON object or array, the reason names it and the ``jq -c`` command that converts it
    (``holds`` says what a line should be: ``"one request per line"``); else None (the
    caller reports the line's own error). Files over 64 MiB are not parsed whole (None).
    ``text``: the file's text, already read (standard input, ``path`` ``"-"``); it is parsed
    instead of the file, and the ``jq`` command reads standard input too.
    """
    import json
    import os
    import shlex

    limit = 64 * 1024 * 1024
    try:
        if text is not None:
            if len(text) > limit:
                return None
            doc = json.loads(text)
        else:
            if os.stat(path).st_size > limit:
                return None
            with open(path, encoding="utf-8-sig") as fh:
                doc = json.load(fh)
    except (OSError, ValueError, RecursionError):  # ValueError: JSON and UTF-8 errors
        return None
    source = "" if text is not None else f" {shlex.quote(path)}"
    if isinstance(doc, dict):
        kind, convert = "document", f"jq -c .{source}"
    elif isinstance(doc, list):
        kind, convert = "array", f"jq -c '.[]'{source}"
    else:
        return None
    return f"a JSON {kind}, not JSONL: {holds} ({convert} converts it)"


def is_blank_file(name: str, *, text: str | None = None) -> bool:
    """Whether file ``name`` holds nothing but whitespace (False when unreadable).

    ``text``: the file's text, already read (standard input); it is looked at instead of the
    file. For ``"-"`` without ``text``, False (standard input cannot be read twice). Reads a
    file in 64 KiB chunks and stops at the first non-whitespace byte.
    """
    if text is not None:
        return not text.strip()
    if name == "-":
        return False
    try:
        with open(name, "rb") as fh:
            while chunk := fh.read(65536):
                if chunk.strip():
                    return False
    except OSError:
        return False
    return True


def incomplete_last_line(line: str) -> bool:
    """Whether ``line``, read from a text file (or a list of its lines as ``readlines()``
    gives them), is the file's unterminated last line: only the last line of a file can lack
    the newline. A JSONL log whose last line has no newline and does not parse is one being
    written (the tracker's JSONL sink, a proxy's request log) or whose writer crashed; the log
    readers (``explain``, ``report``, ``lint``) skip that line with
    :func:`warn_incomplete_last_line` instead of rejecting the whole log. A broken line that
    ends with a newline stays an error."""
    return not line.endswith(("\n", "\r"))


def warn_incomplete_last_line(name: str, line: int) -> None:
    """One line on stderr: ``promptcache: NAME: line N: incomplete last line (no newline at
    end), skipped`` (a warning: the exit status is the one the complete lines give)."""
    click.echo(f"promptcache: {name}: line {line}: incomplete last line (no newline at end), "
               "skipped", err=True)
