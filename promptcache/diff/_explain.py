"""``explain``: every cache miss of a request log, grouped into sessions, by cause and USD.

A log is JSONL, one request per line. Each line is an object with the request under
``request`` (or ``body`` / ``payload``; a bare request body also works) and optionally
``usage`` (or a whole ``response`` carrying ``usage``, ``id`` and diagnostics), a
``timestamp`` (seconds since the epoch, milliseconds, or ISO-8601; also ``ts``, ``created_at``
and the other keys of :data:`promptcache._times.TIME_KEYS`), a ``session_id`` (also
``session`` / ``conversation_id``), a ``response_id``,
``diagnostics`` / ``prompt_cache_diagnostics``, ``provider`` and ``model``. Lines written by
the usage tracker's JSONL sink (serialised ``UsageRecord`` s) are read as usage-only lines.
Lines with usage but no request are checked with the append-only identity ``read[n] >=
read[n-1] + write[n-1]`` (case BR-18's tracker rule) against the latest earlier line of the same
session, provider and model (a provider or model missing on either line matches any). Usage-only
lines without a session id are grouped by (provider, model, ``prefix_hash`` when the line has
one), one group per combination, named ``(no session: provider/model #hash)``; lines carrying
none of the three form ``(no session)``. Within a session the ``prefix_hash`` is not a reason to
skip a pair: the wrapper's hash covers the prefix up to the last breakpoint, which moves with
every turn of a chat. The TTL cause of a shortfall uses the lifetime of the previous line's
write: 1 h when it wrote 1 h entries (``cache_write_1h``), its ``cache_write_ttl`` when given,
else 5 min on Anthropic and, on OpenAI before GPT-5.6, the catalog's usual idle clearing (5 min
in memory: a likely cause, not a certain one, since entries are kept up to 1 h; the detail
says so) (:func:`~promptcache.diff._engine.entry_ttl_seconds`).
A miss is priced (``miss_cost_usd``) with the catalog's prices in force at its line's send time
(dated rows: Claude Sonnet 5.5's read price changed on 2026-10-07); a line without a time, or
with a relative one (under 1e9 s), at today's. A log without a miss costs 0 USD.
A line with neither a request nor usage, or whose ``request`` / ``body`` holds no messages /
system / input, is bad input (an :class:`InputError` naming the line), as is a pretty-printed
JSON document (not JSONL). An incomplete last line (no newline at its end, not valid JSON: a log
still being written, or whose writer crashed) is skipped with a one-line warning on stderr.

Sessions: an explicit id wins. Otherwise a request joins the session whose last request's
content keys (segment fingerprints without cache markers) are a prefix of its own (the
longest such prefix); failing that, the session whose last request's messages reappear in
this one the most (at least a third of them, and no fewer messages: a history edit such as
BR-18's merge, or a changed tool list over the same history); else it starts a new session.

Baseline: the provider's cache holds the entries of every earlier request still within its
TTL, not only the last one's. Each request is compared with the earlier request of its session
whose written entries give the longest expected cache read and are still live (an entry written
at time t, or read again by a request with a breakpoint at the same prefix, lives until t + TTL;
without timestamps it is assumed live): a main-loop turn after a side request (BR-16's
pattern) reads the turn before the side request, and a reverted change reads the entries
written before the change. When no earlier entry matches, or none
gives a longer read, the session's last request is the baseline (ties go to it). Each row
names its baseline in ``compared_with_line``. Candidates are found through an index of the
prefix digests each request wrote (Anthropic: its breakpoint segments; OpenAI before GPT-5.6: its
automatic prefix, every segment boundary from the minimum on; GPT-5.6+: its written
breakpoints, :func:`~promptcache.diff._engine.openai_written`), looked up longest-first; only the last
``_WINDOW`` requests of a session are indexed. A logged read that the chosen prediction says is
impossible lists the causes it contradicts under ``detail.causes_not_confirmed_by_usage``.

The first request of a session is compared with another session's request cut to its tools
and system prompt: the provider's cache is shared by every conversation (a new conversation
reads the system prompt an earlier one wrote). Candidates are the writers, in any session, of
the prefixes it shares and the newest requests of the same provider family and model whose
system prompt is related (half of it in common), whose entries may still live; the largest
predicted read wins. A miss counts only where the related system prompt (or the tools)
changed (a date added), never for another conversation's messages or another application's
prompt, and a read short of the prediction is no miss there (the log does not show when the
other entry became readable): :func:`_cross_baseline`. With no such request it is a ``cold_start``,
unless its prefix is below the model's minimum (it writes nothing): ``uncached`` with cause
``below_minimum`` (case BR-14).

Responses ``previous_response_id``: the server prepends the stored conversation (the named
response's input and output) to the request's input. When the named response is an earlier
line of the log with its ``response.output``, the request is explained as that conversation
followed by its own input (:func:`~promptcache.diff._engine.chained_body`; chains of chains
resolve line by line), so a chained turn reads what the turn before wrote. When the named
response is a line of the log whose conversation is not known (it continues one the log does
not hold: a log that starts mid-conversation; or it was logged without its output), the request
is diffed against that line as ``promptcache diff`` does (:func:`~promptcache.diff._engine.diff`:
when that line itself continues a response, the structure is compared without the shared head,
and the two lines' usage gives the ideal read and the loss). When the named response is not in
the log at all, or the request names a ``conversation`` (the server prepends the
conversation's items, openai-python ``ResponseCreateParams.conversation``), the row's status
is ``cannot_tell`` with cause ``previous_response_chained`` and no prediction (never "0
reads"), its ``path`` the field; changes against the session's last line that invalidate every
entry (model, tools, settings: :func:`~promptcache.diff._engine.cannot_tell`) are its
``secondary`` causes, and with a read short of what that line left cached (its usage) the row
is a ``miss_explained`` by the first of them. Only the conversations (or lines) of responses
that a later line continues are kept, until the last such line (the light scan counts them).

Provider diagnostics are judged against the baseline the provider used: the request's
``diagnostics.previous_message_id`` (Anthropic) or ``prompt_cache_options.comparison_response_id``
(OpenAI) when that response is in the log, else the request's baseline above.

Speed: each request is rendered exactly once (:func:`~promptcache.diff._engine.prepare`);
sessions are found through an index on the first content key; requests are compared on
precomputed content keys, usually once each (a second or third comparison only when the
longest match's writer does not give the read, e.g. after a side request).
``bench/explain_speed.py`` times a 1,000-request log.

Memory: the log is read twice, line by line: a light scan (the line count, and the response
ids requests name as their diagnostics baseline or continue; a text line is parsed only when
it holds one of :data:`_NAMING_NEEDLES`, and a plain ``"previous_response_id": "..."`` is read
from the text; only the request's ids are read), then the explaining pass, which lets each line's parsed body go
once the line is explained. A request's prepared view (and so its body) stays only while a
later request can still use it: as its session's last request, as a writer in the session's
baseline index (at most the last ``_WINDOW`` requests, ``_WRITERS_PER_DIGEST`` per prefix), or
as a response a later request names. Every line leaves its row of the report (and a few
numbers on its ``_Entry``). Entries are not let go by TTL: a log's timestamps need not be in
order, so an entry expired for one line may be live for the next. On a growing conversation
(the log quadratic in size) the peak is a window's worth of requests, not the whole log:
``bench/explain_speed.py --growing 1000``. A one-shot iterable (not a path, list or tuple) is
kept as given, to be read twice.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import re
import stat
import sys
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptcache._cliutil import (
    NOT_A_REQUEST,
    REQUEST_FIELDS,
    incomplete_last_line,
    not_a_request_reason,
    unwrap_request,
    warn_incomplete_last_line,
)
from promptcache._errors import InputError, PromptCacheError
from promptcache._stored import stored_prompt_fields
from promptcache._times import _EPOCH_FLOOR, TIME_KEYS, gap_seconds, timestamp_of
from promptcache.catalog import find_policy
from promptcache.diff._causes import NO_CHANGE_CAUSES
from promptcache.diff._engine import (
    ROUTING_CAUSES,
    Prepared,
    _common_len,
    cache_reported,
    calibration,
    cannot_tell,
    chained_body,
    compare,
    conversation_id,
    entry_ttl_seconds,
    explicit_breakpoints,
    is_warning,
    miss_costs,
    openai_cacheable_tokens,
    openai_idle,
    openai_written,
    prepare,
    read_tolerance,
    response_output,
    stored_prompt_change,
)
from promptcache.diff._inputs import (
    Prices,
    RawDiagnostics,
    Usage,
    parse_diagnostics,
    read_prices,
    read_usage,
)
from promptcache.diff._model import (
    CauseSummary,
    DiffResult,
    ExplainReport,
    PredictedUsage,
    RequestExplanation,
)
from promptcache.lint.sources.request_json import WRAPPER_KEYS, usage_of

__all__ = ["explain", "explain_counted", "iter_log"]

_SESSION_KEYS = ("session_id", "session", "conversation_id", "thread_id")
#: Fields of a log line that are the logger's, not request parameters (a bare-body line).
_LOG_FIELDS = frozenset({"usage", "response", "response_id", "diagnostics",
                         "prompt_cache_diagnostics", *TIME_KEYS, *_SESSION_KEYS})
#: Show a progress bar (on a TTY) from this many requests on.
PROGRESS_THRESHOLD = 200
_MISS_STATUSES = ("miss_explained", "unexplained_miss", "prefix_regression")
#: Requests per session whose written entries are indexed as baselines (older ones are let go).
_WINDOW = 32
#: Most recent writers kept per prefix digest.
_WRITERS_PER_DIGEST = 3
#: Most comparisons made to choose one request's baseline.
_MAX_COMPARES = 4
#: causes that name when B was sent, not what it changed (:func:`_across_sessions`)
_TIMING_CAUSES = frozenset({"sent_before_a", "ttl_expired"})
#: Prefix digests the run-wide index of written entries keeps (oldest let go first), and the
#: recent requests kept per provider family and model as related-prompt baselines.
_SHARED_DIGESTS = 8192
_SHARED_RECENT = 8
#: Share of the longer stable prompt (tools + system text) two requests must have in common
#: (common start plus common end) to be one prompt family (:func:`_related`).
_RELATED_SHARE = 0.5


@dataclass(slots=True, eq=False)  # identity: entries sit in the baseline index's lists
class _Entry:
    line: int
    request: Mapping[str, Any] | None
    usage_raw: Any
    timestamp: float | None
    session: str | None
    response_id: str | None
    diagnostics: RawDiagnostics | None
    provider: str | None
    model: str | None
    prepared: Prepared | None = None
    usage: Usage | None = None
    digests: list[int] | None = None  # prefix digest per cached segment (see _digests)
    indexed: set[int] = field(default_factory=set)  # the digests it is a writer of
    prefix_hash: str | None = None  # the usage record's prompt fingerprint, if logged
    family: str | None = None  # provider family, once known
    output: list[Any] | None = None  # the Responses response's output items, if logged
    chained: str | None = None  # previous_response_id (or conversation) not resolved
    continues: str | None = None  # previous_response_id resolved from the log
    via: str = "previous_response_id"  # the field ``chained`` comes from
    head: _Head | None = None  # the logged line ``chained`` names (its conversation is not)
    retention: str | None = None  # the request's prompt_cache_retention (the body is let go)


@dataclass(slots=True, eq=False)
class _Head:
    """A logged line whose response a later line continues, kept as logged because its
    conversation is not known (it continues one the log does not hold, or its output was not
    logged): the later line is diffed against it as ``promptcache diff`` would."""

    entry: _Entry
    request: Mapping[str, Any]
    output: list[Any] | None


@dataclass(slots=True)
class _Session:
    id: str
    last: _Entry | None = None
    turns: int = 0
    # prefix digest -> the requests that wrote (or refreshed) an entry there, newest first
    written: dict[int, list[_Entry]] = field(default_factory=dict)
    window: deque[_Entry] = field(default_factory=deque)
    # (provider, model) -> the latest line of the session with usage (usage-only checks)
    usage_last: dict[tuple[str | None, str | None], _Entry] = field(default_factory=dict)
    # (family, model) -> the latest request of the session to that model: caches are per
    # model, so a side request to another model (a cheap title model) is no baseline
    last_by_model: dict[tuple[str, str | None], _Entry] = field(default_factory=dict)


@dataclass
class _Shared:
    """What every session's requests wrote, for a session's first request: the provider's
    cache is shared by every conversation of an organisation (a new conversation reads the
    system prompt an earlier one wrote), so a request that starts a session is compared with
    an earlier request of another session (:func:`_cross_baseline`). Bounded: the newest
    :data:`_SHARED_DIGESTS` prefix digests, :data:`_SHARED_RECENT` requests per family, model
    and system-prompt key (at most :data:`_SHARED_DIGESTS` keys)."""

    written: dict[int, list[_Entry]] = field(default_factory=dict)
    #: (family, model, system-prompt key) -> the newest requests: per key, so that a busy
    #: application on the same model does not push another's prompt family out (review 20);
    #: the keys are the system prompt's start and its end (:func:`_system_keys`), so a value
    #: inserted at either end still finds the family through the other
    recent: dict[tuple[str, str | None, str], deque[_Entry]] = field(default_factory=dict)

    def add(self, e: _Entry, digests: Sequence[int]) -> None:
        """Index ``e`` (``digests``: its prefix digest per cached segment) as a writer of the
        entries it wrote (:func:`_written_at`) and as a recent request of its family, model and
        system-prompt keys; the oldest digests and keys go past the bounds."""
        p = e.prepared
        if p is None or p.policy is None:
            return
        for i in _written_at(p):
            writers = self.written.pop(digests[i], None) or []  # re-inserted: newest last
            writers.insert(0, e)
            del writers[_WRITERS_PER_DIGEST:]
            self.written[digests[i]] = writers
        while len(self.written) > _SHARED_DIGESTS:
            del self.written[next(iter(self.written))]
        for skey in _system_keys(p):
            key = (p.family, p.model, skey)
            recent = self.recent.get(key)
            if recent is None:
                if len(self.recent) >= _SHARED_DIGESTS:  # bounded: the oldest key goes
                    del self.recent[next(iter(self.recent))]
                recent = self.recent[key] = deque(maxlen=_SHARED_RECENT)
            recent.appendleft(e)

    def related_recent(self, p: Prepared) -> list[_Entry]:
        """The newest requests of ``p``'s family and model whose system prompt starts or ends
        as ``p``'s (candidates of :func:`_related`), newest first, each once."""
        out: list[_Entry] = []
        seen: set[int] = set()
        for skey in _system_keys(p):
            for c in self.recent.get((p.family, p.model, skey), ()):
                if id(c) not in seen:
                    seen.add(id(c))
                    out.append(c)
        return out


