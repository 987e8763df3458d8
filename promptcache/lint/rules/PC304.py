"""PC304 breakpoint.ttl-order: a 1h breakpoint after a 5m one."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import RequestContext, Rule
from promptcache.lint.finding import Finding, Severity

__all__ = ["Rule_PC304"]

_ORDER = {"5m": 0, "30m": 1, "1h": 2}


class Rule_PC304(Rule):
    """A longer-TTL breakpoint follows a shorter-TTL one.

    ## What it does
    Walks the breakpoints in processing order (tools, system, messages, and the automatic
    one) and reports the first ``ttl: "1h"`` breakpoint that comes after a ``"5m"`` one.
    Details: ``ttl``, ``after_path``, ``after_ttl``.

    ## Why is this bad?
    Anthropic requires entries with a longer TTL to come before entries with a shorter one;
    gateways report a violation as HTTP 400.

    ## Example
    ```json
    {"system": [{"text": "...", "cache_control": {"type": "ephemeral"}}],
     "messages": [{"role": "user", "content": [{"type": "text", "text": "...",
       "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]}
    ```

    ## Use instead
    Put the 1h breakpoint on the earlier (more stable) block and the 5m one later.

    ## Fix safety
    Swapping TTLs changes cost (1h writes cost 2x, 5m 1.25x); no automatic fix.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (mixing TTLs)
    """

    code = "PC304"
    name = "breakpoint.ttl-order"
    summary = "1h breakpoint after a 5m breakpoint"
    groups = ("all", "breakpoint")
    severity = Severity.ERROR
    message = "a longer-TTL breakpoint comes after a shorter-TTL one"
    fix_title = "put 1h breakpoints before 5m breakpoints"
    inputs = frozenset({"request"})

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        if not ctx.facts.longer_ttl_first:
            return
        shortest: tuple[int, str, str] | None = None
        for seg in ctx.view.breakpoints():
            bp = ctx.view.breakpoint_of(seg)
            if bp is None or bp.ttl not in _ORDER:
                continue
            rank = _ORDER[bp.ttl]
            if shortest is not None and rank > shortest[0]:
                msg = (f"{bp.ttl} breakpoint at {seg.path} comes after the {shortest[2]} "
                       f"breakpoint at {shortest[1]}: longer TTLs must come first")
                yield ctx.finding(self, msg, path=seg.path, ttl=bp.ttl, after_path=shortest[1],
                                  after_ttl=shortest[2])
                return
            if shortest is None or rank < shortest[0]:
                shortest = (rank, seg.path, bp.ttl)
