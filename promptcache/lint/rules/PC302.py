"""PC302 breakpoint.lookback-exceeded: a breakpoint too far past the last written entry."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import RequestContext, Rule
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules._common import content_key

__all__ = ["Rule_PC302"]


class Rule_PC302(Rule):
    """A breakpoint lies beyond the lookback window of every entry the previous request wrote.

    ## What it does
    Needs the previous request (a log, or ``lint_request(previous=...)``). Anthropic writes
    cache entries only at breakpoints and finds them only by looking back at most 20
    positions from each breakpoint (a run of ``tool_use`` or of ``tool_result`` blocks counts
    as one position). This rule finds the last position ``w`` where the previous request wrote
    an entry that is still a prefix of this request; if no breakpoint of this request lies
    within the window after ``w`` but one lies beyond it, the request re-writes everything
    after the latest entry still within reach (often the system breakpoint). Details:
    ``distance_blocks``, ``limit``, ``written_at`` (path), ``read_through`` (path of the entry
    still read, or None), ``tokens_read``, ``tokens_written`` (cache write of this request)
    and ``tokens_rewritten`` (tokens the previous request cached that are written again),
    all in estimated tokens.

    ## Why is this bad?
    An agent step with a wide tool fan-out pushes the single moving breakpoint past the
    window: the lookback finds nothing, no error is returned, and the whole conversation is
    billed as a cache write again (stella #1837: 76 % vs 93 % read ratio).

    ## Example
    Previous request: breakpoint on message block #9. This request: 24 new blocks, one
    breakpoint on block #33 — 24 positions after #9.

    ## Use instead
    Keep a second, lagging breakpoint within 20 positions of the previous one (about every
    15 positions in long turns), e.g. on block #29 and #33.

    ## Fix safety
    Adding a breakpoint is safe if a slot is free (see PC301); it adds one cache write.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (20-block lookback)
    - https://github.com/macanderson/stella/issues/1837 (BR-12)
    """

    code = "PC302"
    name = "breakpoint.lookback-exceeded"
    summary = "Breakpoint beyond the lookback window"
    groups = ("all", "breakpoint")
    severity = Severity.WARNING
    message = "breakpoint beyond the lookback window of the last written entry"
    fix_title = "add a breakpoint within 20 positions of the previous one"
    inputs = frozenset({"request"})

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        limit = ctx.facts.lookback_positions
        prev = ctx.previous
        if limit is None or prev is None or ctx.view.provider != "anthropic":
            return
        cur_segs = ctx.view.segments
        shared = 0
        for a, b in zip(prev.view.segments, cur_segs, strict=False):
            if a is not b and content_key(a) != content_key(b):
                break
            shared += 1
        written = [b for b in prev.view.breakpoints() if b.index < shared]
        if not written:
            return
        w = written[-1]
        bps = [b for b in ctx.view.breakpoints() if b.index > w.index]
        if not bps:
            return
        w_pos = cur_segs[w.index].position
        if any(b.position - w_pos <= limit for b in bps):
            return
        first = bps[0]
        distance = first.position - w_pos
        minimum = ctx.facts.min_cacheable_tokens or 0
        # what is still read: the latest entry the previous request wrote that some breakpoint
        # of this request reaches within the lookback (e.g. the system breakpoint)
        read, read_at = 0, None
        for e in reversed(written):
            end = cur_segs[e.index].end_token
            pos = cur_segs[e.index].position
            if end >= minimum and any(b.index >= e.index and b.position - pos <= limit
                                      for b in ctx.view.breakpoints()):
                read, read_at = end, e.path
                break
        top = max((b.end_token for b in ctx.view.breakpoints() if b.end_token >= minimum),
                  default=0)
        written_tokens = max(0, top - read)
        lost = max(0, cur_segs[w.index].end_token - read)
        reads = (f"reads only about {read} tokens (through the breakpoint at {read_at}, "
                 "within reach)" if read_at else "reads nothing")
        msg = (f"breakpoint at {first.path} is {distance} positions after the last entry the "
               f"previous request wrote ({w.path}); the lookback covers {limit}: this request "
               f"{reads} and writes about {written_tokens} tokens, {lost} of them cached by "
               "the previous request")
        yield ctx.finding(self, msg, path=first.path, distance_blocks=distance, limit=limit,
                          written_at=w.path, read_through=read_at, tokens_read=read,
                          tokens_written=written_tokens, tokens_rewritten=lost)
