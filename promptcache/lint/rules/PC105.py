"""PC105 log.prefix-varies: content inside the cached prefix differs between requests."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import LogContext, Rule, text_path
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules._common import (
    _before_stored,
    divergence,
    readable_before,
    same_canonical,
    stored_prompt_label,
)
from promptcache.lint.volatile import scan_text

__all__ = ["Rule_PC105"]


class Rule_PC105(Rule):
    """Content inside the cached prefix changes between requests of a log.

    ## What it does
    Compares each request of a JSONL log (or recorded exchange list) with the request before
    it. When they first differ in the tools or system part — or inside earlier turns of a
    conversation that grew (a history edit) — and that point lies inside the cached prefix
    but is not the breakpoint block itself (PC307) nor a pure reordering (PC201, PC203), it
    reports the path, the first differing character and, when it recognises one, the
    volatile value that changed. Details: ``char_offset``, ``previous_request``,
    ``tokens_invalidated``, ``changed`` (the differing text, 60 chars).

    ## Why is this bad?
    Every change inside the cached prefix invalidates everything after it: the request
    writes the prefix again instead of reading it. Content that varies between samples is the
    symptom behind most silent 0 % hit rates.

    ## Example
    ```text
    {"system": "Session 81 started 09:14 ...", ...}
    {"system": "Session 82 started 09:15 ...", ...}
    ```

    ## Use instead
    Keep the tools and system prompt byte-identical across requests; put what varies in the
    newest user turn.

    ## Fix safety
    No automatic fix.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (invalidation)
    - https://developers.openai.com/api/docs/guides/prompt-caching
    """

    code = "PC105"
    name = "log.prefix-varies"
    summary = "Content inside the cached prefix varies between requests"
    groups = ("all", "log")
    severity = Severity.WARNING
    message = "content inside the cached prefix changed since the previous request"
    fix_title = "keep tools and system byte-identical; put per-request data in the newest turn"
    inputs = frozenset({"log"})

    def check_log(self, ctx: LogContext) -> Iterator[Finding]:
        for cur in ctx.entries:
            div = divergence(cur)
            if div is None or cur.previous is None:
                continue
            seg = div.segment
            end = cur.cached_end
            if end is None or seg.index > end:
                continue
            if seg.breakpoint is not None or cur.view.automatic_index == seg.index:
                continue  # PC307
            if same_canonical(div.previous, seg) is not None:
                continue  # PC203
            if seg.tier == "tools" and _same_tool_set(cur.previous.view, cur.view):
                continue  # PC201
            if seg.tier == "messages":
                prev_msgs = {s.message_index for s in cur.previous.view.segments
                             if s.message_index is not None}
                cur_msgs = {s.message_index for s in cur.view.segments
                            if s.message_index is not None}
                if not (seg.message_index and len(cur_msgs) > len(prev_msgs)):
                    continue  # a different conversation, not an edit of this one
            offset = div.char_offset
            if offset == 0 and not _same_tail(div.previous.text, seg.text):
                continue  # a different prompt altogether, not a value that varies inside one
            changed = ""
            label = ""
            if offset is not None and seg.text is not None:
                changed = seg.text[offset:offset + 60]
                hits = [m for m in scan_text(seg.text) if m.end > offset]
                if hits and hits[0].start <= offset + 8:
                    label = f" ({hits[0].kind} {hits[0].match!r})"
            lost = max(0, cur.cached_end_token - seg.start_token - div.common_tokens)
            note = ""
            if cur.view.provider != "anthropic" and cur.facts.explicit_breakpoints:
                # GPT-5.6+ reads only entries written at breakpoints (hosted-api-rules.md
                # 2.3): everything after the last readable one before the change is rewritten
                readable = readable_before(cur, seg)
                lost = max(lost, cur.cached_end_token - (
                    readable.end_token if readable is not None else 0))
                note = (f" ({cur.facts.model or cur.view.model} reads only entries written at "
                        "breakpoints: " + (f"the last one before the change is at "
                                           f"{readable.path})" if readable is not None else
                                           "no breakpoint before the change can be read)"))
            stored = stored_prompt_label(cur) if _before_stored(seg) else None
            if stored:
                note += (f"; {stored} come after it and are written again too (their size "
                         "is not in the body)")
            msg = (f"{seg.path} differs from the previous request at character "
                   f"{offset if offset is not None else 0}{label}: about {lost} cached tokens "
                   f"are written again instead of read{note}")
            yield cur.finding(self, msg, path=text_path(seg) if offset is not None else seg.path,
                              offset=offset, char_offset=offset, changed=changed,
                              previous_request=cur.previous.entry, tokens_invalidated=lost,
                              inside_cached_prefix=True)


def _same_tool_set(a: object, b: object) -> bool:
    from promptcache.prefix import PrefixView

    assert isinstance(a, PrefixView) and isinstance(b, PrefixView)
    ta = sorted(s.fingerprint for s in a.segments if s.tier == "tools")
    tb = sorted(s.fingerprint for s in b.segments if s.tier == "tools")
    return ta == tb and bool(ta)


def _same_tail(a: str | None, b: str | None) -> bool:
    """Whether two texts that differ from their first character share most of their end (a
    volatile value at character 0 followed by the same prompt)."""
    if not a or not b:
        return False
    n = min(len(a), len(b))
    i = 0
    while i < n and a[-1 - i] == b[-1 - i]:
        i += 1
    return i >= n // 2
