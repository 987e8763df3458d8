"""Where usage records go: an append-only JSONL file, or memory; and the JSONL reader.

:class:`JsonlSink` is safe for many threads *and* many processes writing one file:

* each record is one line, written with **one** ``os.write`` on a file descriptor opened with
  ``O_APPEND`` (the kernel moves to the end and writes atomically with respect to other appends);
* the write happens under an exclusive ``fcntl.flock`` on that descriptor, so writers on
  filesystems where large appends may interleave (NFS, >PIPE_BUF lines) still never tear a line;
* ``flock`` locks belong to an *open file description*, shared by every thread of a process and
  inherited across ``fork``: threads of one process therefore also take a ``threading.Lock``,
  and a forked child re-opens the file (detected by pid) instead of sharing the parent's lock;
* ``fsync=True`` makes every line durable before :meth:`JsonlSink.write` returns.

POSIX only (``fcntl``); on other platforms the sink falls back to the in-process lock alone.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Protocol

from pydantic import ValidationError

from promptcache._errors import InputError, PromptCacheError
from promptcache.usage.record import UsageRecord

try:  # pragma: no cover - platform switch
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "JsonlSink",
    "MemorySink",
    "Sink",
    "iter_jsonl",
    "iter_usage_log",
    "iter_usage_log_lines",
    "read_jsonl",
]


class Sink(Protocol):
    """Anything that accepts usage records (the tracker calls ``write`` once per record)."""

    def write(self, record: UsageRecord) -> None: ...


class MemorySink:
    """Keeps records in a list (thread-safe append). ``records`` is a snapshot copy."""

    def __init__(self) -> None:
        self._records: list[UsageRecord] = []
        self._lock = threading.Lock()

    def write(self, record: UsageRecord) -> None:
        """Append one record."""
        with self._lock:
            self._records.append(record)

    @property
    def records(self) -> list[UsageRecord]:
        """A copy of every record written so far, in write order."""
        with self._lock:
            return list(self._records)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)


class JsonlSink:
    """Append-only JSONL usage log, one :class:`UsageRecord` per line.

    Args:
        path: the log file (created if missing, parent directories too).
        fsync: ``os.fsync`` after every line (durable, slower).

    Use as a context manager or call :meth:`close`. Safe to share between threads and across
    ``fork``; several processes may open the same path. A log file moved or deleted under the
    sink (log rotation) is noticed at the next write, which opens a new file at ``path`` (as
    ``logging.handlers.WatchedFileHandler`` does).

    Raises:
        OSError: the file cannot be created or opened for appending (checked here, before any
            request is paid for, not at the first write).
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid = -1
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._open()  # an unwritable path fails now (trial 29), not after a paid call

    def _open(self) -> int:
        if self._fd is not None and self._pid == os.getpid() and not self._moved(self._fd):
            return self._fd
        if self._fd is not None and self._pid == os.getpid():
            os.close(self._fd)  # rotated or deleted: write to the file now at ``path``
        # After fork the inherited fd shares the parent's open file description (and its
        # flock): open our own. The inherited descriptor is left to the parent.
        self._fd = os.open(
            self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644
        )
        self._pid = os.getpid()
        return self._fd

    def _moved(self, fd: int) -> bool:
        """Whether the file open as ``fd`` is no longer the one at :attr:`path`."""
        try:
            at_path = os.stat(self.path)
        except FileNotFoundError:
            return True
        mine = os.fstat(fd)
        return (at_path.st_dev, at_path.st_ino) != (mine.st_dev, mine.st_ino)

    def write(self, record: UsageRecord) -> None:
        """Append one record as one whole line.

        Raises:
            OSError: the file cannot be opened or written.
        """
        self.write_line(record.model_dump_json(exclude_defaults=True))

    def write_many(self, records: Iterable[UsageRecord]) -> None:
        """Append several records in one locked write (each still a whole line)."""
        lines = [r.model_dump_json(exclude_defaults=True) for r in records]
        if lines:
            self.write_line("\n".join(lines))

    def write_line(self, text: str) -> None:
        """Append ``text`` plus a newline under the locks, with one ``os.write`` when possible."""
        data = (text + "\n").encode("utf-8")
        with self._lock:
            fd = self._open()
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                view = memoryview(data)
                while view:  # a regular file takes it in one go; loop only on a short write
                    written = os.write(fd, view)
                    view = view[written:]
                if self.fsync:
                    os.fsync(fd)
            finally:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close this process's descriptor (a later write re-opens it)."""
        with self._lock:
            if self._fd is not None and self._pid == os.getpid():
                os.close(self._fd)
            self._fd = None

    def __enter__(self) -> JsonlSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[UsageRecord]:
    """Yield the records of a JSONL usage log; blank lines are skipped, and so is an
    incomplete last line (no newline at its end, not JSON: a log being written), with a
    one-line warning on stderr.

    Raises:
        InputError: the file cannot be read or is one (pretty-printed) JSON document, not
            JSONL (``file`` = path), or a line is not JSON or not a usage record (``file`` =
            ``"path:line"``, reason says what is wrong).
    """
    for _, data, where in _json_lines(path):
        try:
            yield UsageRecord.model_validate(data)
        except ValidationError as exc:
            raise InputError(where, f"not a usage record ({_first_error(exc)})") from exc


