"""PC304 breakpoint.ttl-order: a 1h breakpoint after a 5m one, or a top-level TTL that
differs from the marker on the block it lands on."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import RequestContext, Rule
from promptcache.lint.finding import Finding, Severity

__all__ = ["Rule_PC304"]

_ORDER = {"5m": 0, "30m": 1, "1h": 2}


class Rule_PC304(Rule):
    """A longer-TTL breakpoint follows a shorter-TTL one, or the top-level TTL differs from
    the marker on the last block.

    ## What it does
    Walks the breakpoints in processing order (tools, system, messages, and the automatic
    one) and reports the first ``ttl: "1h"`` breakpoint that comes after a ``"5m"`` one.
    Details: ``ttl``, ``after_path``, ``after_ttl``, ``reason`` (``"ttl_order"``).

    It also reports a top-level (automatic) ``cache_control`` that lands on a block whose own
    ``cache_control`` has a different TTL (a marker without ``ttl`` has the model's default,
    ``"5m"``), at that block. Details: ``ttl`` (the top-level one), ``block_ttl``,
    ``reason`` (``"automatic_ttl_mismatch"``).

    ## Why is this bad?
    Anthropic requires entries with a longer TTL to come before entries with a shorter one;
    gateways report a violation as HTTP 400. A top-level ``cache_control`` whose TTL differs
    from an explicit marker on the last cacheable block is one of the two documented 400s of
    automatic caching (the other, all slots taken, is PC301).

    ## Example
    ```json
    {"system": [{"text": "...", "cache_control": {"type": "ephemeral"}}],
     "messages": [{"role": "user", "content": [{"type": "text", "text": "...",
       "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]}
    ```

    ## Use instead
    Put the 1h breakpoint on the earlier (more stable) block and the 5m one later. With a
    top-level ``cache_control``, give the last block's marker the same TTL or remove one of
    the two (with the same TTL the top-level one adds nothing there).

    ## Fix safety
    Swapping TTLs changes cost (1h writes cost 2x, 5m 1.25x); no automatic fix.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (mixing TTLs;
      automatic caching: "an explicit marker on the last block has a different TTL" is a 400,
      hosted-api-rules.md 1.1)
    """

    code = "PC304"
    name = "breakpoint.ttl-order"
    summary = ("1h breakpoint after a 5m breakpoint, or a top-level TTL that differs from the "
               "last block's marker")
    groups = ("all", "breakpoint")
    severity = Severity.ERROR
    message = "a longer-TTL breakpoint comes after a shorter-TTL one"
    fix_title = "put 1h breakpoints before 5m breakpoints"
    inputs = frozenset({"request"})

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        yield from self._automatic_mismatch(ctx)
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
                                  after_ttl=shortest[2], reason="ttl_order")
                return
            if shortest is None or rank < shortest[0]:
                shortest = (rank, seg.path, bp.ttl)

    def _automatic_mismatch(self, ctx: RequestContext) -> Iterator[Finding]:
        """The top-level ``cache_control`` lands on a block whose own marker has another TTL
        (Anthropic's documented 400, hosted-api-rules.md 1.1)."""
        view = ctx.view
        auto = view.automatic
        if view.provider != "anthropic" or auto is None or view.automatic_index is None:
            return
        seg = view.segments[view.automatic_index]
        bp = seg.breakpoint
        if bp is None or bp.source != "block":
            return
        default = ctx.facts.default_ttl
        top, block = auto.ttl or default, bp.ttl or default
        if top is None or block is None or top == block:
            return
        msg = (f"the top-level cache_control (ttl {top}) lands on {seg.path}, the last "
               f"cacheable block, whose own cache_control has ttl {block}: the API rejects "
               "the request (HTTP 400)")
        fix = (f"give {seg.path} and the top-level cache_control the same TTL, or remove one "
               "of them (with the same TTL the top-level one adds nothing there)")
        yield ctx.finding(self, msg, path=seg.path, fix=fix, ttl=top, block_ttl=block,
                          reason="automatic_ttl_mismatch")