def iter_log(log: str | Path | Iterable[Any], *, name: str | None = None
             ) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, object)`` from a JSONL path or an iterable of dicts / lines.

    A list (or tuple) of text lines whose first non-blank line is not JSON is checked as a
    whole, as a file is: one pretty-printed JSON document is reported as such (this is how
    ``promptcache explain -`` reads standard input, once, into a list of lines).

    An incomplete last line (no newline at its end and not valid JSON: a log being written,
    or whose writer crashed) is skipped with a one-line warning on stderr
    (:func:`promptcache._cliutil.warn_incomplete_last_line`): in a file, and in a list of text
    lines split as ``readlines()`` splits them (the line before it ends with a newline).

    Raises:
        InputError: the file cannot be read, or a line (other than that last one) is not
            valid JSON.
    """
    if isinstance(log, (str, Path)):
        path = Path(log)
        label = name or str(path)
        try:
            handle = path.open(encoding="utf-8")
        except OSError as exc:
            raise InputError(label, exc.strerror or str(exc)) from None
        with handle:
            first = True
            try:
                for n, text in enumerate(handle, 1):
                    if text.strip():
                        try:
                            obj = _loads(text, label, n)
                        except InputError as exc:
                            if incomplete_last_line(text) and "invalid JSON" in exc.reason:
                                warn_incomplete_last_line(label, n)  # a log being written
                                return
                            if first:  # a pretty-printed request (or list) is not JSONL
                                _raise_if_json_document(path, label)
                            raise
                        first = False
                        yield n, obj
            except UnicodeDecodeError as exc:
                raise InputError(label, f"not UTF-8 text ({exc.reason})") from None
        return
    label = name or "<log>"
    first = True
    sized = isinstance(log, (list, tuple))
    total = len(log) if isinstance(log, (list, tuple)) else -1
    terminated = False  # the previous text line ended with a newline (readlines() lines)
    for n, item in enumerate(log, 1):
        if isinstance(item, (str, bytes)):
            text = item.decode("utf-8") if isinstance(item, bytes) else item
            if text.strip():
                try:
                    obj = _loads(text, label, n)
                except InputError as exc:
                    if (n == total and terminated
                            and incomplete_last_line(text) and "invalid JSON" in exc.reason):
                        warn_incomplete_last_line(label, n)  # a log being written
                        return
                    if first and sized and all(isinstance(x, str) for x in log):
                        _raise_if_json_document(None, label, text="\n".join(log))
                    raise
                first = False
                yield n, obj
            terminated = not incomplete_last_line(text)
        else:
            first = False
            yield n, item


def _loads(text: str, label: str, n: int) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InputError(label, f"line {n}: invalid JSON ({exc})") from None
    except RecursionError:
        raise InputError(label, f"line {n}: JSON nested too deeply") from None


def _raise_if_json_document(path: Path | None, label: str, *, text: str | None = None
                            ) -> None:
    """Raise "a JSON document, not JSONL" (with the ``jq -c`` command that converts it) when
    the whole file (or ``text``, the log already read) is one JSON object or array; return
    when it is not."""
    from promptcache._cliutil import json_document_reason

    reason = json_document_reason(str(path) if path is not None else label,
                                  "request logs hold one request per line", text=text)
    if reason is not None:
        raise InputError(label, reason)


def _entry(n: int, obj: Any, label: str) -> _Entry:
    if not isinstance(obj, Mapping):
        raise InputError(label, f"line {n}: a log line must be a JSON object")
    response = obj.get("response") if isinstance(obj.get("response"), Mapping) else None
    request: Any = None
    if not _is_usage_record(obj):
        # found as render, count, diff and lint find it: a bare body, or under a wrapper key
        found = unwrap_request(obj)
        if found is not None:
            request, wrapper = found
            if not wrapper:  # a bare body: the log's own fields are not request parameters
                request = {k: v for k, v in request.items() if k not in _LOG_FIELDS}
    if request is None:  # some loggers store the body as a JSON string
        raw = next((obj[k] for k in WRAPPER_KEYS if isinstance(obj.get(k), str)), None)
        if raw is not None and raw.lstrip().startswith("{"):
            try:
                request = json.loads(raw)
            except ValueError:
                raise InputError(label, f"line {n}: the request is not valid JSON") from None
            except RecursionError:
                raise InputError(label, f"line {n}: JSON nested too deeply") from None
    if request is None and _is_usage_record(obj):
        return _record_entry(n, obj, label)
    usage = usage_of(obj)
    if request is not None and not (isinstance(request, Mapping)
                                    and any(k in request for k in REQUEST_FIELDS)):
        # {"request": {"foo": 1}} would render as an empty chat request: 0 tokens, no miss
        raise InputError(label, f"line {n}: {not_a_request_reason(obj)}")
    if request is None and usage is None:
        reason = not_a_request_reason(obj)
        raise InputError(label, f"line {n}: " + (
            f"{NOT_A_REQUEST[:-1]}, and no usage)" if reason == NOT_A_REQUEST else reason))
    # the first time key holding a positive time; 0 (an "unset" placeholder in many loggers, or
    # the start of a log in relative seconds) only when no other key holds a time
    try:
        timestamp = timestamp_of(obj, strict=True)
    except ValueError as exc:
        raise InputError(label, f"line {n}: bad timestamp ({exc})") from None
    session = next((str(obj[k]) for k in _SESSION_KEYS if obj.get(k) is not None), None)
    rid = obj.get("response_id") or (response.get("id") if response else None)
    model = obj.get("model") if isinstance(obj.get("model"), str) else None
    provider = obj.get("provider") if isinstance(obj.get("provider"), str) else None
    return _Entry(n, request, usage, timestamp, session,
                  str(rid) if rid is not None else None, parse_diagnostics(obj), provider, model,
                  prefix_hash=_prefix_hash(obj), output=response_output(response))


def _prefix_hash(obj: Mapping[str, Any]) -> str | None:
    value = obj.get("prefix_hash")
    return value if isinstance(value, str) and value else None


def _is_usage_record(obj: Mapping[str, Any]) -> bool:
    """A line written by the usage tracker's JSONL sink (a serialised ``UsageRecord``)."""
    return "provider" in obj and ("uncached_input" in obj or "cache_read" in obj) \
        and "usage" not in obj


