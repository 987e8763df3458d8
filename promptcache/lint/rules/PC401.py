"""PC401 openai.below-minimum: an OpenAI prompt under the automatic-caching minimum."""

from __future__ import annotations

from collections.abc import Iterator

from promptcache.lint.engine import LogContext, RequestContext, Rule
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules._common import stored_prompt_fields

__all__ = ["Rule_PC401"]


class Rule_PC401(Rule):
    """An OpenAI prompt shorter than the automatic-caching minimum (1,024 tokens).

    ## What it does
    Reports an OpenAI Chat Completions or Responses request whose whole prompt is shorter
    than the model's minimum cacheable prefix from the catalog (1,024 tokens for every
    current model). Counts are exact (tiktoken ids). In a log it reports once, with the share
    of short requests. Details: ``prompt_tokens``, ``model_minimum`` (logs:
    ``requests_below``, ``requests``).

    Silent for a Responses request that sets ``previous_response_id``, ``conversation`` or
    ``prompt``: the server adds the stored conversation (or prompt) to the body's input, so
    the prompt is longer than the body by an amount the body does not tell.

    ## Why is this bad?
    Nothing is cached below the minimum, so ``cached_tokens`` stays 0 — often misread as a
    caching bug. It matters when the prompt is expected to be reused (a long shared system
    prompt that is shorter than you think).

    ## Example
    A 600-token system prompt sent thousands of times a day: never cached.

    ## Use instead
    Nothing to fix when the prompt is genuinely short; otherwise move shared reference
    material (examples, documents) into the system prompt so the shared prefix reaches the
    minimum.

    ## Fix safety
    No automatic fix.

    ## References
    - https://developers.openai.com/api/docs/guides/prompt-caching (1,024-token minimum)
    """

    code = "PC401"
    name = "openai.below-minimum"
    summary = "OpenAI prompt under the 1,024-token caching minimum"
    groups = ("all", "openai")
    severity = Severity.INFO
    message = "prompt below OpenAI's minimum cacheable length"
    fix_title = "nothing is cached below the minimum; grow the shared prefix if it is reused"
    inputs = frozenset({"request", "log"})
    aggregate_in_logs = True

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        minimum = ctx.facts.min_cacheable_tokens
        view = ctx.view
        if view.provider == "anthropic" or minimum is None or not view.segments:
            return
        if stored_prompt_fields(ctx):
            return  # the server prepends a stored conversation / prompt: size unknown
        if view.total_tokens >= minimum:
            return
        msg = (f"the prompt is {view.total_tokens} tokens, below the {minimum}-token minimum "
               "for automatic caching: nothing is cached")
        yield ctx.finding(self, msg, path=None, prompt_tokens=view.total_tokens,
                          model_minimum=minimum)

    def check_log(self, ctx: LogContext) -> Iterator[Finding]:
        short = [e for e in ctx.entries if list(self.check_request(e))]
        if not short:
            return
        openai = [e for e in ctx.entries if e.view.provider != "anthropic"]
        first = short[0]
        minimum = first.facts.min_cacheable_tokens
        msg = (f"{len(short)} of {len(openai)} OpenAI requests are below the {minimum}-token "
               "minimum for automatic caching: nothing of them is cached")
        yield first.finding(self, msg, path=None, requests_below=len(short),
                            requests=len(openai), model_minimum=minimum)