def iter_usage_log(path: str | os.PathLike[str]) -> Iterator[UsageRecord]:
    """Yield one record per line of a JSONL file of usage in any shape the providers log.

    A line may be a :class:`UsageRecord` (as :class:`JsonlSink` writes it), a provider's bare
    ``usage`` object (Anthropic ``input_tokens`` / ``cache_read_input_tokens`` /
    ``cache_creation_input_tokens``; OpenAI ``prompt_tokens`` / ``prompt_tokens_details``;
    Responses, DeepSeek, Bedrock, Gemini), a whole response object, or a wrapper with the
    response under ``"response"``. The provider is detected from the field names
    (:func:`promptcache.usage.parse.parse_usage`); a ``"model"`` key on the line (or in the
    response; failing both, in the request a request-log line carries under ``"request"`` /
    ``"body"`` / ``"payload"``, the line format ``promptcache explain`` reads) becomes the
    record's model, otherwise the model is ``None`` (unpriced, never guessed). ``"label"`` and
    ``"session"`` keys on the line (e.g. ``{"label": ..., "model": ..., "usage": {...}}``)
    become the record's label and session, a ``"speed"`` key (or the logged request's
    ``speed``, e.g. ``"fast"``) its speed, a ``"prompt_cache_retention"`` key (or the logged
    request's) its retention (the session checks' idle lifetime). The official batch result lines are read as the
    response they hold (OpenAI Batch output ``{"custom_id", "response": {"status_code",
    "body": {...}}}``, Anthropic Message Batches ``{"custom_id", "result": {"type":
    "succeeded", "message": {...}}}``). The line's time (a ``timestamp`` / ``start`` / ...
    key, :data:`promptcache._times.TIME_KEYS`; else the response's ``created_at``
    (Responses) or ``created`` (Chat Completions); read by
    :func:`promptcache._times.dated_time_of`: a date without a time of day is that day, an
    epoch time wins over a small elapsed ``"time": 2.5``) becomes the record's ``start``, so
    the catalog's dated prices apply (a relative time, under 1e9 s, does not choose a price:
    see :meth:`~promptcache.usage.UsageTracker.prices_for`).

    A streamed response logged event by event is one record: consecutive lines from an
    Anthropic ``message_start`` to its ``message_stop`` (``message_delta``, ``content_block_*``
    and ``ping`` between), a Responses ``response.created`` to its ``response.completed`` /
    ``incomplete`` / ``failed``, ``chat.completion.chunk`` lines with one ``id``, Gemini
    chunks with one ``responseId`` or a Bedrock ConverseStream ``messageStart`` to its
    ``metadata``, are merged as :func:`promptcache.usage.parse.parse_stream` merges them
    (case BR-30: per counter the maximum over the events, never a sum), also when chunks
    repeat the cumulative usage (vLLM ``continuous_usage_stats``) or the whole stream is
    logged twice with one id. A ``message_delta`` or ``response.completed`` line on its own
    is a record by itself, as before. A stream cut before its usage (chat without the usage
    chunk, Responses without ``response.completed``, Bedrock without ``metadata``) is a
    request whose counts are all unknown; an Anthropic stream without ``message_delta`` has
    an unknown output; both are flagged ``stream_incomplete:...``.
    Blank lines are skipped, and so is an incomplete last line (no newline at its end, not
    JSON: a log being written, or whose writer crashed), with a one-line warning on stderr;
    so is a failed request's line (an API error response, a batch result that errored):
    it carries no usage and was not billed. A UTF-8 BOM at the start of the file is ignored.

    Raises:
        InputError: the file cannot be read or is one (pretty-printed) JSON document, not
            JSONL (``file`` = path), or a line (a stream's events: its first line) is not JSON,
            holds no readable usage, a bad count (negative, over
            :data:`~promptcache.usage.record.MAX_TOKENS`) or a time that dates nothing
            (``file`` = ``"path:line"``, reason says what is wrong).
    """
    for _, record in iter_usage_log_lines(path):
        yield record