def _record_entry(n: int, obj: Mapping[str, Any], label: str) -> _Entry:
    try:
        from promptcache.usage.record import UsageRecord

        rec: Any = UsageRecord.model_validate(dict(obj))
    except ImportError:
        rec = {"input_tokens": obj.get("uncached_input"),
               "cache_read_input_tokens": obj.get("cache_read"),
               "cache_creation_input_tokens": obj.get("cache_write")}
    except ValueError as exc:
        raise InputError(label, f"line {n}: not a usage record ({exc})") from None
    start = obj.get("start")
    return _Entry(n, None, rec, float(start) if isinstance(start, (int, float)) else None,
                  str(obj["session"]) if obj.get("session") is not None else None,
                  str(obj["request_id"]) if obj.get("request_id") is not None else None,
                  None, str(obj.get("provider")) if obj.get("provider") else None,
                  obj.get("model") if isinstance(obj.get("model"), str) else None,
                  prefix_hash=_prefix_hash(obj))


def explain(log: str | Path | Iterable[Any], *, provider: str | None = None,
            model: str | None = None, prices: Any = None, progress: bool | None = None,
            name: str | None = None) -> ExplainReport:
    """Explain every cache miss in a request log.

    Args:
        log: a JSONL path, or an iterable of log objects (or JSON lines); see the module doc
            for the line format. A path, list or tuple is read twice, line by line, and a
            line's body is let go once explained; any other iterable is kept whole first.
        provider: request shape for every line (default: each line's ``provider`` field, else
            detected).
        model: model id for every line (default: each request's own ``model``).
        prices: USD per MTok override for every model (default: the catalog's prices in
            force at each line's send time, its ``timestamp`` or another time key; today's
            for a line without one, or with a relative time under 1e9 s).
        progress: show a rich progress bar; None = only on a TTY and from
            ``PROGRESS_THRESHOLD`` requests on.
        name: file name used in error messages.

    Returns:
        An :class:`ExplainReport`: one :class:`RequestExplanation` per line (log order) and a
        summary by cause (count, tokens lost, USD).

    Raises:
        InputError: the log cannot be read (or is one pretty-printed JSON document, not
            JSONL), a line is not a JSON object, holds neither a request nor usage, holds an
            object that is not a request, a request is malformed or nested too deeply, or a
            usage object cannot be parsed (the message names the line).
    """
    return explain_counted(log, provider=provider, model=model, prices=prices,
                           progress=progress, name=name)[0]


def explain_counted(log: str | Path | Iterable[Any], *, provider: str | None = None,
                    model: str | None = None, prices: Any = None,
                    progress: bool | None = None, name: str | None = None
                    ) -> tuple[ExplainReport, int]:
    """:func:`explain`, and how many lines held a request (the rest are usage-only).

    ``promptcache explain`` uses the count: a log with no request in it (a usage log) is
    not a request log, and "0 misses" from it would read as a clean bill.
    """
    label = name or (str(log) if isinstance(log, (str, Path)) else "<log>")
    # Rendering a long log allocates many long-lived objects and few cycles: pausing the
    # cyclic GC saves about a fifth of the run time (bench/explain_speed.py).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _explain(log, label, provider, model, prices, progress)
    finally:
        if was_enabled:
            gc.enable()


