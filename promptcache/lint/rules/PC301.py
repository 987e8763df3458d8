"""PC301 breakpoint.too-many: more breakpoints than the provider allows."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from promptcache.lint.engine import RequestContext, Rule
from promptcache.lint.finding import Finding, Severity

__all__ = ["Rule_PC301"]


class Rule_PC301(Rule):
    """More cache breakpoints than the model allows.

    ## What it does
    Counts the breakpoints of a request in processing order — ``cache_control`` on tools,
    system blocks and message blocks, plus Anthropic's automatic (top-level) breakpoint, which
    takes a slot — and reports when the count exceeds the model's limit (4 on Anthropic; 4
    explicit on OpenAI GPT-5.6+), from the catalog. Details: ``count``, ``limit``,
    ``paths_in_processing_order``, ``reason`` (``"too_many"``).

    On an OpenAI model before GPT-5.6 (catalog: no explicit breakpoints), which caches
    automatically, it reports instead any ``prompt_cache_breakpoint`` (``reason``
    ``"no_breakpoints"``) and a ``prompt_cache_options`` (``"options_unsupported"``): both are
    GPT-5.6+ parameters. On GPT-5.6+ it reports a ``prompt_cache_options.ttl`` the model does
    not take (``"ttl_unsupported"``; the catalog lists ``"30m"`` only). Malformed values (a
    ``mode`` other than ``"implicit"``/``"explicit"``, options that are not an object) make
    the request unreadable: ``promptcache lint`` stops with an error naming the field.

    ## Why is this bad?
    The API rejects the request outright (HTTP 400 ``invalid_request_error``). Frameworks that
    add their own markers on top of the user's hit this (pydantic-ai #3467); code written for
    GPT-5.6 hits it when pointed at an older model.

    ## Example
    ```json
    {"tools": [{"name": "search", "cache_control": {"type": "ephemeral"}}],
     "system": [{"text": "...", "cache_control": {"type": "ephemeral"}},
                {"text": "...", "cache_control": {"type": "ephemeral"}}],
     "messages": [... two more cache_control blocks ...]}
    ```

    ## Use instead
    Drop the earliest markers first: a later marker already caches everything before it. On an
    OpenAI model before GPT-5.6, remove ``prompt_cache_breakpoint`` and
    ``prompt_cache_options``: the model caches the prompt's prefix on its own. The SDK
    wrapper's ``auto_cache`` makes the same repairs to the caller's markers.

    ## Fix safety
    Dropping the earliest marker is safe for correctness; it may lower the hit rate when the
    dropped marker was the one an earlier request wrote (lookback). Removing GPT-5.6+
    parameters from an older model's request changes nothing but the 400.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (at most 4 breakpoints)
    - https://github.com/pydantic/pydantic-ai/issues/3467 (BR-09)
    - https://developers.openai.com/api/docs/guides/prompt-caching (GPT-5.6+:
      ``prompt_cache_breakpoint``, ``prompt_cache_options`` with ``ttl`` ``"30m"``; a 400
      before GPT-5.6)
    """

    code = "PC301"
    name = "breakpoint.too-many"
    summary = "More breakpoints than the model allows, or cache parameters it rejects"
    groups = ("all", "breakpoint")
    severity = Severity.ERROR
    message = "more cache breakpoints than allowed"
    fix_title = "drop the earliest breakpoints; a later one already covers everything before it"
    inputs = frozenset({"request"})

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        if ctx.view.provider != "anthropic":
            yield from self._openai_params(ctx)
            if ctx.facts.explicit_breakpoints is False:
                return  # every marker is reported by _openai_params
        limit = ctx.facts.max_breakpoints
        if limit is None:
            return
        bps = ctx.view.breakpoints()
        if ctx.view.provider != "anthropic":
            bps = [b for b in bps if b.breakpoint is not None
                   and b.breakpoint.source == "openai-explicit"]
        if len(bps) <= limit:
            return
        paths = [b.path for b in bps]
        auto = " (including the automatic one)" if ctx.view.automatic_index is not None else ""
        msg = (f"{len(bps)} cache breakpoints{auto}, the limit is {limit}: the API rejects "
               "the request (HTTP 400)")
        yield ctx.finding(self, msg, path=bps[limit].path, count=len(bps), limit=limit,
                          paths_in_processing_order=paths, reason="too_many")

    def _openai_params(self, ctx: RequestContext) -> Iterator[Finding]:
        """GPT-5.6+ cache parameters on a model that takes none, and a TTL it does not take."""
        facts = ctx.facts
        model = facts.model or ctx.view.model
        if facts.explicit_breakpoints is False:
            bps = [b for b in ctx.view.breakpoints() if b.breakpoint is not None
                   and b.breakpoint.source == "openai-explicit"]
            if bps:
                n = len(bps)
                marker = "a prompt_cache_breakpoint" if n == 1 else \
                    f"{n} prompt_cache_breakpoint markers"
                msg = (f"{model} caches automatically and takes no prompt_cache_breakpoint "
                       f"(GPT-5.6+ only); this request has {marker}: the API rejects it "
                       "(HTTP 400)")
                fix = (f"remove prompt_cache_breakpoint: {model} caches the prompt's prefix on "
                       "its own")
                yield ctx.finding(self, msg, path=bps[0].path, fix=fix, count=n, limit=0,
                                  paths_in_processing_order=[b.path for b in bps],
                                  reason="no_breakpoints")
        opts = ctx.payload.get("prompt_cache_options")
        if opts is None:
            return
        if facts.prompt_cache_options is False:
            msg = (f"{model} takes no prompt_cache_options (GPT-5.6+ only): the API rejects "
                   "the request (HTTP 400)")
            fix = (f"remove prompt_cache_options: {model} caches automatically, with no "
                   "options")
            yield ctx.finding(self, msg, path="prompt_cache_options", fix=fix,
                              reason="options_unsupported")
            return
        ttls = facts.ttls
        ttl = opts.get("ttl") if isinstance(opts, Mapping) else None
        if facts.prompt_cache_options and ttls and isinstance(ttl, str) and ttl not in ttls:
            accepted = ", ".join(repr(t) for t in ttls)
            msg = (f"prompt_cache_options.ttl {ttl!r} is not a TTL {model} takes "
                   f"({accepted}): the API rejects the request (HTTP 400)")
            fix = f"set ttl to {ttls[0]!r}, or leave it out ({ttls[0]!r} is the default)"
            yield ctx.finding(self, msg, path="prompt_cache_options.ttl", fix=fix, ttl=ttl,
                              ttls=list(ttls), reason="ttl_unsupported")
