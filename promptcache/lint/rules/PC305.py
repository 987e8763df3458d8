"""PC305 breakpoint.uncacheable-block: cache_control on an empty or thinking block."""

from __future__ import annotations

import json
from collections.abc import Iterator

from promptcache.lint.engine import RequestContext, Rule
from promptcache.lint.finding import Finding, Severity
from promptcache.prefix import Segment

__all__ = ["Rule_PC305"]


class Rule_PC305(Rule):
    """``cache_control`` on a block that cannot carry it.

    ## What it does
    Reports a cache marker on an empty text block (``"text": ""``), a ``thinking`` or
    ``redacted_thinking`` block, or another block the renderer marks as not cacheable.
    Whitespace-only text is PC306. The whole history is checked, not only the newest turn.
    OpenAI (GPT-5.6+): a ``prompt_cache_breakpoint`` on an empty text part or on an
    ``output_text`` part of an assistant message (hosted-api-rules.md 2.3: assistant output
    blocks cannot carry one; openai-python 3.57.0 ``ResponseOutputTextParam`` has no such
    field); the message names the marker the request uses. Details: ``block_kind``.

    ## Why is this bad?
    The API rejects the request (HTTP 400). Once such a block is persisted in history, every
    later request of the session fails too (claude-code #54013).

    ## Example
    ```json
    {"role": "user", "content": [{"type": "image", "source": {"...": "..."}},
      {"type": "text", "text": "", "cache_control": {"type": "ephemeral"}}]}
    ```

    ## Use instead
    ```json
    {"role": "user", "content": [{"type": "image", "source": {"...": "..."},
      "cache_control": {"type": "ephemeral"}}]}
    ```

    ## Fix safety
    Safe: removing the empty block and moving the marker to the preceding cacheable block
    keeps the same cached prefix.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (what can be cached)
    - https://github.com/anthropics/claude-code/issues/54013 (BR-10)
    """

    code = "PC305"
    name = "breakpoint.uncacheable-block"
    summary = "cache_control on an empty or thinking block"
    groups = ("all", "breakpoint")
    severity = Severity.ERROR
    message = "cache_control on a block that cannot be cached"
    fix_title = "remove the block and move cache_control to the preceding non-empty block"
    inputs = frozenset({"request"})

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        for seg in ctx.view.segments:
            if seg.breakpoint is None or seg.cacheable:
                continue
            if seg.text is not None and seg.text and not seg.text.strip():
                continue  # whitespace-only: PC306
            openai = ctx.view.provider != "anthropic"
            marker = "prompt_cache_breakpoint" if openai else "cache_control"
            part = _part_type(seg) if openai else None
            if seg.kind == "text" and not seg.text:
                what = f"an empty {part or 'text'} {'part' if openai else 'block'}"
            elif part == "output_text":
                what = "an output_text part (assistant output cannot carry one)"
            else:
                noun = f"{part or seg.kind} {'part' if openai else 'block'}"
                what = f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"
            msg = f"{marker} on {what} at {seg.path}: the API rejects it (HTTP 400)"
            fix = (f"remove the {marker} (an earlier input part can carry it)" if openai
                   else None)
            yield ctx.finding(self, msg, path=seg.path, block_kind=seg.kind,
                              fix=fix)


def _part_type(seg: Segment) -> str | None:
    """The ``type`` of an OpenAI content part segment (``"output_text"``), if readable."""
    try:
        node = json.loads(seg.data)
    except (ValueError, TypeError):
        return None
    kind = node.get("type") if isinstance(node, dict) else None
    return kind if isinstance(kind, str) else None