def _explain(log: str | Path | Iterable[Any], label: str, provider: str | None,
             model: str | None, prices: Any, progress: bool | None
             ) -> tuple[ExplainReport, int]:
    """Explain ``log`` in one streaming pass (after a light scan, :func:`_scan`).

    Memory: a line's parsed body is let go once it is explained. What stays is one small row
    per line (the report), and per session its last request, the requests of its window
    (:data:`_WINDOW`) that are still writers in its baseline index (with their prepared views),
    and its latest line with usage per provider and model (usage only); plus the prepared
    views of responses that later requests still name as the diagnostics baseline.
    """
    source = _replayable(log, label)
    # named: the response ids that requests name as the provider's diagnostics baseline, and
    # how many of the requests naming each are still to come (its view goes after the last)
    # chains: the response ids that requests continue (previous_response_id), and how many
    # requests still to come name each; stored: the conversation each of them holds
    n_lines, named, chains = _scan(source, label)
    stored: dict[str, list[Any]] = {}
    heads: dict[str, _Head] = {}  # the lines they continue, when their conversation is not
    baselines: dict[str, Prepared] = {}
    show = progress if progress is not None else (
        n_lines >= PROGRESS_THRESHOLD and sys.stderr.isatty())
    sessions: dict[str, _Session] = {}
    # usage-only lines without a session: (provider, model, prefix_hash) -> their group
    loose: dict[tuple[str | None, str | None, str | None], _Session] = {}
    index = _SessionIndex()
    shared = _Shared()
    inferred = 0
    with_request = 0
    # (model, UTC minute of the line's send time; None: no absolute time) -> prices
    price_cache: dict[tuple[str | None, int | None], Prices | None] = {}
    out: list[RequestExplanation] = []

    def prices_for(m: str | None, ts: float | None = None) -> Prices | None:
        """The prices in force when the line was sent (minute precision: dated rows and
        time-of-day prices change on whole minutes); today's without an absolute time."""
        minute = int(ts // 60) if ts is not None and ts >= _EPOCH_FLOOR else None
        key = (m, minute)
        if key not in price_cache:
            price_cache[key] = read_prices(m, prices, at=None if minute is None
                                           else minute * 60.0)
        return price_cache[key]

    lines = iter_log(source, name=label)
    for e in _progress((_entry(n, obj, label) for n, obj in lines), n_lines, show):
        prov = provider or e.provider
        try:
            if e.request is not None:
                with_request += 1
                sent = e.request.get("prompt_cache_retention")
                e.retention = sent if isinstance(sent, str) else None
                body = _resolve_chain(e, prov, stored, heads, chains)
                try:
                    e.prepared = prepare(body, prov, model=model or e.model,
                                         model_given=model is not None)
                except PromptCacheError:
                    if body is e.request:
                        raise
                    # the stored conversation does not render as input: cannot tell
                    e.chained, e.continues, body = e.continues, None, e.request
                    e.prepared = prepare(body, prov, model=model or e.model,
                                         model_given=model is not None)
                _store_chain(e, body, stored, heads, chains)
            family = e.prepared.family if e.prepared is not None else _usage_family(e, prov)
            e.usage = read_usage(e.usage_raw, family)
            e.family = family
        except PromptCacheError as exc:  # InvalidRequestError included
            _raise_unreadable_first(lines, label)
            raise InputError(label, f"line {e.line}: {exc}") from None
        except RecursionError:  # parsed, yet too deep to render
            _raise_unreadable_first(lines, label)
            raise InputError(label, f"line {e.line}: request nested too deeply") from None

        # ---- session
        sess: _Session | None = None
        if e.session is not None:
            sess = sessions.get(e.session)
            if sess is None:
                sess = sessions[e.session] = _Session(e.session)
        elif e.prepared is not None:
            sess = index.find(e.prepared)
            if sess is None:
                inferred += 1
                sess = _Session(f"inferred-{inferred}")
                sessions[sess.id] = sess
        else:  # usage only: one group per provider, model and prompt (not one for all)
            key = (prov, model or e.model, e.prefix_hash)
            sess = loose.get(key)
            if sess is None:
                name = _loose_name(*key)
                while name in sessions:
                    name += "'"
                sess = loose[key] = sessions[name] = _Session(name)
        usage_key = (prov, model or e.model
                     or (e.prepared.model if e.prepared is not None else None))
        try:
            if e.prepared is None:  # usage only: the append-only identity, same provider/model
                prev, res = _usage_baseline(sess, usage_key), None
            elif e.chained is not None:  # continues a conversation the log does not hold
                prev, res = _chained_baseline(e, sess, prov, model, prices)
            else:
                prev, res = _baseline(e, sess, prices_for)
                if prev is None:  # a session's first request: what other sessions wrote
                    prev, res = _cross_baseline(e, shared, prices_for)
            row = _explain_one(e, prev, sess, res, prices_for)
        except RecursionError:  # parsed, yet too deep to compare
            _raise_unreadable_first(lines, label)
            raise InputError(label, f"line {e.line}: request nested too deeply") from None
        wanted = _baseline_id(e.request)
        if (wanted is not None and e.diagnostics is not None and e.prepared is not None
                and wanted in baselines and (prev is None or prev.response_id != wanted)):
            row = _rebase_diagnostics(row, baselines[wanted], e)
        out.append(row)
        if wanted is not None and wanted in named:  # one request fewer still names it
            named[wanted] -= 1
            if not named[wanted]:
                del named[wanted]
                baselines.pop(wanted, None)
        if e.response_id in named and e.prepared is not None:
            baselines[e.response_id] = e.prepared
        # ---- update session state
        if e.prepared is not None and e.prepared.policy is not None and e.chained is None:
            if e.digests is None:
                e.digests = _digests(e.prepared)
            shared.add(e, e.digests)
        _remember(sess, e)
        sess.last = e
        if e.prepared is not None:
            sess.last_by_model[(e.prepared.family, e.prepared.model)] = e
        if e.usage is not None:
            sess.usage_last[usage_key] = e
        sess.turns += 1
        if e.prepared is not None and e.session is None:
            index.update(sess, e.prepared)
        # explained: the body lives on only in the prepared view, while the index holds that
        e.request = None
        e.diagnostics = None

    return _report(out, len(sessions)), with_request


def _chain_id(request: Mapping[str, Any] | None, provider: str | None) -> str | None:
    """The ``previous_response_id`` of a Responses request (None: none, or not Responses)."""
    if not isinstance(request, Mapping):
        return None
    value = request.get("previous_response_id")
    if not isinstance(value, str) or not value or "messages" in request:
        return None
    if provider not in (None, "", "auto", "openai", "openai-responses"):
        return None
    return value


def _resolve_chain(e: _Entry, provider: str | None, stored: dict[str, list[Any]],
                   heads: dict[str, _Head], chains: dict[str, int]) -> Mapping[str, Any]:
    """The body to explain for ``e``: with ``previous_response_id`` naming a logged response,
    that response's conversation (its effective input, then its output items) followed by
    ``e``'s own input, as the server builds it (:func:`~promptcache.diff._engine.chained_body`);
    a chain the log does not resolve (the response is not logged, holds no output, or
    continues one that is not) marks ``e.chained`` (and ``e.head``: the logged line it names,
    if any) and returns the body as logged. So does a ``conversation`` (``e.via``)."""
    assert e.request is not None
    prev = _chain_id(e.request, provider)
    conversation = conversation_id(e.request, provider)
    head = None
    conv = None
    if prev is not None:
        if prev in chains:  # one request fewer still continues it
            chains[prev] -= 1
        conv, head = stored.get(prev), heads.get(prev)
        if prev in chains and not chains[prev]:
            del chains[prev]
            stored.pop(prev, None)
            heads.pop(prev, None)
    if conversation is not None:  # its prompt starts with the conversation's stored items
        e.chained, e.via = conversation, "conversation"
        return e.request
    if prev is None:
        return e.request
    if conv is None:
        e.chained, e.head = prev, head
        return e.request
    e.continues = prev
    return chained_body({"input": conv}, (), e.request)


def _store_chain(e: _Entry, body: Mapping[str, Any], stored: dict[str, list[Any]],
                 heads: dict[str, _Head], chains: dict[str, int]) -> None:
    """Keep ``e``'s conversation (effective input + output) when a later request continues
    its response and both are known; else (it continues a response the log does not resolve,
    or its output was not logged) keep ``e`` as logged, a :class:`_Head`, for that request to
    be diffed against; let the output go."""
    output, e.output = e.output, None
    if e.response_id is None or e.response_id not in chains:
        return
    if e.chained is None and output is not None \
            and isinstance(body.get("input", []), (list, str)):
        stored[e.response_id] = [*_as_items(body.get("input")), *output]
    elif e.via != "conversation":
        heads[e.response_id] = _Head(e, body, output)


def _as_items(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value)


def _chained_baseline(e: _Entry, sess: _Session, provider: str | None, model: str | None,
                      prices: Any) -> tuple[_Entry | None, DiffResult | None]:
    """The baseline and comparison of ``e``, whose prompt starts with a stored conversation
    the log does not resolve (``e.chained``).

    When the response it continues is an earlier line of the log (``e.head``), ``e`` is
    diffed against that line as ``promptcache diff`` does (:func:`~promptcache.diff._engine.diff`:
    B's prompt is A's prompt + A's output + B's input; when A itself continues a response the
    log does not hold, the structure is compared and A's and B's usage give the numbers).
    Otherwise (the response is not in the log, or ``e`` names a ``conversation``), the
    session's last request is the baseline of :func:`~promptcache.diff._engine.cannot_tell`:
    no prediction, but changes that invalidate every entry (model, tools, settings) are
    listed. ``(baseline, None)`` when nothing can be compared."""
    from promptcache.diff._engine import diff

    assert e.request is not None and e.prepared is not None
    if e.head is not None:
        a = e.head.entry
        stamps = (a.timestamp, e.timestamp) if a.timestamp is not None \
            and e.timestamp is not None else None
        own_model = model or (e.model if "model" not in e.request else None)
        try:
            return a, diff(e.head.request, e.request, provider=provider, model=own_model,
                           timestamps=stamps, usage_a=a.usage_raw, usage_b=e.usage_raw,
                           prices=prices, response_a={"id": e.chained,
                                                      "output": e.head.output})
        except (PromptCacheError, ValueError, TypeError):
            pass  # not comparable as a pair: as if the response were not logged
    prev = sess.last
    if prev is None or prev.prepared is None or prev.prepared.family != e.prepared.family:
        return prev, None
    if e.via == "conversation":
        why = (f"it continues the conversation {e.chained!r}: the server prepends the "
               "conversation's items to its input, so its prefix cannot be compared from "
               "the log")
    else:
        why = ("the response it continues is not in the log (or was logged without its "
               "output, or continues one that is not): the server prepends that "
               "conversation to its input, so its prefix cannot be compared from the log")
    return prev, cannot_tell(prev.prepared, e.prepared, usage_b=e.usage, reason=why)


def _left_by(prev: _Entry) -> int | None:
    """Tokens ``prev``'s usage shows in the cache after it (None: unknown): its read + write
    where the usage reports writes (Anthropic, OpenAI GPT-5.6+), else (OpenAI's automatic
    prefix) its whole prompt rounded down to the cached grid."""
    u, p = prev.usage, prev.prepared
    if u is None or p is None or u.cache_read is None:
        return None
    if cache_reported(p):
        return None if u.cache_write is None else u.cache_read + u.cache_write
    if p.family != "openai" or u.uncached_input is None:
        return None
    return openai_cacheable_tokens(u.cache_read + (u.cache_write or 0) + u.uncached_input, p.policy)


def _baseline_id(request: Mapping[str, Any] | None) -> str | None:
    """The response id a request asks the provider to compare against, if any: Anthropic
    ``diagnostics.previous_message_id`` or OpenAI ``prompt_cache_options.comparison_response_id``
    (sources: https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics,
    https://developers.openai.com/api/docs/guides/prompt-caching/diagnostics)."""
    if request is None:
        return None
    for key, name in (("diagnostics", "previous_message_id"),
                      ("prompt_cache_options", "comparison_response_id")):
        node = request.get(key)
        if isinstance(node, Mapping) and isinstance(node.get(name), str):
            return str(node[name])
    return None


def _rebase_diagnostics(row: RequestExplanation, baseline: Prepared,
                        e: _Entry) -> RequestExplanation:
    """Judge the provider's diagnosis against the baseline it used, not the session's last
    request (they differ when the caller names an older response)."""
    assert e.prepared is not None
    if baseline.family != e.prepared.family:
        return row
    res = compare(baseline, e.prepared, diagnostics_b=e.diagnostics, prices=None,
                  with_checks=False)
    detail = {**row.detail, "diagnostics_baseline": _baseline_id(e.request),
              "cause_vs_baseline": res.cause}
    return row.model_copy(update={"diagnostics": res.diagnostics, "detail": detail})


def _loose_name(provider: str | None, model: str | None, prefix_hash: str | None) -> str:
    """The name of a group of usage-only lines without a session id."""
    what = "/".join(x for x in (provider, model) if x)
    if prefix_hash:
        what = f"{what} #{prefix_hash[:12]}".strip()
    return f"(no session: {what})" if what else "(no session)"


def _usage_baseline(sess: _Session, key: tuple[str | None, str | None]) -> _Entry | None:
    """The latest earlier line of ``sess`` with usage and the same provider and model as
    ``key`` (a provider or model unknown on either side matches any): the identity
    ``read[n] >= read[n-1] + write[n-1]`` holds only within one provider's cache of one model."""
    best: _Entry | None = None
    for (prov, model), c in sess.usage_last.items():
        if (prov is None or key[0] is None or prov == key[0]) \
                and (model is None or key[1] is None or model == key[1]) \
                and (best is None or c.line > best.line):
            best = c
    return best


def _write_ttl_seconds(e: _Entry, *, certain: bool = False) -> float:
    """How long the entries ``e`` wrote live: 1 h when it wrote 1 h entries, the TTL its
    record names, else the family's default (:func:`entry_ttl_seconds`: OpenAI's usual idle
    clearing). ``certain``: the longest they may live instead (OpenAI before GPT-5.6: the
    certain bound of the idle lifetime, up to 24 h; review 20: a new conversation three hours
    later read an entry the likely lifetime called gone)."""
    raw = e.usage_raw

    def get(name: str) -> Any:
        return raw.get(name) if isinstance(raw, Mapping) else getattr(raw, name, None)

    ttl = None
    one_hour = get("cache_write_1h")
    creation = get("cache_creation")
    if not isinstance(one_hour, int) and isinstance(creation, Mapping):
        one_hour = creation.get("ephemeral_1h_input_tokens")  # a raw Anthropic usage
    if isinstance(one_hour, int) and one_hour > 0:
        ttl = "1h"
    elif isinstance(get("cache_write_ttl"), str):
        ttl = get("cache_write_ttl")
    retention = e.retention
    if retention is None and e.request is not None:
        sent = e.request.get("prompt_cache_retention")
        retention = sent if isinstance(sent, str) else None
    family = e.family or "anthropic"
    if certain and ttl is None and family == "openai":
        policy = find_policy(e.model)
        if not getattr(policy, "explicit_breakpoints", False):
            return openai_idle(policy, retention).max_s
    return entry_ttl_seconds(ttl, family, find_policy(e.model), retention)


def _usage_family(e: _Entry, provider: str | None) -> str:
    """Provider family of a usage-only line: its provider, model or usage field names."""
    if provider:
        return "anthropic" if provider.startswith("anthropic") else "openai"
    if e.model and "claude" in e.model.lower():
        return "anthropic"
    u = e.usage_raw
    if isinstance(u, Mapping) and ("cache_read_input_tokens" in u
                                   or "cache_creation_input_tokens" in u):
        return "anthropic"
    return "openai"


def _progress(entries: Iterable[_Entry], total: int, show: bool) -> Iterable[_Entry]:
    if not show:
        return entries
    from rich.console import Console
    from rich.progress import track

    # stderr, so a JSON report on stdout stays clean
    return track(entries, total=total, description="explaining", transient=True,
                 console=Console(stderr=True))


class _Replay:
    """A one-shot iterable of log lines, kept so that it can be read twice (scan, explain).

    Not a list: :func:`iter_log` checks a list of text lines as a whole file, an iterator
    line by line, and a replayed iterator must still be read as one."""

    __slots__ = ("items",)

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)


