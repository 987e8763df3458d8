"""PC101 volatile.timestamp: a clock value inside the cached prefix."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import PythonContext, RequestContext, Rule
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules._common import (
    rewritten_note,
    template_note,
    template_variable_hits,
    volatile_hits,
)

__all__ = ["Rule_PC101"]

#: How often a value of each granularity changes, for the messages.
_EVERY = {"day": "once a day", "hour": "every hour", "minute": "every minute",
          "second": "every second"}


def _every(granularity: str | None) -> str:
    """``"every minute"`` ...; finer than a second (or unknown): ``"on every request"``."""
    return _EVERY.get(granularity or "", "on every request")


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
    inputs = frozenset({"request", "python"})

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        for hit in volatile_hits(ctx):
            m = hit.match
            if m.kind != "timestamp":
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
            if m.kind != "timestamp":
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
                   f"{flow.call} (line {flow.sink_line}): the cached prefix changes "
                   f"{_every(gran)}")
            yield ctx.finding(self, flow, msg, severity=vol.severity, inside_cached_prefix=True)
