"""PC301 breakpoint.too-many: more breakpoints than the provider allows."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from promptcache.lint.engine import RequestContext, Rule
from promptcache.lint.facts import SdkTTLs, sdk_ttls
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.rules._common import stored_prompt_fields

__all__ = ["Rule_PC301"]


class Rule_PC301(Rule):
    """More cache breakpoints than the model allows, or cache parameters it rejects.

    ## What it does
    Anthropic: counts the breakpoints of a request in processing order — ``cache_control`` on
    tools, system blocks and message blocks, plus the automatic (top-level) breakpoint, which
    takes a slot — and reports an error when the count exceeds the model's limit (4, from the
    catalog). Details: ``count``, ``limit``, ``paths_in_processing_order``, ``reason``
    (``"too_many"``).

    On an OpenAI model before GPT-5.6 (catalog: no explicit breakpoints), which caches
    automatically, it reports instead any ``prompt_cache_breakpoint`` (``reason``
    ``"no_breakpoints"``) and a ``prompt_cache_options`` (``"options_unsupported"``): both are
    GPT-5.6+ parameters. On GPT-5.6+ it reports a ``prompt_cache_options.ttl`` the model does
    not take (``"ttl_unsupported"``; the catalog lists ``"30m"`` only; a
    ``prompt_cache_breakpoint``'s own ``ttl`` likewise, ``"breakpoint_ttl_unsupported"``, and
    a marker without ``mode``, ``"breakpoint_mode_missing"``: both 400s), except one an official
    SDK documents for the request's API (catalog ``[sdk_ttls]``: ``"12h"`` on Responses, from
    openai-python 3.57.0, which the reference does not confirm): that is an **info**
    (``"ttl_unconfirmed"``, details ``documented_by``, ``documented_ttls``, ``confirmed``),
    not a 400. On Chat Completions ``"12h"`` stays an error (the SDK types it ``"30m"`` only). Malformed values (a
    ``mode`` other than ``"implicit"``/``"explicit"``, options that are not an object) make
    the request unreadable: ``promptcache lint`` stops with an error naming the field.

    On GPT-5.6+ the catalog's ``max_breakpoints`` (4) is a limit on cache *writes*, not on
    markers: any number of ``prompt_cache_breakpoint`` s is accepted. Two findings there, with
    their own severity:

    - **info** (``"explicit_without_breakpoints"``): ``prompt_cache_options.mode`` is
      ``"explicit"`` and no content part carries a breakpoint, so nothing is written or read
      (the documented way to turn caching off, and a pitfall when not meant, reference 2.3
      and pitfall 13: an info, so ``wrap(lint="error")`` does not refuse it; review 13)
      (silent for a prompt under the model's minimum, which is not cached anyway, and for a
      Responses request chained with ``previous_response_id`` / ``conversation`` /
      ``prompt``, whose stored items may carry the markers);
    - **info** (``"writes_latest"``): more markers than the request writes (mode
      ``"implicit"``: the implicit breakpoint plus the latest 3; ``"explicit"``: the latest 4),
      so the earliest only read what earlier requests wrote there; more than the read window
      (the latest 80 breakpoints) adds that the earliest are never read. Details: ``count``,
      ``limit``, ``writes``, ``mode``, ``written_paths``, ``read_only_paths``,
      ``read_window``, ``beyond_read_window``, ``paths_in_processing_order``.

    ## Why is this bad?
    The errors: the API rejects the request outright (HTTP 400 ``invalid_request_error``).
    Frameworks that add their own markers on top of the user's hit this on Anthropic
    (pydantic-ai #3467); code written for GPT-5.6 hits it when pointed at an older model. The
    explicit-mode info: caching is off with no error, every prompt token billed uncached
    (fine when meant). The info is no
    problem in a conversation whose earlier requests wrote those markers (a breakpoint per
    turn, kept in the history); a marker that no request ever writes holds no entry to read.

    ## Example
    ```json
    {"tools": [{"name": "search", "cache_control": {"type": "ephemeral"}}],
     "system": [{"text": "...", "cache_control": {"type": "ephemeral"}},
                {"text": "...", "cache_control": {"type": "ephemeral"}}],
     "messages": [... two more cache_control blocks ...]}
    ```

    ## Use instead
    Anthropic: drop the earliest markers first: a later marker already caches everything
    before it. On an OpenAI model before GPT-5.6, remove ``prompt_cache_breakpoint`` and
    ``prompt_cache_options``: the model caches the prompt's prefix on its own. The SDK
    wrapper's ``auto_cache`` makes the same repairs to the caller's markers (and keeps every
    marker on GPT-5.6+). With ``mode: "explicit"``, put a breakpoint on the last part of the
    stable prefix, or leave the mode at ``"implicit"``.

    ## Fix safety
    Dropping the earliest marker is safe for correctness; it may lower the hit rate when the
    dropped marker was the one an earlier request wrote (lookback). Removing GPT-5.6+
    parameters from an older model's request changes nothing but the 400.

    ## References
    - https://platform.claude.com/docs/en/build-with-claude/prompt-caching (at most 4 breakpoints)
    - https://github.com/pydantic/pydantic-ai/issues/3467 (BR-09)
    - https://developers.openai.com/api/docs/guides/prompt-caching (GPT-5.6+:
      ``prompt_cache_breakpoint``, ``prompt_cache_options`` with ``ttl`` ``"30m"``; a 400
      before GPT-5.6; at most 4 cache writes per request, earlier breakpoints read-only,
      reads over the latest 80 breakpoints, ``mode: "explicit"`` with no breakpoint caches
      nothing; hosted-api-rules.md 2.3 and pitfall 13)
    - https://github.com/openai/openai-python 3.57.0, ``types/responses/response_create_params.py``
      (``PromptCacheOptions.ttl: Literal["30m", "12h"]``) and
      ``types/chat/completion_create_params.py`` (``Literal["30m"]``)
    """

    code = "PC301"
    name = "breakpoint.too-many"
    summary = ("More breakpoints than the model allows, or cache parameters it rejects or that "
               "turn caching off")
    groups = ("all", "breakpoint")
    severity = Severity.ERROR
    message = "more cache breakpoints than allowed"
    fix_title = "drop the earliest breakpoints; a later one already covers everything before it"
    inputs = frozenset({"request"})

    def check_request(self, ctx: RequestContext) -> Iterator[Finding]:
        if ctx.view.provider != "anthropic":
            yield from self._openai_params(ctx)
            if ctx.facts.explicit_breakpoints:
                yield from self._openai_markers(ctx)
                yield from self._openai_writes(ctx)
            return  # before GPT-5.6 every marker is reported by _openai_params
        limit = ctx.facts.max_breakpoints
        if limit is None:
            return
        bps = ctx.view.breakpoints()
        if len(bps) <= limit:
            return
        paths = [b.path for b in bps]
        auto = " (including the automatic one)" if ctx.view.automatic_index is not None else ""
        msg = (f"{len(bps)} cache breakpoints{auto}, the limit is {limit}: the API rejects "
               "the request (HTTP 400)")
        yield ctx.finding(self, msg, path=bps[limit].path, count=len(bps), limit=limit,
                          paths_in_processing_order=paths, reason="too_many")

    def _openai_writes(self, ctx: RequestContext) -> Iterator[Finding]:
        """GPT-5.6+: ``mode: "explicit"`` with no breakpoint (caching off), and more markers
        than the request writes (info: the API accepts them, the earlier ones only read).

        hosted-api-rules.md 2.3: at most 4 cache writes per request (implicit mode: the
        implicit breakpoint plus the latest 3 explicit ones; explicit mode: the latest 4);
        breakpoints from earlier turns are read-only; reads look at the latest 80 breakpoints;
        ``mode: "explicit"`` with no breakpoint caches nothing. Pitfall 13 there."""
        facts = ctx.facts
        model = facts.model or ctx.view.model
        opts = ctx.payload.get("prompt_cache_options")
        explicit = isinstance(opts, Mapping) and opts.get("mode") == "explicit"
        bps = [b for b in ctx.view.breakpoints() if b.breakpoint is not None
               and b.breakpoint.source == "openai-explicit"]
        if explicit and not bps:
            # a chained Responses request: the stored items may carry the markers
            if stored_prompt_fields(ctx):
                return
            minimum = facts.min_cacheable_tokens
            if minimum is not None and ctx.view.total_tokens < minimum:
                return  # under the minimum nothing would be cached anyway
            msg = ('prompt_cache_options.mode is "explicit" and no content part carries a '
                   f"prompt_cache_breakpoint: {model} then writes and reads no cache entry, "
                   f"so all {ctx.view.total_tokens} prompt tokens are billed uncached on every "
                   "call (caching is silently off)")
            fix = ("put a prompt_cache_breakpoint on the last part of the stable prefix (the "
                   'system/developer message), or drop mode "explicit" (the default "implicit" '
                   "caches at the newest message); ignore PC301 here if caching off is meant")
            yield ctx.finding(self, msg, path="prompt_cache_options.mode", fix=fix,
                              severity=Severity.INFO, mode="explicit", count=0,
                              reason="explicit_without_breakpoints")
            return
        limit = facts.max_breakpoints
        if not limit or not bps:
            return
        writes = limit if explicit else max(limit - 1, 0)
        window = facts.read_breakpoint_window
        unread = max(0, len(bps) - window) if window else 0
        if len(bps) <= writes and not unread:
            return
        paths = [b.path for b in bps]
        written = paths[-writes:] if writes else []
        read_only = paths[:len(paths) - len(written)]
        how = (f'mode "explicit": the latest {limit} explicit ones' if explicit else
               f"the implicit one on the newest message plus the latest {writes} explicit ones")
        n = len(bps)
        earliest = ("the earliest marker (at {}) only reads" if len(read_only) == 1 else
                    f"the {len(read_only)} earliest markers (from {{}}) only read").format(
                        read_only[0])
        msg = (f"{n} prompt_cache_breakpoint markers: {model} writes at most {limit} cache "
               f"entries per request ({how}), so {earliest} "
               "entries that earlier requests wrote there; the API accepts the request")
        if unread:
            msg += (f"; reads look at the latest {window} breakpoints only, so the {unread} "
                    f"earliest (from {paths[0]}) are never read")
        fix = ("nothing to fix in a conversation whose earlier requests wrote those markers; a "
               f"marker that no earlier request wrote is not written now either: add at most "
               f"{writes} new markers per request")
        yield ctx.finding(self, msg, path=paths[0], fix=fix, severity=Severity.INFO, count=n,
                          limit=limit, writes=writes, mode="explicit" if explicit else "implicit",
                          written_paths=written, read_only_paths=read_only,
                          read_window=window, beyond_read_window=unread,
                          paths_in_processing_order=paths, reason="writes_latest")

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
            fix = f"set ttl to {ttls[0]!r}, or leave it out ({ttls[0]!r} is the default)"
            sdk = sdk_ttls(model, ctx.view.provider)
            if sdk is not None and ttl in sdk.ttls:
                # an official SDK documents it for this API: no claim of a 400
                msg = (f"prompt_cache_options.ttl {ttl!r} is documented for this API by "
                       f"{_sdk_name(sdk)} but not confirmed by promptcache's reference, which "
                       f"lists {accepted} only: the request is expected to be accepted (no 400); "
                       f"the write price of a {ttl} entry is not in the catalog")
                yield ctx.finding(self, msg, path="prompt_cache_options.ttl",
                                  fix=f"nothing to fix if {ttl!r} is meant; {fix}",
                                  severity=Severity.INFO, ttl=ttl, ttls=list(ttls),
                                  documented_by=sdk.url, documented_ttls=list(sdk.ttls),
                                  confirmed=sdk.confirmed, reason="ttl_unconfirmed")
                return
            msg = (f"prompt_cache_options.ttl {ttl!r} is not a TTL {model} takes "
                   f"({accepted}): the API rejects the request (HTTP 400)")
            other = sdk_ttls(model, "openai-responses")
            if ctx.view.provider == "openai-chat" and other is not None and ttl in other.ttls:
                msg += (f"; {_sdk_name(other)} documents {ttl!r} for the Responses API only "
                        "(Chat Completions: '30m')")
            yield ctx.finding(self, msg, path="prompt_cache_options.ttl", fix=fix, ttl=ttl,
                              ttls=list(ttls), reason="ttl_unsupported")


    def _openai_markers(self, ctx: RequestContext) -> Iterator[Finding]:
        """GPT-5.6+: a ``prompt_cache_breakpoint`` without ``mode`` (openai-python 3.57.0
        ``PromptCacheBreakpoint.mode`` is ``Required``) or whose own ``ttl`` the model does not
        take: the catalog's TTLs plus those an official SDK documents for breakpoints
        (catalog ``[sdk_ttls]``: ``"12h"``; openai-python 3.57.0 types
        ``PromptCacheBreakpoint.ttl: Literal["30m", "12h"]`` on Chat Completions and Responses
        parts alike). A TTL in neither is a 400 (error, ``"breakpoint_ttl_unsupported"``); one
        the SDK documents and the reference does not is an info
        (``"breakpoint_ttl_unconfirmed"``); no mode is an error (``"breakpoint_mode_missing"``)."""
        facts = ctx.facts
        model = facts.model or ctx.view.model
        ttls = tuple(facts.ttls or ())
        sdk: SdkTTLs | None = None
        for shape in ("openai-responses", "openai-chat"):
            sdk = sdk or sdk_ttls(model, shape)
        documented = tuple(sdk.ttls) if sdk is not None else ()
        items_key = "input" if ctx.view.provider == "openai-responses" else "messages"
        items = ctx.payload.get(items_key)
        if not isinstance(items, list):
            return
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                continue
            for field in ("content", "output"):
                parts = item.get(field)
                if not isinstance(parts, list) or (field == "output" and (
                        items_key != "input" or item.get("type") != "function_call_output")):
                    continue
                for j, part in enumerate(parts):
                    marker = part.get("prompt_cache_breakpoint") \
                        if isinstance(part, Mapping) else None
                    if not isinstance(marker, Mapping):
                        continue
                    where = f"{items_key}[{i}].{field}[{j}].prompt_cache_breakpoint"
                    if marker.get("mode") is None:
                        yield ctx.finding(
                            self, f"{where} has no mode: the API rejects the request (HTTP "
                                  "400, mode is required)",
                            path=where, fix='set "mode": "explicit"',
                            reason="breakpoint_mode_missing")
                    ttl = marker.get("ttl")
                    if not isinstance(ttl, str) or not ttls or ttl in ttls:
                        continue
                    accepted = ", ".join(repr(t) for t in ttls)
                    fix = (f"set ttl to {ttls[0]!r}, or leave it out (the marker then takes "
                           "the request's prompt_cache_options.ttl)")
                    if ttl in documented and sdk is not None:
                        msg = (f"{where}.ttl {ttl!r} is documented by {_sdk_name(sdk)} but not "
                               f"confirmed by promptcache's reference, which lists {accepted} "
                               "only: the request is expected to be accepted (no 400); the "
                               f"write price of a {ttl} entry is not in the catalog")
                        yield ctx.finding(self, msg, path=f"{where}.ttl",
                                          fix=f"nothing to fix if {ttl!r} is meant; {fix}",
                                          severity=Severity.INFO, ttl=ttl, ttls=list(ttls),
                                          documented_by=sdk.url,
                                          documented_ttls=list(documented),
                                          confirmed=sdk.confirmed,
                                          reason="breakpoint_ttl_unconfirmed")
                        continue
                    known = ", ".join(repr(t) for t in (*ttls, *(
                        t for t in documented if t not in ttls)))
                    msg = (f"{where}.ttl {ttl!r} is not a TTL {model} takes ({known}): the "
                           "API rejects the request (HTTP 400)")
                    yield ctx.finding(self, msg, path=f"{where}.ttl", fix=fix, ttl=ttl,
                                      ttls=list(ttls), reason="breakpoint_ttl_unsupported")


def _sdk_name(sdk: SdkTTLs) -> str:
    """``"openai-python 3.57.0"`` from the source's note (its first words), else its URL."""
    note = sdk.source_note or ""
    head = note.split(" (", 1)[0].strip()
    return head or sdk.url