def _replayable(log: str | Path | Iterable[Any], label: str) -> str | Path | Iterable[Any]:
    """``log`` in a form that can be read twice: the path of a regular file (opened again), a
    list or tuple, the lines of any other path (a pipe, ``/dev/stdin``, a process
    substitution: it can be read only once) as ``readlines()`` gives them, or the items of any
    other iterable (which may be one-shot) kept in a :class:`_Replay`.

    Raises:
        InputError: a path that is not a regular file cannot be read, or is not UTF-8 text.
    """
    if isinstance(log, (str, Path)):
        try:
            regular = stat.S_ISREG(os.stat(log).st_mode)
        except OSError:
            return log  # iter_log reports it
        if regular:
            return log
        try:
            with Path(log).open(encoding="utf-8") as handle:
                return handle.readlines()
        except OSError as exc:
            raise InputError(label, exc.strerror or str(exc)) from None
        except UnicodeDecodeError as exc:
            raise InputError(label, f"not UTF-8 text ({exc.reason})") from None
    if isinstance(log, (list, tuple, _Replay)):
        return log
    return _Replay(list(log))


#: Text that a line naming a diagnostics baseline or continuing a response holds (``\u00``: a
#: key spelt with escapes; ``previous_response_id`` with a string value, as JSON writers
#: space it).
_NAMING_NEEDLES = ("previous_message_id", "comparison_response_id", "\\u00",
                   '"previous_response_id":"', '"previous_response_id": "',
                   '\\"previous_response_id\\":\\"', '\\"previous_response_id\\": \\"')
_NEEDLES_RE = re.compile("|".join(re.escape(needle) for needle in _NAMING_NEEDLES))
#: A plain ``"previous_response_id": "<id>"`` (no escapes in the id), as JSON writers space it.
_CHAIN_RE = re.compile(r'"previous_response_id": ?"([^"\\]+)"')


def _scan(log: str | Path | Iterable[Any], label: str
          ) -> tuple[int, dict[str, int], dict[str, int]]:
    """Count the lines of ``log`` (for the progress bar), how many requests name each
    response id as their diagnostics baseline (:func:`_baseline_id`), and how many continue
    each response id (``previous_response_id``), without keeping any line.

    Text lines are parsed only when they hold one of :data:`_NAMING_NEEDLES`. Nothing is
    raised here: a line that cannot be read is reported by the explaining pass, in line order.
    """
    named: dict[str, int] = {}
    chains: dict[str, int] = {}
    count = 0

    def note(n: int, obj: Any) -> None:
        try:
            request = _scan_request(obj)
        except RecursionError:
            return
        wanted = _baseline_id(request)
        if wanted is not None:
            named[wanted] = named.get(wanted, 0) + 1
        chain = _chain_id(request, None)
        if chain is not None:
            chains[chain] = chains.get(chain, 0) + 1

    def text_line(n: int, text: str) -> None:
        nonlocal count
        if text.strip():
            count += 1
            hits = _NEEDLES_RE.findall(text)
            if hits:
                if len(hits) == 1 and hits[0].startswith('"') \
                        and text.count("previous_response_id") == 1:
                    # the usual chained line: the id straight from the text, nothing parsed
                    found = _CHAIN_RE.search(text)
                    if found is not None:
                        chain = found.group(1)
                        chains[chain] = chains.get(chain, 0) + 1
                        return
                try:
                    obj = json.loads(text)
                except (ValueError, RecursionError):
                    return
                note(n, obj)

    if isinstance(log, (str, Path)):
        try:
            handle = Path(log).open(encoding="utf-8", errors="replace")
        except OSError:
            return 0, named, chains
        with handle:
            for n, text in enumerate(handle, 1):
                text_line(n, text)
        return count, named, chains
    for n, item in enumerate(log, 1):
        if isinstance(item, (str, bytes)):
            text_line(n, item.decode("utf-8", "replace") if isinstance(item, bytes) else item)
        else:
            count += 1
            note(n, item)
    return count, named, chains


def _scan_request(obj: Any) -> Mapping[str, Any] | None:
    """The request of a log line as :func:`_entry` finds it (under a wrapper key, a bare body,
    or a JSON string under a wrapper key), for the light scan: nothing else of the line is read
    or validated (no usage, diagnostics, timestamps or output items). None: no request."""
    if not isinstance(obj, Mapping):
        return None
    request: Any = None
    if not _is_usage_record(obj):
        found = unwrap_request(obj)
        if found is not None:
            request = found[0]
    if request is None:
        raw = next((obj[k] for k in WRAPPER_KEYS if isinstance(obj.get(k), str)), None)
        if raw is not None and raw.lstrip().startswith("{"):
            try:
                request = json.loads(raw)
            except ValueError:
                return None
    return request if isinstance(request, Mapping) else None


def _raise_unreadable_first(lines: Iterator[tuple[int, Any]], label: str) -> None:
    """Read the rest of the log, raising the error of the first line that cannot be read:
    that error wins over one found while explaining an earlier line, as when every line was
    read before any was explained."""
    for n, obj in lines:
        _entry(n, obj, label)


def _turns(p: Prepared) -> list[Any]:
    """``p``'s conversation messages: its messages less the system / developer messages of
    the system tier (OpenAI sends the system prompt as a message; every conversation of an
    application repeats it, so it is no shared history: new-user trial 19)."""
    segs = p.segs
    return [m for m in p.messages() if segs[m.segs[0]].tier != "system"]


class _SessionIndex:
    """Finds the inferred session a request continues, in O(segments + messages).

    ``tips`` maps the chained content hash of each session's last request to the session, so
    the longest session prefix of a request is found by walking its own chain backwards.
    ``by_message`` maps message keys to the sessions whose last request holds them, for the
    fallback (history edits): the session sharing the most messages, if at least a third of
    its last request's messages reappear (and at least two once it has two or more: a common
    opener is no shared history, review 20) and the request has no fewer messages
    (conversation messages only: an OpenAI system message is the system prompt,
    :func:`_turns`). Only a
    session whose last request went to the same provider family is continued: two providers
    share no cache, so an OpenAI request repeating an Anthropic request's question starts its
    own session (new-user trial 18: it was compared with the Anthropic one, a false miss).
    """

    def __init__(self) -> None:
        self.tips: dict[str, _Session] = {}
        self.tip_of: dict[str, str] = {}
        self.by_message: dict[tuple[str, ...], set[str]] = {}
        self.messages_of: dict[str, frozenset[tuple[str, ...]]] = {}
        self.count_of: dict[str, int] = {}
        self.order: dict[str, int] = {}
        self.sessions: dict[str, _Session] = {}
        self.family_of: dict[str, str] = {}
        self.clock = 0

    def find(self, p: Prepared) -> _Session | None:
        chain = p.chain()
        msgs = _turns(p)
        for h in reversed(chain):
            sess = self.tips.get(h)
            if sess is not None and self.family_of.get(sess.id) == p.family:
                return sess
        votes: dict[str, int] = {}
        for key in {m.key for m in msgs}:
            for sid in self.by_message.get(key, ()):
                if self.family_of.get(sid) == p.family:
                    votes[sid] = votes.get(sid, 0) + 1
        best: tuple[int, int] | None = None
        best_id: str | None = None
        for sid, shared in votes.items():
            have = len(self.messages_of[sid])
            if shared < min(2, have) or 3 * shared < have or len(msgs) < self.count_of[sid]:
                continue  # one shared message (a common opener) is no shared history
            score = (shared, self.order[sid])
            if best is None or score > best:
                best, best_id = score, sid
        return self.sessions[best_id] if best_id is not None else None

    def update(self, sess: _Session, p: Prepared) -> None:
        sid = sess.id
        old_tip = self.tip_of.pop(sid, None)
        if old_tip is not None and self.tips.get(old_tip) is sess:
            del self.tips[old_tip]
        for key in self.messages_of.get(sid, frozenset()):
            holders = self.by_message.get(key)
            if holders is not None:
                holders.discard(sid)
                if not holders:
                    del self.by_message[key]
        chain = p.chain()
        if chain:
            self.tips[chain[-1]] = sess
            self.tip_of[sid] = chain[-1]
        msgs = _turns(p)
        keys = frozenset(m.key for m in msgs)
        for key in keys:
            self.by_message.setdefault(key, set()).add(sid)
        self.messages_of[sid] = keys
        self.count_of[sid] = len(msgs)
        self.family_of[sid] = p.family
        self.clock += 1
        self.order[sid] = self.clock
        self.sessions[sid] = sess


def _digests(p: Prepared) -> list[int]:
    """A prefix digest per cached segment: ``out[i]`` identifies segments ``0..i`` (content
    keys, cache markers ignored) of this model. In-process hashes: the index lives for one run,
    and a collision costs only a comparison (:func:`compare` checks the keys themselves)."""
    h = hash((p.family, p.model))
    out = []
    for key in p.keys:
        h = hash((h, key))
        out.append(h)
    return out


def _written_at(p: Prepared) -> list[int]:
    """Segment indices where ``p`` writes (or refreshes) a cache entry: its breakpoints
    (Anthropic, and OpenAI's explicit ones), and on OpenAI every segment boundary of its
    automatic prefix from the minimum on."""
    if p.family == "anthropic":
        return sorted(set(p.bps))
    minimum = int(getattr(p.policy, "min_cacheable_tokens", 0) or 0)
    if explicit_breakpoints(p):  # GPT-5.6+: its written breakpoints only
        return [j for j in openai_written(p) if p.end(j) >= minimum]
    return sorted(set(p.bps) | {s.index for s in p.segs if s.end_token >= minimum})