def iter_usage_log_lines(
    path: str | os.PathLike[str], *, text: str | None = None,
) -> Iterator[tuple[str, UsageRecord]]:
    """``("path:line", record)`` for each line: :func:`iter_usage_log` with line locations.

    ``text``: the log's text, already read (``promptcache report -`` reads standard input
    once); it is parsed instead of the file, and ``path`` only names it (``"-"``).

    Consecutive lines that are the events of one streamed response (see
    :func:`iter_usage_log`) give one record, located at the stream's first line. A line that
    carries no usage because the request failed (an API error response, a batch result that
    errored / was canceled / expired) is skipped with one warning line on stderr
    (``promptcache: path:line: ..., skipped``): it was not billed.
    """
    stream: _Stream | None = None
    for _, data, where in _json_lines(path, text=text):
        if stream is not None:
            if stream.takes(data):
                stream.add(data)
                continue
            yield stream.where, stream.record()
            stream = None
        kind = _stream_kind(data)
        if kind is not None:
            stream = _Stream(kind, data, where)
            continue
        skipped = _failed_request(data)
        if skipped is not None:
            _warn(where, f"{skipped}: no usage (not billed), skipped")
            continue
        yield where, _line_record(data, where)
    if stream is not None:
        yield stream.where, stream.record()


def _warn(where: str, message: str) -> None:
    """One warning line on stderr, ``promptcache: WHERE: message`` (the exit status does not
    change), as for an incomplete last line."""
    import click

    click.echo(f"promptcache: {where}: {message}", err=True)


def _failed_request(data: Mapping[str, Any]) -> str | None:
    """What failed, for a line that records a failed request and carries no usage: an API
    error response (Anthropic ``{"type": "error", "error": {...}}``, OpenAI ``{"error":
    {...}}``, also under ``"response"``), an OpenAI Batch output line with an error or a
    non-200 ``status_code``, an Anthropic Message Batches result that is not ``succeeded``.
    None for any other line (a line with usage is never skipped)."""
    result = data.get("result")
    if isinstance(result, Mapping) and isinstance(data.get("custom_id"), str):
        kind = result.get("type")
        if kind != "succeeded" and not isinstance(result.get("message"), Mapping):
            what = _error_text(result.get("error")) if kind == "errored" else None
            return f"batch result {kind}" + (f" ({what})" if what else "")
    target = _response_of(data)
    failed = next((obj for obj in (target, data, data.get("response"))
                   if isinstance(obj, Mapping) and isinstance(obj.get("error"), Mapping | str)),
                  None)
    if failed is None or any(isinstance(target.get(k), Mapping) for k in _USAGE_KEYS):
        return None
    from promptcache.usage.parse import detect_provider

    if detect_provider(target) is not None:  # bare usage counts beside an "error" key
        return None
    status = _sub(data, "response", "status_code")
    what = _error_text(failed["error"])
    code = f"status {status}: " if isinstance(status, int) else ""
    return f"API error response ({code}{what})" if what or code else "API error response"


