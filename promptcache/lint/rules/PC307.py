"""PC307 breakpoint.volatile-block: the breakpoint block changes between requests."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import LogContext, Rule, text_path
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules._common import divergence

__all__ = ["Rule_PC307"]


class Rule_PC307(Rule):
    """The block that carries a breakpoint changes between consecutive requests.

    ## What it does
    In request logs, reports a breakpoint block (Anthropic ``cache_control``, or the automatic
    breakpoint's block) of the tools or system part that differs from the previous request's
    block at the same place while everything before it is identical. Details:
    ``stable_tokens`` (the unchanged head of the block), ``char_offset``, ``previous_request``.

    ## Why is this bad?
    Entries are written only at breakpoints, and a lookback only finds entries written at an
    earlier request's breakpoints. A breakpoint on a block with a stable head and a small
    dynamic tail writes a fresh entry every request and reads none: the stable head is never
    reusable (openclaw #59054: 8,040 tokens written per turn instead of read).

    ## Example
    ```json
    {"system": [{"type": "text", "cache_control": {"type": "ephemeral"},
      "text": "<6,000 tokens of rules>\\n## Session context\\nopen files: a.py, c.py"}]}
    ```

    ## Use instead
    ```json
    {"system": [{"type": "text", "text": "<6,000 tokens of rules>",
                 "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "## Session context\\nopen files: a.py, c.py"}]}
    ```

    ## Fix safety
    Splitting the block is safe (the model sees the same text); never leave a whitespace-only
    tail block (PC306).

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (breakpoints and lookback)
    - https://github.com/openclaw/openclaw/pull/59054 (BR-08)
    """

    code = "PC307"
    name = "breakpoint.volatile-block"
    summary = "Breakpoint on a block that changes every request"
    groups = ("all", "breakpoint", "log")
    severity = Severity.WARNING
    message = "the block carrying the breakpoint changed since the previous request"
    fix_title = "split the block: breakpoint on the stable head, dynamic tail after it"
    inputs = frozenset({"log"})

    def check_log(self, ctx: LogContext) -> Iterator[Finding]:
        for cur in ctx.entries:
            div = divergence(cur)
            if div is None or cur.previous is None:
                continue
            seg = div.segment
            marked = seg.breakpoint is not None or cur.view.automatic_index == seg.index
            if not marked or seg.tier not in ("tools", "system"):
                continue
            offset = div.char_offset
            msg = (f"{seg.path} carries a breakpoint and changed since the previous request"
                   + (f" at character {offset}" if offset is not None else "")
                   + f": its stable part (first {div.common_tokens} tokens) is never reusable")
            yield cur.finding(self, msg, path=seg.path, offset=offset,
                              at=text_path(seg) if offset is not None else seg.path,
                              stable_tokens=div.common_tokens,
                              char_offset=offset, previous_request=cur.previous.entry)