def _remember(sess: _Session, e: _Entry) -> None:
    """Index the entries ``e`` wrote as baselines of its session's later requests, and let
    the request that leaves the session's window go (its prepared view too)."""
    p = e.prepared
    if p is None or p.policy is None:
        if sess.last is not None and not sess.last.indexed:
            sess.last.prepared = None  # a last request that is no baseline: superseded
        return
    digests = e.digests if e.digests is not None else _digests(p)
    written = sess.written
    last = sess.last
    mine = e.indexed
    for i in _written_at(p):  # distinct indices, and e is new: it is in no list yet
        d = digests[i]
        writers = written.get(d)
        if writers is None:
            written[d] = [e]
        else:
            writers.insert(0, e)
            if len(writers) > _WRITERS_PER_DIGEST:
                old = writers.pop()
                old.indexed.discard(d)
                if not old.indexed and old is not last:
                    old.prepared = None
        mine.add(d)
    e.digests = None  # the index holds what later requests look up
    if sess.last is not None and not sess.last.indexed:
        sess.last.prepared = None
    sess.window.append(e)
    if len(sess.window) > _WINDOW:
        old = sess.window.popleft()
        for d in old.indexed:
            held = sess.written.get(d)
            if held is not None and any(w is old for w in held):
                held[:] = [w for w in held if w is not old]
                if not held:
                    del sess.written[d]
        old.indexed.clear()
        old.prepared = None


def _gap(e: _Entry, prev: _Entry) -> float | None:
    return gap_seconds(prev.timestamp, e.timestamp)


def _compare(e: _Entry, prev: _Entry, prices_for: Any) -> DiffResult | None:
    if e.prepared is None or prev.prepared is None or e.prepared.family != prev.prepared.family:
        return None
    changed = stored_prompt_change(prev.prepared.payload, e.prepared.payload,
                                   e.prepared.view.provider)
    if changed is not None:  # the template's text is not in the log
        return cannot_tell(prev.prepared, e.prepared, usage_b=e.usage, reason=changed,
                           cause="stored_prompt_changed")
    return compare(prev.prepared, e.prepared, gap=_gap(e, prev), usage_a=prev.usage,
                   usage_b=e.usage, diagnostics_b=e.diagnostics,
                   prices=prices_for(e.prepared.model, e.timestamp), with_checks=False)


def _baseline(e: _Entry, sess: _Session, prices_for: Any
              ) -> tuple[_Entry | None, DiffResult | None]:
    """The earlier request of ``e``'s session to compare it with, and the comparison.

    Candidates are the writers of ``e``'s own prefix digests, longest prefix first and newest
    writer first; :func:`compare` predicts each one's read (TTL from the timestamps, parameter
    changes such as tool_choice included). The longest predicted read wins, ties going to the
    session's last request to ``e``'s model (caches are per model: a side request to another
    model is no baseline; review 20); that request is also the baseline when nothing matches
    or nothing predicts a read, and when it left more cached than ``e`` read because the API
    stripped thinking blocks (:func:`_stripped_loss`). The walk stops once no shorter prefix
    can beat the best read.

    An earlier line logged with a later start time (a log written at response end is out of
    start order; new-user trial 14) is no baseline: ``e`` was sent before it and could not
    read what it wrote. When the session's last line is such a line and nothing else
    matches, ``e`` has no baseline (``(None, None)``: a cold start)."""
    p = e.prepared
    # the session's last request to e's model (a side request to another model is no
    # baseline of the chat's next turn); with none, the session's last request (a switch to
    # another model mid-conversation is a miss, model_changed: review 21)
    last = sess.last if p is None else (
        sess.last_by_model.get((p.family, p.model)) or sess.last)
    if last is not None and _after_e(e, last):
        last = None
    if p is None or p.policy is None or not sess.written:
        return last, (_compare(e, last, prices_for) if last is not None else None)
    e.digests = digests = _digests(p)
    # OpenAI reads whole 128-token steps: a read one step short of a prefix's end is full
    step = 0 if p.family == "anthropic" or explicit_breakpoints(p) else \
        int(getattr(p.policy, "cache_step_tokens", 128) or 1)
    best: tuple[float, float, bool] | None = None
    slack = 0.0
    best_entry: _Entry | None = None
    best_res: DiffResult | None = None
    last_key: tuple[float, float, bool] | None = None
    last_res: DiffResult | None = None
    tried: set[_Entry] = set()
    for i in range(len(digests) - 1, -1, -1):
        writers = sess.written.get(digests[i])
        if not writers:
            continue
        if best is not None and p.end(i) + 1 < best[0] + slack:
            break  # no entry at a shorter prefix reads more
        for c in writers:  # newest first, so the last request (preferred at a tie) leads
            if c in tried or len(tried) >= _MAX_COMPARES or _after_e(e, c):
                continue
            if best is not None and p.end(i) + 1 < best[0] + slack:
                break  # every writer here wrote the same prefix: none reads more
            tried.add(c)
            res = _compare(e, c, prices_for)
            if res is None or res.predicted is None or res.predicted.cache_read is None:
                continue
            assert c.prepared is not None
            # in estimated tokens (what p.end counts), not the candidate's reported scale
            scale = calibration(c.prepared, c.usage) or 1.0
            # equal reads: the candidate whose cache e continues with the least loss (a side
            # request's own write is no loss of the turn after it: review 20), then the last
            key = (res.predicted.cache_read / scale, -(res.lost_tokens or 0) / scale, c is last)
            if c is last:
                last_key, last_res = key, res
            if best is None or key > best:
                best, best_entry, best_res, slack = key, c, res, step / scale
        if len(tried) >= _MAX_COMPARES:
            break
    if last is not None and last not in tried and best is not None:
        # the last request wrote no entry at e's prefixes (on a model that strips earlier
        # thinking blocks, e's prefix no longer holds them), yet its read may still be as long:
        # what it wrote past the stripped block is then lost, a miss (trial 19)
        res = _compare(e, last, prices_for)
        if res is not None and res.predicted is not None and res.predicted.cache_read is not None \
                and last.prepared is not None:
            scale = calibration(last.prepared, last.usage) or 1.0
            last_key = (res.predicted.cache_read / scale, -(res.lost_tokens or 0) / scale, True)
            last_res = res
    if last is not None and last_key is not None and best is not None and \
            best_entry is not last and _stripped_loss(e, last, last_res):
        # the last request's own entries lost because the API strips its thinking blocks now
        # (a near-tie rule here handed the baseline to side requests: review 20); the read is
        # still the longest any entry gives (the best candidate's), not only what the last
        # request wrote before the stripped block (review 22)
        merged = last_res
        if last_res is not None and best_res is not None and best_res.predicted is not None \
                and last_res.predicted is not None and (best_res.predicted.cache_read or 0) \
                > (last_res.predicted.cache_read or 0):
            merged = last_res.model_copy(update={
                "predicted": best_res.predicted,
                "notes": [n for n in last_res.notes if "exceeds the prediction" not in n]})
        best, best_entry, best_res = last_key, last, merged
    if best_entry is None or best is None or best[0] <= 0 or best_entry is last:
        if last is not None and best_entry is last:
            return last, best_res
        return last, (_compare(e, last, prices_for) if last is not None else None)
    return best_entry, best_res


def _system_text(p: Prepared) -> str:
    """The text of ``p``'s system tier (what every conversation of one prompt family repeats;
    a tool list is shared by unrelated applications too, so it is left out)."""
    return "\n".join(s.text or "" for s in p.segs if s.tier == "system")


#: Characters of the system prompt's start and end that key :attr:`_Shared.recent`.
_SYSTEM_KEY_CHARS = 200


def _system_keys(p: Prepared) -> tuple[str, ...]:
    """Keys of ``p``'s system prompt for :attr:`_Shared.recent`: its first and its last
    :data:`_SYSTEM_KEY_CHARS` characters (none without a system prompt)."""
    text = _system_text(p)
    if not text:
        return ()
    return ("<" + text[:_SYSTEM_KEY_CHARS], ">" + text[-_SYSTEM_KEY_CHARS:])


def _related(a: Prepared, b: Prepared) -> bool:
    """Whether two requests are of one prompt family: their system prompts have at least
    :data:`_RELATED_SHARE` of the longer one in common, counted as a common start plus a
    common end (a value inserted, changed or appended anywhere leaves the rest shared); two
    different applications' prompts are not, even with one tool list (review 17)."""
    sa, sb = _system_text(a), _system_text(b)
    longer = max(len(sa), len(sb))
    if not longer:
        return False
    start = _common_len(sa, sb)
    end = _common_len(sa[start:][::-1], sb[start:][::-1])
    return start + end >= _RELATED_SHARE * longer


def _stable_part(p: Prepared) -> Prepared | None:
    """``p`` cut to what another conversation can read of it: its tools and system tiers, up
    to the last entry it really wrote there (:func:`_written_at` on the whole request: an
    Anthropic or explicit OpenAI breakpoint, the implicit one on GPT-5.6+, an automatic prefix
    before GPT-5.6), with only the breakpoints it wrote; an entry in its own messages (which
    no other conversation holds) is none. None when it wrote nothing there (review 19: a cut
    without messages put GPT-5.6's implicit breakpoint on the system prompt, which the request
    never wrote)."""
    n = p.tier_first("messages")
    written = [i for i in _written_at(p) if i < n] if n else []
    if not written:
        return None
    k = max(written)
    kept = set(written)
    bps = [i for i in p.bps if i in kept]
    return dataclasses.replace(p, segs=p.segs[:k + 1], keys=p.keys[:k + 1], bps=bps,
                               bp_ttl={i: t for i, t in p.bp_ttl.items() if i in kept},
                               _messages=None, _tier_first=None, _chain=None)


