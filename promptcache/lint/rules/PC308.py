"""PC308 breakpoint.unmarkable-instructions: GPT-5.6+ Responses prompt only in ``instructions``.

The static twin of the SDK wrapper's run-time warning (``_unmarkable_instructions`` in
:mod:`promptcache.sdk._observe`); source: ../shared/reference/hosted-api-rules.md 2.3.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from promptcache.lint.engine import RequestContext, Rule
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules._common import stored_prompt_label

__all__ = ["Rule_PC308"]


def _explicit_breakpoints(ctx: RequestContext) -> bool:
    """Whether the catalog policy of the request's model caches only at breakpoints
    (``explicit_breakpoints``: GPT-5.6 and later). False for a model the catalog does not
    know: the fact differs between OpenAI models, so it stays unknown and the rule silent."""
    facts = ctx.facts
    if facts.provider != "openai" or not facts.known_model or not facts.model:
        return False
    memo = ctx.scratch.get("explicit_breakpoints")
    if memo is None:
        try:
            from promptcache.catalog import get_policy

            memo = bool(getattr(get_policy(facts.model), "explicit_breakpoints", False))
        except Exception:  # UnknownModelError, or a catalog that cannot load: unknown
            memo = False
        ctx.scratch["explicit_breakpoints"] = memo
    return bool(memo)


def _caching_off(payload: Mapping[str, Any]) -> bool:
    """``prompt_cache_options.mode == "explicit"``: with no breakpoint nothing is written or
    read at all (the documented way to turn caching off), a choice rather than this mistake."""
    opts = payload.get("prompt_cache_options")
    return isinstance(opts, Mapping) and opts.get("mode") == "explicit"


class Rule_PC308(Rule):
    """A GPT-5.6+ Responses prompt in ``instructions``, where no breakpoint can close it.

    ## What it does
    Reports an OpenAI Responses request for a model that caches only at breakpoints (the
    catalog's ``explicit_breakpoints``: GPT-5.6 and later) when the prefix up to the end of
    ``instructions`` (tools, then instructions) reaches the model's minimum cacheable tokens
    and no input content part carries a ``prompt_cache_breakpoint``. It stays silent with
    ``prompt_cache_options.mode: "explicit"`` (caching turned off), for a request without
    input items, and for a model the catalog does not know. The finding sits on
    ``instructions``. Details: ``instructions_tokens``, ``prefix_tokens`` (tools and
    instructions), ``prompt_tokens`` (written each call), ``model_minimum``.

    ## Why is this bad?
    These models write and read cache entries only at breakpoints: up to 3 explicit ones
    plus one implicit breakpoint on the newest input item. ``prompt_cache_breakpoint`` goes
    on input content parts; ``instructions`` is a plain string and cannot carry one. With no
    marker anywhere else, each call writes its whole prompt at the implicit breakpoint on its
    newest input item (at 1.25x the input rate). Only a call that continues that same input
    (the next turn of the conversation) reads it back; every new conversation and every
    unrelated call sharing the instructions finds no entry that ends at them and writes them
    again. With the instructions as a leading developer message carrying a breakpoint, they
    are written once and read by every call that shares them.

    ## Example
    ```json
    {"model": "gpt-5.6-sol", "instructions": "<3,000 tokens of rules>",
     "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}
    ```

    ## Use instead
    ```json
    {"model": "gpt-5.6-sol",
     "input": [{"role": "developer", "content": [{"type": "input_text",
                 "text": "<3,000 tokens of rules>",
                 "prompt_cache_breakpoint": {"mode": "explicit"}}]},
               {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}
    ```
    ``PromptBuilder.to_openai_responses`` sends the stable prompt this way, and the SDK
    wrapper's ``auto_cache`` warns about the same request at run time.

    ## Fix safety
    No automatic fix. ``instructions`` is a developer message inserted into the model's
    context, so a leading developer message gives the model the same text. With
    ``previous_response_id``, ``instructions`` are not carried over but input items are: send
    the developer message once, in the conversation's first request.

    ## References
    - https://developers.openai.com/api/docs/guides/prompt-caching (GPT-5.6+: an implicit
      breakpoint on the newest input, explicit ones on input content parts)
    - https://platform.openai.com/docs/api-reference/responses/create (``instructions``)
    """

    code = "PC308"
    name = "breakpoint.unmarkable-instructions"
    summary = "GPT-5.6+ Responses prompt in instructions, with no breakpoint to read it"
    groups = ("all", "breakpoint", "openai")
    severity = Severity.WARNING
    message = ("instructions cannot carry a breakpoint: every new conversation writes them "
               "again")
    fix_title = ("move the stable prompt into the first input message (developer/system) with a "
                 "prompt_cache_breakpoint on it, or build the request with PromptBuilder")
    inputs = frozenset({"request"})

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        view = ctx.view
        if view.provider != "openai-responses" or not _explicit_breakpoints(ctx):
            return
        if _caching_off(ctx.payload) or any(s.breakpoint is not None for s in view.segments):
            return
        if not any(s.tier == "messages" for s in view.segments):
            return  # no input item: no implicit breakpoint after the instructions
        instructions = next((s for s in view.segments if s.path == "instructions"), None)
        minimum = ctx.facts.min_cacheable_tokens
        if instructions is None or minimum is None or instructions.end_token < minimum:
            return
        model = ctx.facts.model
        stored = stored_prompt_label(ctx)
        prompt = (f"prompt ({stored}, plus {view.total_tokens} tokens in the body)"
                  if stored else f"{view.total_tokens}-token prompt")
        msg = (f"{model} caches only at breakpoints, and `instructions` cannot carry one: "
               f"with no breakpoint on an input part, each call writes its {prompt} "
               f"at the implicit breakpoint on its newest input item; only the "
               f"next turn of the same conversation reads it, so the {instructions.tokens} "
               "tokens of instructions are written again by every new conversation (and every "
               "unrelated call) that shares them")
        yield ctx.finding(self, msg, path=instructions.path,
                          instructions_tokens=instructions.tokens,
                          prefix_tokens=instructions.end_token,
                          prompt_tokens=view.total_tokens, model_minimum=minimum)
