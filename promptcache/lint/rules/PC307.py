"""PC307 breakpoint.volatile-block: the breakpoint block changes between requests."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import LogContext, RequestContext, Rule, text_path
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules._common import Divergence, divergence, readable_before
from promptcache.tokens import get_counter

__all__ = ["Rule_PC307"]


class Rule_PC307(Rule):
    """The block that carries a breakpoint changes between consecutive requests.

    ## What it does
    In request logs, reports a breakpoint block (Anthropic ``cache_control``, or the automatic
    breakpoint's block) of the tools or system part that differs from the previous request's
    block at the same place while everything before it is identical. The message gives the
    tokens every request writes again (the prefix up to its last breakpoint, less the entry of
    an earlier breakpoint it can read). Silent when the prefix up to the breakpoint is under the
    model's minimum (nothing is cached there: PC303). Details: ``stable_tokens`` (the
    unchanged head of the block), ``stable_tail_tokens`` (the unchanged text at its end),
    ``head_prefix_tokens`` (the prompt up to the change), ``tokens_rewritten`` (the prefix
    through the request's last breakpoint, less the entry before the block a request can
    read: every entry from the changed block on is written again),
    ``model_minimum``, ``advice`` (``"split"`` or ``"move"``), ``char_offset``,
    ``previous_request``.

    The advice depends on where the change sits. A dynamic *tail* (most of the stable text
    before the change, and that head long enough to be cached): split the block, breakpoint on
    the stable head. A dynamic *head* (a value near the start, e.g. "Remaining budget: 1234
    credits." before the rules; or a head whose prefix is under the model's minimum): a split
    would cache nothing or little, so move the value after the stable text, or into the
    newest user turn.

    ## Why is this bad?
    Entries are written only at breakpoints, and a lookback only finds entries written at an
    earlier request's breakpoints. A breakpoint on a block that changes writes a fresh entry
    every request and reads none of the block: a stable head is never reusable (openclaw
    #59054: 8,040 tokens written per turn instead of read), and with the change at the start
    the whole block is written again (every token of it billed at the write rate).

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
    With the value at the start (``"Remaining budget: 1234 credits.\\n<1,500 tokens of
    rules>"``), the same shape: the rules first, with the breakpoint, the value in a later
    block or in the newest user turn.

    ## Fix safety
    Splitting the block is safe (the model sees the same text); never leave a whitespace-only
    tail block (PC306). Moving a value changes where the model reads it (usually harmless for
    session data; check instructions that refer to it).

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
            at = f" at character {offset}" if offset is not None else ""
            minimum = cur.facts.min_cacheable_tokens or 0
            if seg.end_token < minimum:
                continue  # nothing is cached at this breakpoint anyway (PC303)
            # the change's prefix: everything before the block plus the block's stable head
            head_prefix = seg.start_token + div.common_tokens
            readable = readable_before(cur, seg)
            read = readable.end_token if readable is not None else 0
            # every entry at or after the changed block holds it: the request's later
            # breakpoints are written again too, up to its last one (as PC101 and explain count;
            # new-user trial 14)
            top = max((bp.end_token for bp in cur.view.breakpoints()
                       if bp.index >= seg.index and bp.end_token >= minimum),
                      default=seg.end_token)
            rewritten = max(0, top - read)
            tail = _common_tail_tokens(cur, div)
            # a split (breakpoint on the stable head) caches nothing when the head's prefix is
            # under the minimum, and saves little when most of the stable text follows the change
            move = head_prefix < minimum or tail > div.common_tokens
            fix: str | None = None
            if move:
                where = ", before most of its stable text" if tail > div.common_tokens else ""
                msg = (f"{seg.path} carries a breakpoint and changed since the previous request"
                       f"{at}{where}: every request writes about {rewritten} tokens "
                       "again instead of reading them"
                       + (f" (the {tail} tokens after the change are the same each time)"
                          if tail else ""))
                if head_prefix < minimum:
                    msg += (f"; the text before the change is {head_prefix} tokens, under "
                            f"{cur.facts.model or cur.view.model}'s minimum of {minimum}, so "
                            "a breakpoint there would cache nothing")
                fix = ("move the varying value after the stable text (after the breakpoint, in "
                       "a later block) or into the newest user turn, so the stable text is an "
                       "identical prefix of every request")
            else:
                msg = (f"{seg.path} carries a breakpoint and changed since the previous request"
                       f"{at}: its stable part (first {div.common_tokens} tokens) is never "
                       f"reusable; every request writes about {rewritten} tokens again")
            yield cur.finding(self, msg, path=seg.path, offset=offset, fix=fix,
                              at=text_path(seg) if offset is not None else seg.path,
                              stable_tokens=div.common_tokens, stable_tail_tokens=tail,
                              head_prefix_tokens=head_prefix, tokens_rewritten=rewritten,
                              model_minimum=minimum or None,
                              advice="move" if move else "split",
                              char_offset=offset, previous_request=cur.previous.entry)


def _common_tail_tokens(cur: RequestContext, div: Divergence) -> int:
    """Tokens of the text the two blocks share at their end, after the change (0 when either
    is not text)."""
    a, b = div.previous.text, div.segment.text
    if a is None or b is None or div.char_offset is None:
        return 0
    start = div.char_offset
    n = min(len(a), len(b)) - start
    i = 0
    while i < n and a[-1 - i] == b[-1 - i]:
        i += 1
    return get_counter(cur.view.model).count(b[len(b) - i:]) if i else 0
