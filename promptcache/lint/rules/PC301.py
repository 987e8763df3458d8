"""PC301 breakpoint.too-many: more breakpoints than the provider allows."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import RequestContext, Rule
from promptcache.lint.finding import Finding, Severity

__all__ = ["Rule_PC301"]


class Rule_PC301(Rule):
    """More cache breakpoints than the model allows.

    ## What it does
    Counts the breakpoints of a request in processing order — ``cache_control`` on tools,
    system blocks and message blocks, plus Anthropic's automatic (top-level) breakpoint, which
    takes a slot — and reports when the count exceeds the model's limit (4 on Anthropic; 4
    explicit on OpenAI GPT-5.6+), from the catalog. Details: ``count``, ``limit``,
    ``paths_in_processing_order``.

    ## Why is this bad?
    The API rejects the request outright (HTTP 400 ``invalid_request_error``). Frameworks that
    add their own markers on top of the user's hit this (pydantic-ai #3467).

    ## Example
    ```json
    {"tools": [{"name": "search", "cache_control": {"type": "ephemeral"}}],
     "system": [{"text": "...", "cache_control": {"type": "ephemeral"}},
                {"text": "...", "cache_control": {"type": "ephemeral"}}],
     "messages": [... two more cache_control blocks ...]}
    ```

    ## Use instead
    Drop the earliest markers first: a later marker already caches everything before it.

    ## Fix safety
    Dropping the earliest marker is safe for correctness; it may lower the hit rate when the
    dropped marker was the one an earlier request wrote (lookback).

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (at most 4 breakpoints)
    - https://github.com/pydantic/pydantic-ai/issues/3467 (BR-09)
    """

    code = "PC301"
    name = "breakpoint.too-many"
    summary = "More breakpoints than the model allows"
    groups = ("all", "breakpoint")
    severity = Severity.ERROR
    message = "more cache breakpoints than allowed"
    fix_title = "drop the earliest breakpoints; a later one already covers everything before it"
    inputs = frozenset({"request"})

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        limit = ctx.facts.max_breakpoints
        if limit is None:
            return
        bps = ctx.view.breakpoints()
        if ctx.view.provider != "anthropic":
            bps = [b for b in bps if b.breakpoint is not None
                   and b.breakpoint.source == "openai-explicit"]
        if len(bps) <= limit:
            return
        paths = [b.path for b in bps]
        auto = " (including the automatic one)" if ctx.view.automatic_index is not None else ""
        msg = (f"{len(bps)} cache breakpoints{auto}, the limit is {limit}: the API rejects "
               "the request (HTTP 400)")
        yield ctx.finding(self, msg, path=bps[limit].path, count=len(bps), limit=limit,
                          paths_in_processing_order=paths)