def _cross_baseline(e: _Entry, shared: _Shared, prices_for: Any
                    ) -> tuple[_Entry | None, DiffResult | None]:
    """The earlier request of another session to compare the first request of a session
    with, and the comparison; ``(None, None)`` (a cold start) when there is none.

    The provider's cache is shared by every conversation: a new conversation reads an entry
    another one wrote in its tools or system prompt, and one whose system prompt changed
    misses it (new-user trial 18). Each candidate is cut to its tools and system tiers
    (:func:`_stable_part`: another conversation's messages are not ``e``'s to read) and
    compared with ``e`` (TTL from the timestamps; token counts calibrated to the candidate's
    reported usage). Candidates: the writers of ``e``'s own prefix digests in any session,
    longest prefix first, and the newest requests of the same family and model whose system
    prompt is related (:func:`_related`); a candidate whose entries expired before ``e`` was
    sent (its start plus its write TTL, the longest an entry it wrote or refreshed lives) is
    none: ``e`` would have been a cold start whatever it changed (review 17). At most
    :data:`_MAX_COMPARES` are compared; a related candidate wins over an unrelated one (an
    application sharing the tool list must not hide a change of ``e``'s own system prompt,
    review 19), then the largest predicted read (ties: the first). A miss counts only between related prompts (:func:`_across_sessions`); a
    candidate from which nothing can be read is no baseline (a cold start)."""
    p = e.prepared
    if p is None or p.policy is None or e.chained is not None:
        return None, None
    digests = e.digests if e.digests is not None else _digests(p)
    e.digests = digests
    cands: list[_Entry] = []
    seen: set[int] = set()

    def offer(c: _Entry) -> None:
        if id(c) not in seen and c.prepared is not None and not _after_e(e, c):
            seen.add(id(c))
            gap = _gap(e, c)
            if gap is None or gap <= _write_ttl_seconds(c):
                cands.append(c)
            elif gap <= _write_ttl_seconds(c, certain=True) and e.usage is not None \
                    and (e.usage.cache_read or 0) > 0:
                # past the usual clearing (OpenAI: 5-10 min idle) but within the certain bound
                # (up to 24 h): a baseline only for a read that happened, never for a miss
                # (review 21: new conversations hours later were called misses)
                cands.append(c)

    for i in range(len(digests) - 1, -1, -1):
        for c in shared.written.get(digests[i], ()):
            offer(c)
    for c in shared.related_recent(p):
        if c.prepared is not None and _related(c.prepared, p):
            offer(c)
    best: tuple[tuple[bool, int], _Entry, DiffResult] | None = None
    for c in cands[:_MAX_COMPARES]:
        assert c.prepared is not None
        stable = _stable_part(c.prepared)
        if stable is None or stable.family != p.family:
            continue
        res = _compare_stable(e, c, stable, prices_for)
        if res is None or res.predicted is None or res.predicted.cache_read is None:
            continue
        related = _related(c.prepared, p)
        kept = _across_sessions(res, related)
        if kept is None:
            continue
        res = kept
        read = (res.predicted.cache_read if res.predicted is not None else 0) or 0
        key = (related, read)  # one prompt family first (review 19), then the longest read
        if best is None or key > best[0]:
            best = (key, c, res)
    if best is None:
        return None, None
    (_related_best, read), c, res = best
    if read <= 0 and res.verdict == "no_miss":
        return None, None  # nothing another conversation wrote is readable: a cold start
    return c, res


def _compare_stable(e: _Entry, c: _Entry, stable: Prepared, prices_for: Any
                    ) -> DiffResult | None:
    """:func:`_compare` of ``e`` with ``c`` cut to its tools and system tiers (``stable``),
    token counts calibrated to ``c``'s reported usage (the scale of the whole request, given
    as the stable part's total)."""
    assert e.prepared is not None and c.prepared is not None
    usage_a = None
    if c.usage is not None and stable.total:
        scale = calibration(c.prepared, c.usage)
        usage_a = Usage(None, None, None, round(stable.total * scale))
    return compare(stable, e.prepared, gap=_gap(e, c), usage_a=usage_a, usage_b=e.usage,
                   diagnostics_b=e.diagnostics,
                   prices=prices_for(e.prepared.model, e.timestamp), with_checks=False)


def _across_sessions(res: DiffResult, related: bool) -> DiffResult | None:
    """``res`` (a session's first request against another session's stable prompt) as the
    row reports it, or None when it is no baseline (a cold start):

    * between related prompts, a miss the request explains (a changed system prompt loses the
      entry every conversation of the family reads) is reported as it is;
    * a read short of the prediction that nothing in the request explains is none: the log
      does not show when the other conversation's entry became readable (its response's
      start, hosted-api-rules.md 1.9), so concurrent first requests would all look like
      misses; the request is a cold start, as it looks;
    * between unrelated prompts (another application sharing a tool list or a model) nothing
      is a miss: the read predicted, no more;
    * a miss whose first cause is about time, not about the request, is none when the usage
      does not bear it out: a warning-level gap (over GPT-5.6+'s minimum lifetime or OpenAI's
      usual idle clearing: uncertain), as above (a routing cause, another conversation's
      ``prompt_cache_key``, stays a miss); ``sent_before_a`` or ``ttl_expired`` with a read above what they leave readable
      (the other request's entry was readable: the log's times do not show when; new-user
      trial 26: a first request logged at the same second as another conversation's, reading
      its whole system prompt, was a miss of the estimate's noise). Concurrent first requests
      that both wrote (no read) stay a ``sent_before_a`` miss."""
    if res.verdict == "unexplained_miss":
        return None
    if res.verdict == "miss_explained" and res.causes:
        first = res.causes[0]
        if is_warning(first) and first.code in _TIMING_CAUSES:
            # an uncertain lapse (a gap over the usual clearing): not borne out. A routing
            # cause (another conversation's prompt_cache_key) stays a miss: a stable key per
            # shared prefix is the advice (hosted-api-rules.md 2.1; review 26)
            return res.model_copy(update={"verdict": "no_miss"})
        if first.code in _TIMING_CAUSES and res.observed is not None \
                and res.observed.cache_read is not None and res.predicted is not None:
            pred = res.predicted.cache_read or 0
            if res.observed.cache_read > pred + read_tolerance(res.ideal_cache_read):
                return res.model_copy(update={"verdict": "no_miss"})
    if related or res.verdict != "miss_explained":
        return res
    return res.model_copy(update={"verdict": "no_miss"})


def _stripped_loss(e: _Entry, last: _Entry, res: DiffResult | None) -> bool:
    """Whether ``e`` read less than its session's last request left cached (the append-only
    identity: read >= the last read + the last write, beyond the tolerance) because the API
    stripped earlier thinking blocks (the comparison with the last request finds
    ``thinking_stripped``): a plain user turn after a tool loop on an older Claude model
    cannot read what the loop's last turn wrote, a loss another baseline would hide (trial 19).
    """
    if res is None or res.verdict != "miss_explained" or res.cause != "thinking_stripped":
        return False
    if e.usage is None or last.usage is None or e.usage.cache_read is None \
            or last.usage.cache_read is None:
        return False
    left = last.usage.cache_read + (last.usage.cache_write or 0)
    return e.usage.cache_read < left - read_tolerance(left)


def _after_e(e: _Entry, c: _Entry) -> bool:
    """Whether the earlier log line ``c`` started strictly after ``e`` (both timestamped)."""
    gap = _gap(e, c)
    return gap is not None and gap < 0


def _below_minimum(p: Prepared | None) -> dict[str, Any] | None:
    """What shows that ``p`` writes nothing because its prefix is below the model's minimum
    (None when it writes, or when that is not known)."""
    if p is None or p.policy is None:
        return None
    if stored_prompt_fields(p.payload, p.view.provider):
        return None  # the server adds a stored prompt the body does not show: size unknown
    minimum = int(getattr(p.policy, "min_cacheable_tokens", 0) or 0)
    if p.family == "anthropic":
        if not p.bps or any(p.end(j) >= minimum for j in p.bps):
            return None
        return {"minimum_tokens": minimum,
                "largest_breakpoint_prefix_tokens": max(p.end(j) for j in p.bps)}
    minimum = minimum or 1024
    if p.total >= minimum:
        return None
    return {"minimum_tokens": minimum, "prompt_tokens": p.total}


def _explain_one(e: _Entry, prev: _Entry | None, sess: _Session, res: DiffResult | None,
                 prices_for: Any) -> RequestExplanation:
    base: dict[str, Any] = {"line": e.line, "session": sess.id, "turn": sess.turns,
                            "response_id": e.response_id,
                            "compared_with_line": prev.line if prev is not None else None}
    observed = e.usage.cache_read if e.usage is not None else None
    if e.chained is not None and res is None:  # a conversation the log does not hold
        return RequestExplanation(
            **base, status="cannot_tell", cause="previous_response_chained",
            path=e.via, observed_cache_read=observed,
            detail={e.via: e.chained,
                    "reason": f"it continues the conversation {e.chained!r}: the server "
                              "prepends its items to the input" if e.via == "conversation"
                              else "the response it continues is not in the log (or was "
                              "logged without its output, or continues one that is not): "
                              "the server prepends that conversation to its input, so its "
                              "prefix cannot be compared from the log"})
    if res is not None and res.verdict == "cannot_tell":
        assert prev is not None
        return _cannot_tell_row(e, prev, res, base, observed, prices_for)
    if prev is None:
        facts = _below_minimum(e.prepared)
        if facts is not None:  # writes nothing: not a cold start (case BR-14)
            return RequestExplanation(**base, status="uncached", cause="below_minimum",
                                      predicted_cache_read=0, observed_cache_read=observed,
                                      lost_tokens=0, miss_cost_usd=0.0, detail=facts)
        return RequestExplanation(**base, status="cold_start", observed_cache_read=observed)
    gap = _gap(e, prev)
    if res is not None:
        assert e.prepared is not None
        pred = res.predicted.cache_read if res.predicted is not None else None
        status: str
        if res.verdict in ("miss_explained", "unexplained_miss"):
            status = str(res.verdict)
        elif e.usage is None and pred is None:
            status = "no_usage"
        else:
            status = "hit" if (observed or pred) else "uncached"
        primary = res.causes[0] if res.causes else None
        missed = status in _MISS_STATUSES
        # Nothing cached because the prefix is below the model's minimum: say so (a model
        # limit, not a prefix break; case BR-14), without counting it as a miss.
        below = status == "uncached" and res.cause == "below_minimum"
        return RequestExplanation(
            **base, status=status, cause=res.cause if missed or below else None,
            secondary=[c.code for c in res.causes[1:]] if missed else [],
            path=primary.path if missed and primary is not None else None,
            predicted_cache_read=pred, observed_cache_read=observed,
            lost_tokens=res.lost_tokens if missed else 0,
            miss_cost_usd=res.miss_cost_usd if missed else 0.0,
            diagnostics=res.diagnostics, detail={
                **_detail(res, gap, missed, pred, observed),
                **({"previous_response_id": e.continues} if e.continues else {}),
                **({e.via: e.chained} if e.chained else {})})
    # usage only: the append-only identity
    if e.usage is None or prev.usage is None or e.usage.cache_read is None \
            or prev.usage.cache_read is None:
        return RequestExplanation(**base, status="no_usage", observed_cache_read=observed)
    expected = prev.usage.cache_read + (prev.usage.cache_write or 0)
    if e.usage.cache_read >= expected:
        return RequestExplanation(**base, status="hit", observed_cache_read=observed,
                                  detail={"expected_min_read": expected})
    shortfall = expected - e.usage.cache_read
    ttl = _write_ttl_seconds(prev)
    cause = "ttl_expired" if gap is not None and gap > ttl else None
    usd = _shortfall_usd(e, shortfall)
    model = e.model or (prev.model if prev else None)
    pr = prices_for(model, e.timestamp) if model and usd is None else None
    if pr is not None and pr.cache_read is not None:
        rate = pr.write_rate("5m") or pr.input or 0.0
        usd = round(shortfall * (rate - pr.cache_read) / 1_000_000, 10)
    return RequestExplanation(
        **base, status="prefix_regression", cause=cause, observed_cache_read=observed,
        lost_tokens=shortfall, miss_cost_usd=usd,
        detail={"flag": "prefix_regression", "expected_min_read": expected,
                "observed_read": e.usage.cache_read, "shortfall": shortfall,
                "rule": "in an append-only conversation within TTL, read[n] should be >= "
                        "read[n-1] + creation[n-1]",
                **({"gap_seconds": gap, "ttl_seconds": ttl} if gap is not None else {}),
                **({"ttl_note": "OpenAI in-memory entries are usually cleared after 5-10 min "
                                "idle (not guaranteed; always within 1 h): the likely cause"}
                   if cause and (e.family or prev.family) == "openai" else {})})


