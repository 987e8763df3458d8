"""PC501 log.hit-rate-zero: no cache reads after warm-up."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from promptcache.lint.engine import LogContext, RequestContext, Rule
from promptcache.lint.finding import Finding, Severity

__all__ = ["Rule_PC501", "cache_read_tokens"]


def cache_read_tokens(usage: Mapping[str, Any]) -> int | None:
    """Cache-read tokens of one response usage (Anthropic or OpenAI shape); None if absent."""
    value = usage.get("cache_read_input_tokens")
    if isinstance(value, int):
        return value
    for details in ("prompt_tokens_details", "input_tokens_details"):
        inner = usage.get(details)
        if isinstance(inner, Mapping) and isinstance(inner.get("cached_tokens"), int):
            return int(inner["cached_tokens"])
    return None


class Rule_PC501(Rule):
    """The hit rate stays at 0 after warm-up.

    ## What it does
    In a log whose records carry response usage, looks at cacheable requests (Anthropic: with
    a breakpoint; OpenAI: at least the minimum length) after the first one (the warm-up
    write). When there are at least two of them and none read a single cached token, reports
    it on the first such request. Details: ``requests_after_warmup``, ``hit_rate`` (0.0).

    ## Why is this bad?
    A cache that is written and never read costs more than no cache (writes are 1.25x or 2x on
    Anthropic). The cause is usually another finding in the same file (a volatile value, a
    breakpoint below the minimum, a moving breakpoint).

    ## Example
    Usage ``cache_read_input_tokens: 0`` on every request of a session.

    ## Use instead
    Fix the cause; run ``promptcache explain`` on the log to find the first divergence.

    ## Fix safety
    Not applicable (a symptom, not a code pattern).

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (usage fields)
    - https://developers.openai.com/api/docs/guides/prompt-caching (cached_tokens)
    """

    code = "PC501"
    name = "log.hit-rate-zero"
    summary = "Hit rate stuck at 0 after warm-up"
    groups = ("all", "log")
    severity = Severity.WARNING
    message = "no cache reads after warm-up"
    fix_title = "find the first divergence (promptcache explain) and fix its cause"
    inputs = frozenset({"log"})

    def check_log(self, ctx: LogContext) -> Iterator[Finding]:
        rows: list[tuple[RequestContext, int]] = []
        for e in ctx.entries:
            if e.usage is None or e.cached_end is None:
                continue
            reads = cache_read_tokens(e.usage)
            if reads is None:
                continue
            rows.append((e, reads))
        after = rows[1:]
        if len(after) < 2 or any(r > 0 for _, r in after):
            return
        msg = (f"none of the {len(after)} cacheable requests after the first read a cached "
               "token: the cache is written and never used")
        yield after[0][0].finding(self, msg, path=None, requests_after_warmup=len(after),
                                  hit_rate=0.0)
