"""PC101 volatile.timestamp: a clock value inside the cached prefix."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet

from promptcache.lint.engine import LogContext, PythonContext, RequestContext, Rule, text_path
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules._common import (
    MAX_HITS_PER_SEGMENT,
    rewritten_note,
    template_note,
    template_variable_hits,
    volatile_hits,
)
from promptcache.lint.volatile import scan_text

__all__ = ["Rule_PC101"]

#: How often a value of each granularity changes, for the messages.
_EVERY = {"day": "once a day", "hour": "every hour", "minute": "every minute",
          "second": "every second"}


def _every(granularity: str | None) -> str:
    """``"every minute"`` ...; finer than a second (or unknown): ``"on every request"``."""
    return _EVERY.get(granularity or "", "on every request")


#: The longest a value of each granularity can stay the same on a clock, in seconds: a log
#: whose requests span at least this long saw such a clock change (a civil day lasts 25 hours
#: when summer time ends, so a local date can hold that long).
_LONGEST = {"microsecond": 1e-6, "millisecond": 1e-3, "second": 1.0, "minute": 60.0,
            "hour": 3600.0, "day": 25 * 3600.0}


def _values_at(ctx: RequestContext, path: str) -> set[str]:
    """The timestamp literals in the text at payload ``path`` of ``ctx`` (a system block, a
    tool, a stored prompt template's variable), scanned as :func:`volatile_hits` scans."""
    if path.startswith("prompt.variables."):
        return {t.match.match for t in template_variable_hits(ctx)
                if t.path == path and t.match.kind == "timestamp"}
    for seg in ctx.view.segments:
        if seg.text and text_path(seg) == path:
            return {m.match for m in scan_text(seg.text, MAX_HITS_PER_SEGMENT)
                    if m.kind == "timestamp"}
    return set()


def _stable_in_log(entries: Sequence[RequestContext]) -> set[tuple[int, str, str]]:
    """``(entry, path, value)`` of the timestamp literals a log proves stable: the value is
    at the same payload path in every request of its agent (the requests linked by
    ``previous``: same provider, model and tool set), and their send times span at least
    the longest a clock value of its granularity lasts (:data:`_LONGEST`), so a clock would
    have changed. Requests without a send time do not count towards the span, nor does a
    body sent again unchanged (a retry carries its first attempt's clock: it counts at that
    attempt's time)."""
    groups: dict[int, list[RequestContext]] = {}
    group_of: dict[int, int] = {}
    for e in entries:
        g = group_of.get(id(e.previous), id(e)) if e.previous is not None else id(e)
        group_of[id(e)] = g
        groups.setdefault(g, []).append(e)
    out: set[tuple[int, str, str]] = set()
    for members in groups.values():
        first: dict[str, float] = {}  # each distinct body's first send time
        for e in members:
            if e.timestamp is not None:
                body = json.dumps(e.payload, sort_keys=True, default=str)
                first[body] = min(first.get(body, e.timestamp), e.timestamp)
        if len(first) < 2:
            continue
        span = max(first.values()) - min(first.values())
        candidates = {(path, m.match, m.granularity)
                      for e in members
                      for path, m in [*((h.path, h.match) for h in volatile_hits(e)),
                                      *((t.path, t.match) for t in template_variable_hits(e))]
                      if m.kind == "timestamp"}
        for path, value, gran in candidates:
            longest = _LONGEST.get(gran or "")
            if longest is None or span < longest:
                continue
            if all(value in _values_at(e, path) for e in members):
                out.update((id(e), path, value) for e in members)
    return out


class Rule_PC101(Rule):
    """A timestamp or date inside the cached prefix.

    ## What it does
    Finds date-times, dates, clock times and epoch values in the parts of a request that are
    rebuilt on every call (tools, system prompt, system/developer messages) when they lie
    inside the cached prefix: before an Anthropic breakpoint (explicit or automatic), or
    inside OpenAI's automatic prefix (everything before the newest message, from 1,024
    tokens). In Python source it follows ``datetime.now()``, ``time.time()`` and friends into
    ``system=`` / ``tools=`` / the first messages of an API call.

    The value's granularity sets the severity: a value that changes every second, minute or
    hour is a warning; a date (changes once a day) is info. Details: ``granularity``,
    ``match``, ``char_offset``, ``json_key``, ``inside_cached_prefix``, ``breakpoint_path``,
    ``tokens_invalidated`` (the cached tokens after the value) and ``tokens_rewritten``
    (the tokens written again at each change: on Anthropic also those before the value back
    to the last breakpoint a request can read, the whole prefix when there is none). A value
    in the ``variables`` of a Responses stored prompt template (``prompt``) is reported too:
    the server substitutes it into the template, before the input (``template_variable``;
    the token figures are None, the template's size not being in the body).

    In a request log (JSONL, recorded exchanges) the log is evidence: a value at the same
    payload path in every request of one agent (same provider, model and tool set) whose
    send times span at least the longest a clock value of its granularity lasts (a day: 25
    hours, for the day summer time ends) is stable text, not a clock, and is not reported
    ("Refund policy updated: 2024-03-01." in requests sent over two days). A single
    request, or a log too short to show a clock change, is read as above.

    ## Why is this bad?
    Caching is an exact prefix match. A clock value makes every request's prefix different
    from the one before, so everything after it is written again (1.25x or 2x the input price
    on Anthropic) and never read. This is the most common reported cause of a 0 % hit rate
    (goose, pi, cherry-studio).

    ## Example
    ```json
    {"system": [{"type": "text", "cache_control": {"type": "ephemeral"},
      "text": "You are a coding agent.\\nCurrent date and time: 2025-05-04 14:03:27\\n..."}]}
    ```

    ## Use instead
    ```json
    {"system": [{"type": "text", "cache_control": {"type": "ephemeral"},
      "text": "You are a coding agent.\\nCurrent date: 2025-05-04\\n..."}]}
    ```
    or send the clock in the newest user turn, after the last breakpoint.

    ## Fix safety
    No automatic fix. Coarsening the value changes what the model sees (it no longer knows
    the time of day); moving it changes where it appears. Both are behaviour changes the
    author must accept.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (what invalidates)
    - https://developers.openai.com/api/docs/guides/prompt-caching (static content first)
    - https://github.com/aaif-goose/goose/pull/2434 (BR-01)
    """

    code = "PC101"
    name = "volatile.timestamp"
    summary = "Timestamp or date inside the cached prefix"
    groups = ("all", "volatile")
    severity = Severity.WARNING
    message = "timestamp inside the cached prefix"
    fix_title = "coarsen to the date, or move the clock into the newest user turn"
    inputs = frozenset({"request", "log", "python"})
    aggregate_in_logs = True

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        return self._findings(ctx, frozenset())

    def check_log(self, ctx: LogContext) -> Iterator[Finding]:
        stable = _stable_in_log(ctx.entries)
        for entry in ctx.entries:
            yield from self._findings(entry, stable)

    def _findings(self, ctx: RequestContext,
                            stable: AbstractSet[tuple[int, str, str]]) -> Iterator[Finding]:
        """Findings for one request, without the values its log proves stable."""
        for hit in volatile_hits(ctx):
            m = hit.match
            if m.kind != "timestamp" or (id(ctx), hit.path, m.match) in stable:
                continue
            sev = Severity.INFO if m.granularity == "day" else Severity.WARNING
            where = (f"before the breakpoint at {hit.breakpoint_path}" if hit.breakpoint_path
                     else "inside the automatic cached prefix")
            when = _every(m.granularity)
            msg = (f"{m.granularity}-granularity timestamp {m.match!r} sits {where}: about "
                   f"{hit.tokens_invalidated} tokens after it lose caching {when}"
                   + rewritten_note(hit))
            yield ctx.finding(self, msg, path=hit.path, offset=m.start, severity=sev,
                              match=m.match, granularity=m.granularity, subkind=m.subkind,
                              char_offset=m.start, json_key=m.json_key,
                              inside_cached_prefix=True, breakpoint_path=hit.breakpoint_path,
                              tokens_invalidated=hit.tokens_invalidated,
                              tokens_rewritten=hit.tokens_rewritten)
        for t in template_variable_hits(ctx):
            m = t.match
            if m.kind != "timestamp" or (id(ctx), t.path, m.match) in stable:
                continue
            sev = Severity.INFO if m.granularity == "day" else Severity.WARNING
            msg = (f"{m.granularity}-granularity timestamp {m.match!r} {template_note(t)} "
                   f"{_every(m.granularity)}")
            yield ctx.finding(self, msg, path=t.path, offset=m.start, severity=sev,
                              match=m.match, granularity=m.granularity, subkind=m.subkind,
                              char_offset=m.start, json_key=m.json_key,
                              inside_cached_prefix=True, breakpoint_path=None,
                              template_variable=t.variable, tokens_invalidated=None,
                              tokens_rewritten=None)

    def check_python(self, ctx: PythonContext) -> Iterator[Finding]:
        for flow in ctx.flows:
            vol = flow.volatility
            if vol.kind != "timestamp" or flow.sink == "prompt_cache_key=":
                continue
            gran = vol.granularity or "second"
            if gran in ("month", "year", "week"):
                continue
            msg = (f"{gran}-granularity clock value {vol.origin!r} flows into {flow.sink} of "
                   f"{flow.call} ({flow.where}): the cached prefix changes "
                   f"{_every(gran)}")
            yield ctx.finding(self, flow, msg, severity=vol.severity, inside_cached_prefix=True)
