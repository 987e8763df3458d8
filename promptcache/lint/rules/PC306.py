"""PC306 block.whitespace-only: a whitespace-only text block."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import RequestContext, Rule
from promptcache.lint.finding import Finding, Severity

__all__ = ["Rule_PC306"]


class Rule_PC306(Rule):
    """A text block that holds only whitespace (Anthropic).

    ## What it does
    Reports an Anthropic text block (system or message) whose text is non-empty but only
    whitespace, with or without ``cache_control``. Details: ``has_cache_control``.

    ## Why is this bad?
    The API rejects whitespace-only text blocks (HTTP 400) even without a cache marker. They
    typically come from a builder that split "stable prefix + trailing newlines" into two
    blocks (hermes-agent #97618); once in history, every later request fails.

    ## Example
    ```json
    {"type": "text", "text": "  \\n"}
    ```

    ## Use instead
    Drop the block, or fold the whitespace into the neighbouring block.

    ## Fix safety
    Safe: whitespace-only blocks carry nothing the model reads.

    ## References
    - https://github.com/anthropics/claude-code/issues/54013 (BR-10)
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """

    code = "PC306"
    name = "block.whitespace-only"
    summary = "Whitespace-only text block"
    groups = ("all", "breakpoint")
    severity = Severity.ERROR
    message = "whitespace-only text block"
    fix_title = "remove the block or merge it into its neighbour"
    inputs = frozenset({"request"})

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        if ctx.view.provider != "anthropic":
            return
        for seg in ctx.view.segments:
            if seg.kind != "text" or seg.text is None or not seg.text or seg.text.strip():
                continue
            cc = seg.breakpoint is not None
            msg = (f"text block at {seg.path} is whitespace only: the API rejects it (HTTP 400)"
                   + (" and its cache_control" if cc else " even without cache_control"))
            yield ctx.finding(self, msg, path=seg.path, has_cache_control=cc)
