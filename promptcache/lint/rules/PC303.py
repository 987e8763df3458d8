"""PC303 breakpoint.below-minimum: a cached prefix shorter than the model's minimum."""

from __future__ import annotations

import math
from collections.abc import Iterator

from promptcache.lint.engine import RequestContext, Rule
from promptcache.lint.finding import Finding, Severity
from promptcache.planner import may_reach_minimum
from promptcache.tokens import view_count_bound

__all__ = ["Rule_PC303"]


class Rule_PC303(Rule):
    """A breakpoint closes a prefix shorter than the model's minimum cacheable length.

    ## What it does
    For each Anthropic breakpoint (explicit or automatic), compares the tokens of the prefix
    up to and including the marked block (tools + system + messages, not the block alone)
    with the model's minimum from the catalog (512 to 4,096 depending on the model). Silent
    when the model is unknown. Anthropic token counts are estimates (cl100k-based, +-15 %:
    :func:`promptcache.tokens.view_count_bound`) and the message says so.

    Two findings:

    * **below the minimum** (warning): the prefix is under the minimum even at the top of the
      count's error bound (``tokens * (1 + bound) < minimum``, the planner's rule,
      :func:`promptcache.planner.may_reach_minimum`; any shortfall when the
      count is exact). Nothing is cached.
    * **within the estimate's error of the minimum** (info): the count is an estimate and its
      error bound reaches the minimum (a 4,050-token estimate on Haiku 4.5, minimum 4,096,
      +-608), so the real prefix may be over it. A marker on a prefix under the minimum costs
      nothing (the request succeeds, nothing is written or charged), and one over it caches
      the prefix: keep the marker. Count the prefix exactly (Anthropic's free
      ``messages.count_tokens`` endpoint) to know which.

    Details: ``prefix_tokens_at_breakpoint``, ``model_minimum``, ``estimate`` (bool),
    ``error_tokens`` (the count's error bound in tokens, 0 when exact) and
    ``within_error`` (bool: the second finding).

    ## Why is this bad?
    Below the minimum the request succeeds but nothing is cached: both cache counters stay 0
    with no error, and the breakpoint slot is wasted (it matters only when the request needs
    all 4 slots). Minimums differ per model and do not fall steadily across generations (Haiku
    4.5 needs 4,096 where Sonnet 4.5 needs 1,024). Source: hosted-api-rules.md 1.4, "the
    request succeeds but nothing is cached: no error".

    ## Example
    ```json
    {"model": "claude-3-5-haiku-20241022",
     "system": [{"type": "text", "text": "<1,500 tokens>", "cache_control": {"type": "ephemeral"}}]}
    ```

    ## Use instead
    Put the breakpoint where the prefix reaches the minimum (after more stable content), or
    drop it for this model. Within the estimate's error of the minimum: keep it.

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
        exact, rate = view_count_bound(ctx.view)
        estimate = not ctx.view.counter_exact or not exact
        ends: list[int] | None = None
        stripped: frozenset[int] = frozenset()
        if ctx.facts.strips_prior_thinking:
            # older Claude models: a plain user turn strips earlier thinking blocks before
            # caching, so a prefix holding one is shorter than sent (hosted-api-rules.md 1.7)
            from promptcache.catalog import find_policy
            from promptcache.planner import cached_prefix_tokens

            ends, stripped = cached_prefix_tokens(ctx.view, find_policy(ctx.view.model))
        for bp in ctx.view.breakpoints():
            tokens = bp.end_token if ends is None else ends[bp.index]
            if tokens >= minimum:
                continue
            cut = [i for i in stripped if i < bp.index]
            strip_note = (f" once the plain user turn strips the thinking block at "
                          f"{ctx.view.segments[min(cut)].path} ({bp.end_token} as sent)"
                          if cut else "")
            error = math.ceil(tokens * rate) if estimate else 0
            model = ctx.view.model
            if estimate and may_reach_minimum(tokens, rate, minimum):
                msg = (f"the prefix up to the breakpoint at {bp.path} is an estimated {tokens} "
                       f"tokens{strip_note} (+-{error}), within the estimate's error of "
                       f"{model}'s minimum "
                       f"of {minimum}: if the real prefix is shorter the marker caches nothing "
                       "and costs nothing (no error, no charge); if it is longer it caches the "
                       "prefix")
                yield ctx.finding(self, msg, path=bp.path, severity=Severity.INFO,
                                  fix=("keep the marker (it costs nothing under the minimum); "
                                       "count the prefix exactly (Anthropic's messages."
                                       "count_tokens) to know whether it caches"),
                                  prefix_tokens_at_breakpoint=tokens, model_minimum=minimum,
                                  estimate=True, error_tokens=error, within_error=True)
                continue
            approx = "about " if estimate else ""
            msg = (f"the prefix up to the breakpoint at {bp.path} is {approx}{tokens} tokens"
                   f"{strip_note}, below {model}'s minimum of {minimum}: nothing is cached, "
                   "silently")
            yield ctx.finding(self, msg, path=bp.path, prefix_tokens_at_breakpoint=tokens,
                              model_minimum=minimum, estimate=estimate, error_tokens=error,
                              within_error=False)
