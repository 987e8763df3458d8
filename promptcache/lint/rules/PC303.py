"""PC303 breakpoint.below-minimum: a cached prefix shorter than the model's minimum."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import RequestContext, Rule
from promptcache.lint.finding import Finding, Severity

__all__ = ["Rule_PC303"]


class Rule_PC303(Rule):
    """A breakpoint closes a prefix shorter than the model's minimum cacheable length.

    ## What it does
    For each Anthropic breakpoint (explicit or automatic), compares the tokens of the prefix
    up to and including the marked block (tools + system + messages, not the block alone)
    with the model's minimum from the catalog (512 to 4,096 depending on the model). Silent
    when the model is unknown. Anthropic token counts are estimates (cl100k-based) and the
    message says so. Details: ``prefix_tokens_at_breakpoint``, ``model_minimum``,
    ``estimate``.

    ## Why is this bad?
    Below the minimum the request succeeds but nothing is cached: both cache counters stay 0
    with no error, and the breakpoint slot is wasted. Minimums differ per model and do not
    fall steadily across generations (Haiku 4.5 needs 4,096 where Sonnet 4.5 needs 1,024).

    ## Example
    ```json
    {"model": "claude-3-5-haiku-20241022",
     "system": [{"type": "text", "text": "<1,500 tokens>", "cache_control": {"type": "ephemeral"}}]}
    ```

    ## Use instead
    Put the breakpoint where the prefix reaches the minimum (after more stable content), or
    drop it for this model.

    ## Fix safety
    No automatic fix: which content to add before the breakpoint is a design decision.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (minimum cacheable length)
    - https://github.com/langchain-ai/langgraph-supervisor-py/issues/59 (BR-14)
    """

    code = "PC303"
    name = "breakpoint.below-minimum"
    summary = "Cached prefix below the model's minimum"
    groups = ("all", "breakpoint")
    severity = Severity.WARNING
    message = "cached prefix shorter than the model's minimum"
    fix_title = "move the breakpoint after more stable content, or drop it for this model"
    inputs = frozenset({"request"})

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        minimum = ctx.facts.min_cacheable_tokens
        if minimum is None or ctx.view.provider != "anthropic" or not ctx.facts.known_model:
            return
        estimate = not ctx.view.counter_exact
        for bp in ctx.view.breakpoints():
            tokens = bp.end_token
            if tokens >= minimum:
                continue
            approx = "about " if estimate else ""
            msg = (f"the prefix up to the breakpoint at {bp.path} is {approx}{tokens} tokens, "
                   f"below {ctx.view.model}'s minimum of {minimum}: nothing is cached, "
                   "silently")
            yield ctx.finding(self, msg, path=bp.path, prefix_tokens_at_breakpoint=tokens,
                              model_minimum=minimum, estimate=estimate)
