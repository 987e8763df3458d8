"""Cause codes of the cache-miss diff, as data: what each means, its fix, its source.

Each cause names one kind of fault. The table also maps our codes onto the providers' own
diagnostics taxonomies (Anthropic ``diagnostics.cache_miss_reason.type``, OpenAI
``prompt_cache_diagnostics.reason``), so ``explain`` can flag a disagreement.

Provider facts are not kept here: which request parameters invalidate which tier (the
hosted-api-rules.md 1.7 table) is :func:`promptcache.catalog.invalidation_rules`, the models
that strip earlier thinking blocks are the catalog's ``strips_prior_thinking`` policy field,
and the providers' diagnostics reason values are
:attr:`promptcache.catalog.ProviderRules.diagnostics_reasons` (the maps below translate our
cause codes into those values; tests check every value is in the catalog's list).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ANTHROPIC_DIAGNOSTICS_URL",
    "CAUSES",
    "NO_CHANGE_CAUSES",
    "OPENAI_DIAGNOSTICS_URL",
    "CauseInfo",
    "anthropic_reason_for",
    "openai_reason_for",
]

A_CACHING = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"
#: Cause codes that name no change in the cached prefix: B only appends to A
#: (``append_only``; ``previous_response_chained`` when it does so through a stored response),
#: or nothing differs (``no_difference``). A miss with one of them is not
#: explained by the payload (provider side).
NO_CHANGE_CAUSES = frozenset({"append_only", "no_difference", "previous_response_chained",
                              "conversation_chained"})
A_SKILL = (
    "https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/prompt-caching.md"
)
A_STRUCTURED = "https://platform.claude.com/docs/en/build-with-claude/structured-outputs"
ANTHROPIC_DIAGNOSTICS_URL = (
    "https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics"
)
O_CACHING = "https://developers.openai.com/api/docs/guides/prompt-caching"
#: ``previous_response_id``: the stored conversation is prepended to the request's input
#: (openai-python ``ResponseCreateParams``, hosted-api-rules.md [O3]).
O_CONVERSATION = "https://platform.openai.com/docs/guides/conversation-state"
#: ``prompt``: "Reference to a prompt template and its variables" (a stored template the
#: server expands into the prompt; openai-python ``ResponseCreateParams``).
O_RESPONSES_CREATE = "https://platform.openai.com/docs/api-reference/responses/create"
OPENAI_DIAGNOSTICS_URL = "https://developers.openai.com/api/docs/guides/prompt-caching/diagnostics"


@dataclass(frozen=True, slots=True)
class CauseInfo:
    """What a cause code means.

    Attributes:
        code: the cause code (``"tools_reordered"``).
        title: one line for humans.
        fix_hint: the mechanical fix.
        source: URL of the provider rule behind the cause.
        client_side: False for causes outside the payload (provider side, TTL, minimum).
    """

    code: str
    title: str
    fix_hint: str
    source: str
    client_side: bool = True


def _c(code: str, title: str, fix: str, source: str, client_side: bool = True) -> CauseInfo:
    return CauseInfo(code, title, fix, source, client_side)


#: Every cause code, in no particular order (the diff orders causes by prefix position).
CAUSES: dict[str, CauseInfo] = {
    c.code: c
    for c in (
        _c(
            "model_changed",
            "model changed: caches are scoped to one model",
            "keep one model per conversation; send sub-tasks for another model as their own "
            "conversation",
            A_CACHING,
        ),
        _c(
            "tools_reordered",
            "same tool set, different order",
            "sort tools by name (or any fixed canonical order) before sending",
            A_CACHING,
        ),
        _c(
            "tool_changed",
            "a tool definition changed",
            "build tool definitions once and keep them byte-stable (fixed text, sorted keys)",
            A_CACHING,
        ),
        _c(
            "tools_changed",
            "tools added or removed",
            "send the same tool set on every turn; steer the model with tool_choice instead of "
            "removing tools",
            A_CACHING,
        ),
        _c(
            "system_changed",
            "system prompt text changed",
            "keep the system prompt static; move dates, ids and per-user values into a late "
            "user message",
            A_CACHING,
        ),
        _c(
            "json_key_order",
            "JSON key order changed; the content is equal after canonical parse",
            "serialize tool arguments and tool results with sorted keys and fixed separators",
            A_CACHING,
        ),
        _c(
            "whitespace_only",
            "only whitespace changed",
            "normalize whitespace once when the text is first built; never re-strip or re-wrap "
            "history",
            A_CACHING,
        ),
        _c(
            "message_rewritten",
            "an earlier message was rewritten (history edit)",
            "treat history as append-only: blank old content in place instead of editing, "
            "removing or merging messages",
            A_CACHING,
        ),
        _c(
            "message_removed",
            "an earlier message was removed (history edit)",
            "treat history as append-only: keep old messages (blank their payload in place if "
            "needed) instead of deleting them",
            A_CACHING,
        ),
        _c(
            "message_inserted",
            "a message was inserted into earlier history",
            "append new messages at the end; never insert into earlier history",
            A_CACHING,
        ),
        _c(
            "thinking_stripped",
            "a plain user turn made the API strip earlier thinking blocks",
            "on this model, end tool loops before caching deeply, or move to a model that keeps "
            "thinking blocks (Opus 4.5+, Sonnet 4.6+, Fable/Mythos 5.x)",
            A_SKILL,
        ),
        _c(
            "image_changed",
            "an image was added, removed or changed",
            "send images byte-identically (same encoding, same detail) on every turn",
            A_CACHING,
        ),
        _c(
            "tool_choice_changed",
            "tool_choice changed",
            "send side requests with the same tool_choice as the main loop, or accept a "
            "messages-level rewrite",
            A_CACHING,
        ),
        _c(
            "thinking_changed",
            "thinking configuration changed",
            "keep the thinking configuration fixed for the whole conversation",
            A_CACHING,
        ),
        _c(
            "effort_changed",
            "effort / reasoning effort changed",
            "keep effort fixed for the conversation (or use the per-message effort change where "
            "the model supports it)",
            A_CACHING,
        ),
        _c(
            "output_format_changed",
            "structured-output schema changed",
            "keep the output schema fixed for the conversation",
            A_STRUCTURED,
        ),
        _c(
            "speed_changed",
            "speed (fast mode) toggled",
            "keep fast mode on or off for the whole conversation",
            A_CACHING,
        ),
        _c(
            "verbosity_changed",
            "verbosity changed",
            "keep text.verbosity fixed for the conversation",
            OPENAI_DIAGNOSTICS_URL,
        ),
        _c(
            "prompt_cache_key_changed",
            "prompt_cache_key changed: routing changed, the read is uncertain (a miss is "
            "likely on a busy deployment)",
            "use one stable prompt_cache_key per shared prefix (the key is a routing hint "
            "combined with the prefix hash, not part of the cached prefix)",
            O_CACHING,
        ),
        _c(
            "service_tier_changed",
            "service tier changed",
            "keep the service tier fixed for the conversation",
            OPENAI_DIAGNOSTICS_URL,
        ),
        _c(
            "breakpoint_moved",
            "no breakpoint of this request reaches the entry the previous one wrote",
            "keep a breakpoint at (or within 20 positions after) the end of the cached "
            "prefix; in long turns add one every ~15 positions",
            A_CACHING,
        ),
        _c(
            "cache_mode_changed",
            "prompt_cache_options.mode changed: B's breakpoints no longer reach the entry "
            "A wrote",
            "keep prompt_cache_options.mode fixed for the conversation; in 'explicit' mode "
            "put a prompt_cache_breakpoint at the end of the prefix A cached (the implicit "
            "breakpoint on the newest message is not written there)",
            O_CACHING,
        ),
        _c(
            "ttl_expired",
            "the cache entry expired before this request (gap > TTL)",
            "send the next request within the TTL, use the 1h TTL (Anthropic) or extended "
            "retention (OpenAI), or accept the rewrite",
            A_CACHING,
            client_side=False,
        ),
        _c(
            "sent_before_a",
            "B was sent no later than A: A's cache entries did not exist yet (an entry can be "
            "read only once the response that writes it has begun)",
            "send the first request alone and the others after its first token "
            "(promptcache.warm_then_fanout); if the requests were not concurrent, check the "
            "log's timestamps (a log written at response end is out of start order)",
            A_CACHING,
        ),
        _c(
            "below_minimum",
            "the prefix is below the model's minimum cacheable length",
            "grow the stable prefix above the minimum, or drop the markers (nothing is cached)",
            A_CACHING,
        ),
        _c(
            "append_only",
            "append-only: B extends A's prefix unchanged; nothing in the payload breaks the cache",
            "nothing to fix in the payload: B only appends to A; if B still missed, the cause "
            "is outside the payload (TTL, workspace / API key, provider-side propagation, "
            "eviction or routing): check those and measure again",
            A_CACHING,
            client_side=False,
        ),
        _c(
            "previous_response_chained",
            "B continues a stored response (previous_response_id): the server prepends "
            "that conversation to B's input",
            "nothing to fix in the payload: a chained turn reads what the earlier turns "
            "wrote; to compare prefixes, log each request with its response (the output) or "
            "send the whole history in input",
            O_CONVERSATION,
            client_side=False,
        ),
        _c(
            "conversation_chained",
            "B belongs to a stored conversation (conversation): the server prepends that "
            "conversation's items to B's input",
            "nothing to fix in the payload: a conversation turn reads what the earlier "
            "turns wrote; to compare prefixes, send the whole history in input (or compare "
            "with the conversation's items logged)",
            O_CONVERSATION,
            client_side=False,
        ),
        _c(
            "stored_prompt_changed",
            "B's stored prompt template (prompt: id, version or variables) differs from A's: "
            "the server expands the template into the prompt, so its text changed where the "
            "bodies do not show",
            "keep one template version and the same variable values for the cached part of a "
            "conversation; pass values that change per request in input, after the shared "
            "prompt, not as template variables",
            O_RESPONSES_CREATE,
        ),
        _c(
            "no_difference",
            "identical payloads: the miss is not explained by content",
            "nothing to fix in the payload: likely provider side (propagation, eviction, "
            "routing); check the workspace / API key, wait for the first response before "
            "fan-out, and measure again",
            A_CACHING,
            client_side=False,
        ),
    )
}


_TIER_TO_ANTHROPIC = {
    "tools": "tools_changed",
    "system": "system_changed",
    "messages": "messages_changed",
}

_ANTHROPIC_BY_CAUSE = {
    "model_changed": "model_changed",
    "tools_reordered": "tools_changed",
    "tool_changed": "tools_changed",
    "tools_changed": "tools_changed",
    "system_changed": "system_changed",
    "speed_changed": "system_changed",
    "message_rewritten": "messages_changed",
    "message_removed": "messages_changed",
    "message_inserted": "messages_changed",
    "image_changed": "messages_changed",
    "tool_choice_changed": "messages_changed",
    "thinking_changed": "messages_changed",
    "thinking_stripped": "messages_changed",
    "effort_changed": "messages_changed",
}

_OPENAI_BY_CAUSE = {
    "model_changed": "model_changed",
    "tools_reordered": "tools_changed",
    "tool_changed": "tools_changed",
    "tools_changed": "tools_changed",
    "output_format_changed": "text_format_changed",
    "effort_changed": "reasoning_effort_changed",
    "verbosity_changed": "verbosity_changed",
    "prompt_cache_key_changed": "prompt_cache_key_changed",
    "service_tier_changed": "service_tier_changed",
}


def anthropic_reason_for(cause: str, tier: str | None) -> str | None:
    """Our cause in Anthropic's ``cache_miss_reason.type`` taxonomy.

    Returns None for causes Anthropic's structural comparison does not see (TTL expiry,
    minimum, breakpoint placement, provider-side misses).
    Source: https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics
    """
    if cause in _ANTHROPIC_BY_CAUSE:
        return _ANTHROPIC_BY_CAUSE[cause]
    if cause in ("json_key_order", "whitespace_only", "output_format_changed") and tier:
        return _TIER_TO_ANTHROPIC.get(tier)
    return None


def openai_reason_for(cause: str, tier: str | None) -> str | None:
    """Our cause in OpenAI's ``prompt_cache_diagnostics.reason`` taxonomy.

    Content changes below the tools map to ``input_changed``; None for causes outside the
    request (TTL, provider side). Source:
    https://developers.openai.com/api/docs/guides/prompt-caching/diagnostics
    """
    if cause in _OPENAI_BY_CAUSE:
        return _OPENAI_BY_CAUSE[cause]
    if cause in ("json_key_order", "whitespace_only") and tier == "tools":
        return "tools_changed"
    if cause in (
        "system_changed",
        "json_key_order",
        "whitespace_only",
        "message_rewritten",
        "message_removed",
        "message_inserted",
        "image_changed",
        "tool_choice_changed",
        "thinking_changed",
    ):
        return "input_changed"
    return None