def _shortfall_usd(e: _Entry, shortfall: int) -> float | None:
    """What ``shortfall`` tokens not read cost the request of a usage-only line that is a
    usage record (a tracker sink's line, a ``UsageRecord``): its cost as billed minus its cost
    had those tokens been read, both priced as the tracker prices records (writes at their TTL,
    the prompt-length tier, batch, service tier, region). The tokens come out of its writes
    first, then its uncached input. None when the line is not a usage record or a cost is
    unknown (the caller then prices the shortfall at the list 5m-write rate). Trial 29: a batch
    Haiku line was priced at twice its real extra cost."""
    raw = e.usage_raw
    try:
        from promptcache.usage.record import UsageRecord

        if isinstance(raw, UsageRecord):
            rec = raw
        elif isinstance(raw, Mapping) and "provider" in raw and "cache_read" in raw:
            rec = UsageRecord.model_validate(dict(raw))
        else:
            return None
        if rec.cache_read is None or rec.uncached_input is None:
            return None
        w5, w1 = rec.cache_write_5m or 0, rec.cache_write_1h or 0
        plain_write = (rec.cache_write or 0) if not (w5 or w1) else 0
        moved = shortfall
        take5 = min(moved, w5)
        moved -= take5
        take1 = min(moved, w1)
        moved -= take1
        take_w = min(moved, plain_write)
        moved -= take_w
        take_u = min(moved, rec.uncached_input)
        update: dict[str, Any] = {
            "cache_read": rec.cache_read + take5 + take1 + take_w + take_u,
            "uncached_input": rec.uncached_input - take_u}
        if w5 or w1:
            update.update(cache_write_5m=w5 - take5, cache_write_1h=w1 - take1,
                          cache_write=(rec.cache_write or 0) - take5 - take1)
        elif rec.cache_write is not None:
            update["cache_write"] = rec.cache_write - take_w
        read_instead = rec.model_copy(update=update)
        tracker = _pricing_tracker()
        actual, ideal = tracker.cost_of(rec), tracker.cost_of(read_instead)
        if actual is None or ideal is None or actual.input is None or ideal.input is None:
            return None
        return round(float(actual.input - ideal.input), 10)
    except Exception:  # a line that is not a valid record: the list-price estimate
        return None


_TRACKER: Any = None


def _pricing_tracker() -> Any:
    """One :class:`~promptcache.usage.UsageTracker` used only to price records (its prices
    and catalog lookups cached across a run)."""
    global _TRACKER
    if _TRACKER is None:
        from promptcache.usage.tracker import UsageTracker

        _TRACKER = UsageTracker(keep_records=False, warn=False)
    return _TRACKER


def _cannot_tell_row(e: _Entry, prev: _Entry, res: DiffResult, base: dict[str, Any],
                     observed: int | None, prices_for: Any) -> RequestExplanation:
    """The row of a request whose prefix cannot be compared from the log (``res`` is a
    ``cannot_tell`` result against ``prev``). A change that invalidates every entry (model,
    tools, settings: the secondary causes) together with an observed read short of what
    ``prev`` left cached (its usage) is a miss (``miss_explained``), priced as ``diff``
    prices one; with no read at all and ``prev``'s usage unknown, a miss of unknown size."""
    template = res.cause == "stored_prompt_changed"  # a change of the request's own
    cutting = [c for c in res.causes[0 if template else 1:]
               if c.code not in NO_CHANGE_CAUSES and not is_warning(c)]
    ideal = _left_by(prev)
    short = observed is not None and (
        observed < ideal - read_tolerance(ideal) if ideal is not None else observed == 0)
    where = "prompt" if template else e.via
    detail: dict[str, Any] = {
        where: (e.request or {}).get("prompt") if template else e.chained,
        "reason": res.causes[0].note or "the prefix cannot be compared from the log"}
    gap = _gap(e, prev)
    if gap is not None:
        detail["gap_seconds"] = gap
    if cutting and short:
        assert e.prepared is not None
        lost = None if ideal is None or observed is None else ideal - observed
        usd = None
        if lost is not None and e.usage is not None:
            seen = PredictedUsage.model_construct(
                cache_read=observed or 0, cache_write=e.usage.cache_write or 0,
                uncached_input=e.usage.uncached_input or 0)
            usd = miss_costs(e.prepared, lost, seen, e.usage,
                         prices_for(e.prepared.model, e.timestamp))[0]
        detail["expected_read"] = ideal
        detail["note"] = (
            "the prefix is not compared (the stored prompt template's text is not in the "
            "log), but the template changed, and the read fell short of what the compared "
            "line left cached" if template else
            "the prefix is not compared (the conversation it continues is not in the log), "
            "but these changes invalidate every cached entry, and the read fell short of what "
            "the compared line left cached")
        return RequestExplanation(
            **base, status="miss_explained", cause=cutting[0].code,
            secondary=[c.code for c in res.causes if c is not cutting[0]],
            path=cutting[0].path, observed_cache_read=observed, lost_tokens=lost,
            miss_cost_usd=usd, detail=detail)
    if cutting and observed:
        detail["causes_not_confirmed_by_usage"] = [c.code for c in cutting]
    return RequestExplanation(
        **base, status="cannot_tell", cause=res.cause,
        secondary=[c.code for c in res.causes[1:]], path=where,
        observed_cache_read=observed, detail=detail)


def _detail(res: DiffResult, gap: float | None, missed: bool, pred: int | None,
            observed: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if gap is not None:
        out["gap_seconds"] = gap
    # warning-level causes (a routing key change, a GPT-5.6+ gap over its minimum TTL) cut
    # nothing: a read after them confirms nothing and contradicts nothing
    found = [c.code for c in res.causes
             if c.code not in NO_CHANGE_CAUSES and not is_warning(c)]
    routing = next((c for c in res.causes if c.code in ROUTING_CAUSES), None)
    if routing is not None:  # a routing hint changed: name it, whatever the outcome
        out["routing"] = (f"prompt_cache_key changed from {routing.detail.get('from')!r} to "
                          f"{routing.detail.get('to')!r}: a routing hint, the read is uncertain "
                          "(a miss is likely on a busy deployment)"
                          + (" (and it was read)" if observed else ""))
    if found and res.observed is not None and (not missed or (
            pred is not None and observed is not None
            and observed > pred + read_tolerance(res.ideal_cache_read))):
        # the payload changed in a way documented to invalidate, yet the read happened (on a
        # miss: more was read than these causes leave readable)
        out["causes_not_confirmed_by_usage"] = found
    if missed and res.notes:
        out["notes"] = res.notes
    return out


def _report(out: list[RequestExplanation], n_sessions: int) -> ExplainReport:
    groups: dict[str, list[RequestExplanation]] = {}
    for r in out:
        if r.status in _MISS_STATUSES:
            key = r.cause or ("unknown (usage only)" if r.status == "prefix_regression"
                              else "no_difference")
            if key in NO_CHANGE_CAUSES:
                # nothing in the payload explains the miss (provider side): one group,
                # whether or not the request appended turns (its row keeps append_only)
                key = "no_difference"
            groups.setdefault(key, []).append(r)
    summary = []
    for cause, rows in groups.items():
        costs = [r.miss_cost_usd for r in rows if r.miss_cost_usd is not None]
        summary.append(CauseSummary(cause=cause, count=len(rows),
                                    lost_tokens=sum(r.lost_tokens or 0 for r in rows),
                                    usd=round(sum(costs), 10) if costs else None))
    summary.sort(key=lambda s: (-(s.usd or 0.0), -s.count, s.cause))
    costs = [s.usd for s in summary if s.usd is not None]
    misses = sum(1 for r in out if r.status in _MISS_STATUSES)
    return ExplainReport(
        requests=out, sessions=n_sessions, misses=misses, summary=summary,
        lost_tokens=sum(s.lost_tokens for s in summary),
        # no miss: the misses cost exactly nothing, whatever is known of the prices
        miss_cost_usd=round(sum(costs), 10) if costs else (0.0 if not misses else None),
        disagreements=sum(1 for r in out if r.diagnostics is not None
                          and r.diagnostics.agrees is False))