#: Where a response (or a line) keeps its usage.
_USAGE_KEYS = ("usage", "usageMetadata", "usage_metadata", "metadata")


def _error_text(error: Any) -> str:
    """``type: message`` of an API error object (Anthropic and OpenAI shapes), or the text."""
    if isinstance(error, str):
        return error
    if not isinstance(error, Mapping):
        return ""
    nested = error.get("error")
    inner: Mapping[str, Any] = nested if isinstance(nested, Mapping) else error
    kind = inner.get("code") or inner.get("type")  # OpenAI: code is the specific one
    message = inner.get("message")
    parts = [str(p) for p in (kind, message) if isinstance(p, str | int) and p != ""]
    return ": ".join(parts)


def _sub(d: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(d, Mapping):
            return None
        d = d.get(key)
    return d


def _response_of(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The response a log line holds: the line itself, its ``"response"``, an OpenAI Batch
    output line's ``response.body`` (``{"custom_id", "response": {"status_code", "body":
    {...}}}``) or an Anthropic Message Batches result's ``result.message`` (``{"custom_id",
    "result": {"type": "succeeded", "message": {...}}}``)."""
    target: Mapping[str, Any] = data
    if isinstance(data.get("response"), Mapping):
        target = data["response"]
        body = target.get("body")
        if isinstance(body, Mapping) and "status_code" in target and "usage" not in target:
            target = body
    elif "usage" not in data and isinstance(_sub(data, "result", "message"), Mapping):
        target = data["result"]["message"]
    return target


def _line_fields(data: Mapping[str, Any], target: Mapping[str, Any], where: str,
                 ) -> dict[str, Any]:
    """Record fields a line carries beside its usage: ``model`` / ``label`` / ``session`` /
    ``speed`` / ``prompt_cache_retention`` keys (the last two also from the request of a
    request-log line, e.g. ``"fast"``, ``"24h"``),
    and its time as ``start``: a time key of the line (``timestamp``, ``start``, ...:
    :data:`promptcache._times.TIME_KEYS`), else of its response (``created_at`` of a
    Responses object, ``created`` of a ChatCompletion), read by
    :func:`promptcache._times.dated_time_of` (a date without a time of day is a date; an
    epoch time wins over an earlier key's small relative one). The time picks the
    catalog's dated prices.

    Raises:
        InputError: (``file`` = ``where``) time keys are present but none holds a time the
            request can be dated by (``"Oct 1 2026"``, ``"garbage"``): its prices would be
            today's, silently.
    """
    from promptcache._times import dated_time_of

    fields: dict[str, Any] = {}
    for key in ("model", "label", "session", "speed", "prompt_cache_retention"):
        if isinstance(data.get(key), str):
            fields[key] = data[key]
    for key in ("speed", "prompt_cache_retention"):
        if key not in fields:
            value = _request_field(data, key)
            if value is not None:
                fields[key] = value
    try:
        ts = dated_time_of(data, target) if target is not data else dated_time_of(data)
    except ValueError as exc:
        raise InputError(where, f"{exc}: the request's date cannot be read, so the prices of "
                                "its day cannot be chosen") from exc
    if ts is not None:
        fields["start"] = ts
    return fields


def _line_record(data: dict[str, Any], where: str) -> UsageRecord:
    """The record of one line that is not part of a stream (see :func:`iter_usage_log`)."""
    from promptcache.usage.parse import batch_result_response, parse_usage

    record_error: str | None = None
    if isinstance(data.get("provider"), str):
        try:
            return UsageRecord.model_validate(data)
        except ValidationError as exc:
            record_error = _first_error(exc)
    target = _response_of(data)
    fields = _line_fields(data, target, where)
    try:
        # a batch result line is parsed whole: its usage is the batch tier's unless the
        # response inside names another (parse_usage reads the official batch shapes)
        record = parse_usage(data if batch_result_response(data) is not None else target,
                             **fields)
    except ValidationError as exc:  # counts that break a record invariant
        raise InputError(where, f"bad usage counts ({_first_error(exc)})") from exc
    except (PromptCacheError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or str(exc)
        if record_error is not None:
            reason = f"not a usage record ({record_error}) nor API usage: {reason}"
        else:
            reason = f"not API usage: {reason}"
        raise InputError(where, reason) from exc
    if record.model is None:
        asked = _request_model(data)
        if asked is not None:
            record = record.model_copy(update={"model": asked})
    return record


#: Anthropic stream events that continue a ``message_start`` (one response).
_ANTHROPIC_EVENTS = frozenset({"message_delta", "message_stop", "content_block_start",
                               "content_block_delta", "content_block_stop", "ping"})
#: Responses API events that end a response's stream.
_RESPONSES_END = frozenset({"response.completed", "response.incomplete", "response.failed"})
#: Bedrock ConverseStream events that continue a ``messageStart`` (one response); the last,
#: ``metadata``, carries the usage.
_BEDROCK_EVENTS = frozenset({"contentBlockStart", "contentBlockDelta", "contentBlockStop",
                             "messageStop", "metadata"})
#: Why a stream kind's record has unknown usage when no event carried any (a flag).
_NO_USAGE = {
    "chat": ("openai", "stream_incomplete:no usage chunk (cut short or include_usage off)"),
    "responses": ("openai-responses", "stream_incomplete:no response.completed"),
    "bedrock": ("bedrock", "stream_incomplete:no metadata event"),
}


def _stream_kind(data: Mapping[str, Any]) -> str | None:
    """``"anthropic"`` for a ``message_start`` line, ``"responses"`` for ``response.created``,
    ``"chat"`` for a ``chat.completion.chunk``, ``"bedrock"`` for a ConverseStream
    ``messageStart``, ``"gemini"`` for a Gemini response with a ``responseId`` (a
    ``streamGenerateContent`` chunk: each repeats the cumulative ``usageMetadata``): the
    first event of a streamed response whose usage is spread over (or only on, or repeated
    on) later events; None for any other line."""
    kind = data.get("type")
    if kind == "message_start":
        return "anthropic"
    if kind == "response.created":
        return "responses"
    if data.get("object") == "chat.completion.chunk":
        return "chat"
    if isinstance(data.get("messageStart"), Mapping):
        return "bedrock"
    if _gemini_id(data) is not None:
        return "gemini"
    return None


def _gemini_id(data: Mapping[str, Any]) -> str | None:
    """The ``responseId`` of a Gemini response line (with ``usageMetadata``), else None."""
    rid = data.get("responseId", data.get("response_id"))
    if not isinstance(rid, str) or not rid:
        return None
    if not any(isinstance(data.get(k), Mapping) for k in ("usageMetadata", "usage_metadata")):
        return None
    from promptcache.usage.parse import detect_provider

    try:
        return rid if detect_provider(data) == "gemini" else None
    except PromptCacheError:
        return None


def _stream_id(kind: str, event: Mapping[str, Any]) -> str | None:
    """The response id an event names (a non-empty string), or None."""
    if kind == "anthropic":
        rid = _sub(event, "message", "id")
    elif kind == "responses":
        rid = _sub(event, "response", "id")
    elif kind == "gemini":
        rid = event.get("responseId", event.get("response_id"))
    else:
        rid = event.get("id")
    return rid if isinstance(rid, str) and rid else None


def _starts_reply(chunk: Mapping[str, Any]) -> bool:
    """A chat chunk that opens a completion (a choice's ``delta.role``)."""
    choices = chunk.get("choices")
    return isinstance(choices, list) and any(
        isinstance(c, Mapping) and _sub(c, "delta", "role") is not None for c in choices)


class _Stream:
    """Consecutive lines of a log that are the events of one streamed response: merged by
    :class:`promptcache.usage.parse.StreamUsage` (per counter, the maximum over the events,
    case BR-30), so a ``message_start`` (input and cache counts) and its ``message_delta``
    (output) are one request, not two.

    Events of one response logged more than once are still one request: chat chunks of one
    ``id`` that each carry the cumulative usage (vLLM ``continuous_usage_stats``, a usage
    chunk logged twice), Gemini chunks of one ``responseId``, a ``message_start`` /
    ``response.created`` repeated with the same id. After a chat stream's usage chunk, a
    chunk of the same id that opens a reply (``delta.role``) starts another request (servers
    that reuse one id)."""

    def __init__(self, kind: str, first: dict[str, Any], where: str) -> None:
        self.kind, self.where, self.first = kind, where, first
        self.id = _stream_id(kind, first)
        self.events: list[dict[str, Any]] = [first]
        self.done = False

    def _same(self, data: Mapping[str, Any]) -> bool:
        return self.id is not None and _stream_id(self.kind, data) == self.id

    def takes(self, data: Mapping[str, Any]) -> bool:
        """Whether ``data`` is the next event of this response (or a repeat of one)."""
        kind = data.get("type")
        if self.kind == "anthropic":
            if kind == "message_start":
                return self._same(data)
            return not self.done and kind in _ANTHROPIC_EVENTS
        if self.kind == "responses":
            if kind == "response.created" or self.done:
                return isinstance(kind, str) and kind.startswith("response.") and self._same(data)
            return isinstance(kind, str) and kind.startswith("response.")
        if self.kind == "bedrock":
            return not self.done and any(k in data for k in _BEDROCK_EVENTS) and (
                "messageStart" not in data)
        if self.kind == "gemini":
            return self._same(data)
        # chunks of one completion share its id: without one (a log that dropped it) two
        # requests' usage chunks cannot be told apart, so none is merged (review 13)
        return (data.get("object") == "chat.completion.chunk" and self._same(data)
                and not (self.done and _starts_reply(data)))

    def add(self, data: dict[str, Any]) -> None:
        """Take the next event (``takes`` said yes)."""
        self.events.append(data)
        kind = data.get("type")
        if kind in ("message_start", "response.created"):
            self.done = False  # the same response again: its events follow
        elif (kind == "message_stop" or kind in _RESPONSES_END
              or (self.kind == "bedrock" and "metadata" in data)
              # a chat stream's usage rides on its last chunk (choices: [], usage set)
              or (self.kind == "chat" and data.get("usage") is not None)):
            self.done = True

    def record(self) -> UsageRecord:
        """The merged record. A stream none of whose events carried usage (a chat stream cut
        before its usage chunk, a Responses stream before ``response.completed``, a Bedrock
        stream before ``metadata``) is a request with unknown usage, flagged
        ``stream_incomplete:...``; an Anthropic stream without ``message_delta`` has an
        unknown output (:class:`~promptcache.usage.parse.StreamUsage`).

        Raises:
            InputError: the events' counts are bad, or an Anthropic stream's usage cannot be
                read (``file`` = the stream's first line).
        """
        from promptcache.usage.parse import StreamUsage

        if self.kind == "gemini" and len(self.events) == 1:
            return _line_record(self.first, self.where)
        inner = self.first.get("response")
        fields = _line_fields(self.first, inner if isinstance(inner, Mapping) else self.first,
                              self.where)
        n = len(self.events)
        what = (f"a streamed response's {n} events" if n > 1
                else f"a streamed response's first event ({self.first.get('type') or 'chunk'})")
        try:
            acc = StreamUsage(**fields)
            for event in self.events:
                acc.feed(event)
            if not acc.seen_usage and self.kind in _NO_USAGE:
                return self._unknown(fields)
            return acc.record()
        except ValidationError as exc:
            raise InputError(self.where, f"bad usage counts in {what} "
                                         f"({_first_error(exc)})") from exc
        except (PromptCacheError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or str(exc)
            raise InputError(self.where, f"{what}: {reason}") from exc

    def _unknown(self, fields: Mapping[str, Any]) -> UsageRecord:
        """The record of a request whose stream carried no usage: every count unknown."""
        provider, flag = _NO_USAGE[self.kind]
        model = fields.get("model")
        if model is None:
            found = self.first.get("model", _sub(self.first, "response", "model"))
            model = found if isinstance(found, str) else None
        return UsageRecord.model_validate({
            **fields, "provider": provider, "model": model, "request_id": self.id,
            "flags": (flag,)})


def _request_model(line: Mapping[str, Any]) -> str | None:
    """The model a request-log line's request names (``{"request": {"model": ...},
    "usage": {...}}``, also under ``body`` / ``payload``, found as ``explain`` finds it), or
    None. Read only when neither the line nor its response names one: the response's model
    (what served the request, e.g. a dated snapshot) comes first."""
    return _request_field(line, "model")


def _request_field(line: Mapping[str, Any], key: str) -> str | None:
    """A non-empty string field of the request a request-log line carries (see
    :func:`_request_model`), or None."""
    from promptcache._cliutil import REQUEST_FIELDS, unwrap_request
    from promptcache.lint.sources.request_json import WRAPPER_KEYS

    if not any(k in line for k in (*WRAPPER_KEYS, *REQUEST_FIELDS)):
        return None  # no request on the line: not worth the search
    found = unwrap_request(line)
    return None if found is None else _str(found[0].get(key))


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "record"
    return f"{where}: {err['msg']}"


def _json_lines(path: str | os.PathLike[str], *, text: str | None = None,
                ) -> Iterator[tuple[int, dict[str, Any], str]]:
    """(line number, JSON object, ``"path:line"``) per non-blank line (errors: see above);
    ``text``: the file's text, already read (lines split as a text-mode file splits them).

    A last line without a newline that is not JSON (a log being written, or whose writer
    crashed) is skipped with one line on stderr
    (:func:`promptcache._cliutil.warn_incomplete_last_line`); a broken line ending with a
    newline is an error.
    """
    from promptcache._cliutil import incomplete_last_line, warn_incomplete_last_line

    name = str(path)
    fh: IO[str]
    if text is not None:
        fh = io.StringIO(text.removeprefix("\ufeff"), newline=None)
    else:
        try:  # utf-8-sig: a UTF-8 BOM (Windows loggers) at the start is not part of line 1
            fh = open(path, encoding="utf-8-sig")
        except OSError as exc:
            raise InputError(name, exc.strerror or str(exc)) from exc
    with fh:
        lineno = 0
        first = True
        try:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as exc:
                    if incomplete_last_line(line):  # a log being written: its complete lines
                        warn_incomplete_last_line(name, lineno)
                        return
                    if first:
                        _raise_if_json_document(name, text)
                    raise InputError(f"{name}:{lineno}", f"not JSON ({exc.msg})") from exc
                if not isinstance(data, dict):
                    what = "an array" if isinstance(data, list) else type(data).__name__
                    raise InputError(f"{name}:{lineno}",
                                     f"expected a JSON object (one per line), got {what}")
                first = False
                yield lineno, data, f"{name}:{lineno}"
        except UnicodeDecodeError as exc:
            raise InputError(f"{name}:{lineno + 1}", "not UTF-8 text") from exc


def _raise_if_json_document(name: str, text: str | None = None) -> None:
    """Raise the "a JSON document, not JSONL" error when the whole file ``name`` (whose first
    non-blank line is not JSON) parses as one JSON object or array: a pretty-printed response
    or list of responses (:func:`promptcache._cliutil.json_document_reason`; ``text``: the
    file's text, already read). Returns when it does not (the caller reports the line)."""
    from promptcache._cliutil import json_document_reason

    reason = json_document_reason(name, "usage logs hold one response or usage object per line",
                                  text=text)
    if reason is not None:
        raise InputError(name, reason)


def read_jsonl(path: str | os.PathLike[str]) -> list[UsageRecord]:
    """Every record of a JSONL usage log, in file order (see :func:`iter_jsonl` for errors)."""
    return list(iter_jsonl(path))
