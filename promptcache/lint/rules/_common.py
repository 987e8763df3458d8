"""Analyses several rules share, memoised per request in ``RequestContext.scratch``.

* :func:`volatile_hits` — volatile literals (:func:`~promptcache.lint.volatile.scan_text`) in
  the parts of a request that are regenerated on every call (tools, system, system/developer
  messages) and that lie inside the cached prefix, with the tokens they invalidate.
* :func:`divergence` — where a request first differs from the one before it (logs).

Why only tools / system / system-role messages: a value inside an earlier user or assistant
turn is history; it is sent byte-identical on every later request, so it does not break the
prefix. The newest turn comes after the last breakpoint of a well-formed request anyway.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from promptcache._stored import STORED_PROMPT_FIELDS as _STORED_FIELDS
from promptcache._stored import STORED_PROMPT_LABELS
from promptcache._stored import stored_prompt_fields as _stored_fields
from promptcache.lint.engine import RequestContext, text_path
from promptcache.lint.volatile import VolatileMatch, scan_text
from promptcache.planner import segment_digest
from promptcache.prefix import Segment
from promptcache.tokens import get_counter

__all__ = ["STORED_PROMPT_FIELDS", "Divergence", "VolatileHit", "content_key", "divergence",
           "key_order_path", "readable_before", "rewritten_note", "stored_prompt_fields", "stored_prompt_label",
           "volatile_hits"]


def content_key(seg: Segment) -> bytes:
    """The segment's content digest without its cache marker: a marker is not prompt content,
    so a breakpoint that moved does not make the same block "different"; a string content and
    a one-text-block list are the same content, as the planner and the live diff count them
    (:func:`promptcache.planner.prefix_digests`). Computed once per segment (cached on it)."""
    return segment_digest(seg)


#: Re-exported from :mod:`promptcache._stored` (shared with :mod:`promptcache.tokens`).
STORED_PROMPT_FIELDS = _STORED_FIELDS

_STORED_LABELS = STORED_PROMPT_LABELS


def stored_prompt_fields(ctx: RequestContext) -> list[str]:
    """The :data:`STORED_PROMPT_FIELDS` a Responses request sets (non-null), in that order;
    empty for Anthropic, for Chat Completions (a chat body's ``"prompt"`` key adds nothing)
    and for a request whose whole prompt is in its body."""
    return _stored_fields(ctx.payload, ctx.view.provider)


def stored_prompt_label(ctx: RequestContext) -> str | None:
    """What the server adds to ``ctx``'s prompt ("the earlier turns previous_response_id
    adds"), for a finding's message; None when the whole prompt is in the body."""
    fields = stored_prompt_fields(ctx)
    return _STORED_LABELS[fields[0]] if fields else None


#: A block with more volatile values than this is reported by its first ones.
MAX_HITS_PER_SEGMENT = 8


@dataclass(frozen=True, slots=True)
class VolatileHit:
    """A volatile literal inside the cached prefix of one request.

    Attributes:
        tokens_invalidated: tokens of the cached prefix after the value (they change with it).
        tokens_rewritten: tokens written again each time the value changes: Anthropic reads a
            prefix only up to an entry an earlier request wrote at a breakpoint, so everything
            after the last readable breakpoint before the value (the whole prefix when there is
            none) is written again; 0 when the prefix is under the model's minimum (nothing is
            written); OpenAI GPT-5.6+ likewise (it reads only entries written at breakpoints,
            hosted-api-rules.md 2.3); OpenAI before GPT-5.6 reads any earlier prefix, so it
            equals ``tokens_invalidated``.
        readable_path: Anthropic and OpenAI GPT-5.6+: the last breakpoint before the value a
            request can read (its prefix reaches the model's minimum); None when there is
            none, and for OpenAI before GPT-5.6.
        stored_after: what the server adds after the value and that loses caching with it,
            uncounted (a value in the tools or ``instructions`` of a Responses request chained
            with ``previous_response_id``: "the earlier turns previous_response_id adds");
            None when the whole prompt after the value is in the body.
    """

    segment: Segment
    match: VolatileMatch
    path: str
    tokens_invalidated: int
    breakpoint_path: str | None
    tokens_rewritten: int
    readable_path: str | None
    stored_after: str | None = None


#: Roles whose messages are regenerated on every call (system prompts), wherever they sit.
_REGENERATED_ROLES = ("system", "developer")


def volatile_hits(ctx: RequestContext) -> list[VolatileHit]:
    """Volatile literals inside the cached prefix of ``ctx`` (memoised)."""
    memo = ctx.scratch.get("volatile")
    if memo is not None:
        return memo  # type: ignore[no-any-return]
    hits: list[VolatileHit] = []
    end = ctx.cached_end
    if end is not None:
        end_token = ctx.cached_end_token
        counter = get_counter(ctx.view.model)
        anthropic = ctx.view.provider == "anthropic"
        # GPT-5.6+ reads, as Anthropic does, only entries written at breakpoints
        # (hosted-api-rules.md 2.3): a change rewrites back to the last readable one
        at_breakpoints = anthropic or bool(ctx.facts.explicit_breakpoints)
        minimum = ctx.facts.min_cacheable_tokens or 0
        # the conversation a chained Responses request continues follows its tools and
        # instructions and precedes every input item, a developer/system one included (a
        # stored prompt template's place is not known: no note for it); decided by path, not
        # by tier: the renderer puts developer/system input messages in the system tier
        chained = [f for f in stored_prompt_fields(ctx) if f != "prompt"]
        stored = _STORED_LABELS[chained[0]] if chained else None
        for seg in ctx.view.segments[:end + 1]:
            if not seg.text or (seg.tier == "messages" and seg.role not in _REGENERATED_ROLES):
                continue  # history is sent byte-identical on every later request
            matches = scan_text(seg.text, MAX_HITS_PER_SEGMENT)
            if not matches:
                continue  # most blocks hold no volatile value: no breakpoint lookups for them
            bp = ctx.covering_breakpoint(seg) if anthropic else None
            readable = readable_before(ctx, seg) if at_breakpoints else None
            before = 0
            last = 0
            for m in matches:
                # tokens before the match, counted piecewise (linear, +-1 token per piece)
                before += counter.count(seg.text[last:m.start]) if m.start > last else 0
                last = m.start
                invalidated = max(0, end_token - (seg.start_token + before))
                if not at_breakpoints:
                    rewritten = invalidated
                elif end_token < minimum:
                    rewritten = 0  # the prefix is under the minimum: nothing is ever written
                else:
                    rewritten = max(invalidated, end_token - (
                        readable.end_token if readable is not None else 0))
                hits.append(VolatileHit(seg, m, text_path(seg), invalidated,
                                        bp.path if bp is not None else None, rewritten,
                                        readable.path if readable is not None else None,
                                        stored if _before_stored(seg) else None))
    ctx.scratch["volatile"] = hits
    return hits


@dataclass(frozen=True, slots=True)
class TemplateVariableHit:
    """A volatile literal in a Responses stored prompt template's variables (``prompt``:
    ``{"id", "version", "variables"}``): the server substitutes it into the template, whose
    text comes before the request's input and is not in the body.

    Attributes:
        path: payload path of the value (``prompt.variables.now``, or ``...text`` of an
            ``input_text`` variable).
        variable: the variable's name.
        match: the volatile literal found.
    """

    path: str
    variable: str
    match: VolatileMatch


def template_variable_hits(ctx: RequestContext) -> list[TemplateVariableHit]:
    """Volatile literals (:func:`~promptcache.lint.volatile.scan_text`) in the string and
    number values (and ``input_text`` ``text``) of a Responses request's ``prompt.variables``,
    each read after its variable's name (``today: 2026-11-30`` is a date) (memoised;
    empty for other requests). Source for the parameter:
    https://platform.openai.com/docs/api-reference/responses/create ("Reference to a prompt
    template and its variables")."""
    memo = ctx.scratch.get("template_volatile")
    if memo is not None:
        return memo  # type: ignore[no-any-return]
    hits: list[TemplateVariableHit] = []
    prompt = ctx.payload.get("prompt") if ctx.view.provider == "openai-responses" else None
    variables = prompt.get("variables") if isinstance(prompt, dict) else None
    if isinstance(variables, dict):
        for name, value in variables.items():
            path = f"prompt.variables.{name}"
            if isinstance(value, dict) and isinstance(value.get("text"), str):
                value, path = value["text"], path + ".text"
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                continue
            # scanned after its name, as "current_date: 2026-11-30": a bare date or hex string
            # counts only beside a word naming a clock or an id, and the name is that word
            head = f"{name}: "
            text = head + str(value)
            for m in scan_text(text, MAX_HITS_PER_SEGMENT):
                if m.start >= len(head):
                    hits.append(TemplateVariableHit(path, str(name), replace(
                        m, start=m.start - len(head), end=m.end - len(head))))
    ctx.scratch["template_volatile"] = hits
    return hits


def template_note(hit: TemplateVariableHit) -> str:
    """Where a template variable's value lands, for a finding's message."""
    return (f"sits in variable {hit.variable!r} of the stored prompt template: the server "
            "substitutes it into the template, whose text comes before the input, so the "
            "prompt from there on (its size is not in the body) loses caching")


def _before_stored(seg: Segment) -> bool:
    """Whether ``seg`` of a Responses request comes before the turns ``previous_response_id``
    / ``conversation`` prepend to ``input``: only the tools and ``instructions`` do."""
    path = seg.path
    return path == "instructions" or path.startswith(("instructions.", "instructions[",
                                                      "tools"))


def rewritten_note(hit: VolatileHit) -> str:
    """The end of a finding's message when the tokens before the value are written again too
    (Anthropic, no readable breakpoint close before it), or when a stored prompt the server
    adds after the value loses caching too (uncounted, :attr:`VolatileHit.stored_after`);
    "" when only the counted tokens after it are."""
    stored = (f"; {hit.stored_after} come after it and lose caching too (their size is not "
              "in the body)") if hit.stored_after else ""
    extra = hit.tokens_rewritten - hit.tokens_invalidated
    if extra <= 0:
        return stored
    if hit.readable_path is None:
        where = "no breakpoint before it can be read"
    else:
        where = f"the last breakpoint before it that can be read is at {hit.readable_path}"
    return (f"; {where}, so the {extra} tokens before it are written again too "
            f"({hit.tokens_rewritten} per change)") + stored


def readable_before(ctx: RequestContext, seg: Segment) -> Segment | None:
    """The last breakpoint (Anthropic, OpenAI GPT-5.6+ explicit) before ``seg`` whose entry a
    later request can read: its prefix reaches the model's minimum (each breakpoint finds its
    own entry, so the lookback does not limit it). On GPT-5.6+ in implicit mode (the default)
    an earlier request of the log also wrote at its implicit breakpoint, its newest input item
    (hosted-api-rules.md 2.3): the segment of ``ctx`` where the latest such entry before
    ``seg`` ends counts too (review 27: a change in a later turn said no entry before it could
    be read, though the first turn's implicit entry was read). None when there is none."""
    minimum = ctx.facts.min_cacheable_tokens or 0
    best: Segment | None = None
    for bp in reversed(ctx.view.breakpoints()):
        if bp.index < seg.index and bp.end_token >= minimum:
            best = bp
            break
    if ctx.view.provider != "anthropic" and ctx.facts.explicit_breakpoints \
            and ctx.previous is not None:
        opts = ctx.view.params.get("prompt_cache_options")
        if not (isinstance(opts, dict) and opts.get("mode") == "explicit"):
            j = _implicit_entry_before(ctx, seg.index, minimum)
            if j is not None and (best is None or j > best.index):
                best = ctx.view.segments[j]
    return best


#: Earlier requests of a log searched for implicit entries (:func:`readable_before`).
_IMPLICIT_LOOKBACK_REQUESTS = 64


def _implicit_entry_before(ctx: RequestContext, limit: int, minimum: int) -> int | None:
    """The largest segment index below ``limit`` at which an earlier request of the log (its
    ``previous`` chain) in implicit mode wrote its implicit entry, with the same content as ``ctx`` up to it
    and a prefix of at least ``minimum`` tokens; None when there is none."""
    from promptcache.planner import _implicit_index

    segs = ctx.view.segments
    best: int | None = None
    p = ctx.previous
    for _ in range(_IMPLICIT_LOOKBACK_REQUESTS):
        if p is None:
            break
        opts = p.view.params.get("prompt_cache_options")
        if p.view.provider == ctx.view.provider and not (
                isinstance(opts, dict) and opts.get("mode") == "explicit"):
            # a request in explicit mode wrote only at its markers, none at its newest item
            # (hosted-api-rules.md 2.3; review 28)
            j = _implicit_index(p.view)
            psegs = p.view.segments
            if (best is None or j > best) and 0 <= j < min(limit, len(segs)) \
                    and segs[j].end_token >= minimum \
                    and all(content_key(psegs[k]) == content_key(segs[k]) for k in range(j + 1)):
                best = j
        p = p.previous
    return best


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first segment where a request differs from the previous one.

    Attributes:
        index: segment index in the current request.
        segment: that segment of the current request.
        previous: the segment at the same index in the previous request.
        char_offset: first differing character of the two texts (None when no text).
        common_tokens: tokens of the shared text before the difference (same block).
    """

    index: int
    segment: Segment
    previous: Segment
    char_offset: int | None
    common_tokens: int


def divergence(ctx: RequestContext) -> Divergence | None:
    """Where ``ctx`` first differs from ``ctx.previous`` at the same position; None when one
    request is a prefix of the other (a conversation growing) or there is no previous one."""
    if "divergence" in ctx.scratch:
        return ctx.scratch["divergence"]  # type: ignore[no-any-return]
    result: Divergence | None = None
    prev = ctx.previous
    if prev is not None and prev.view.provider == ctx.view.provider:
        for a, b in zip(prev.view.segments, ctx.view.segments, strict=False):
            if a is not b and content_key(a) != content_key(b):
                offset: int | None = None
                common = 0
                if a.text is not None and b.text is not None:
                    offset = _common_prefix(a.text, b.text)
                    common = get_counter(ctx.view.model).count(b.text[:offset]) if offset else 0
                result = Divergence(b.index, b, a, offset, common)
                break
    ctx.scratch["divergence"] = result
    return result


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    step = 256
    while i < n and a[i:i + step] == b[i:i + step]:
        i += step
    i = min(i, n)
    while i > 0 and a[:i] != b[:i]:
        i -= 1
    while i < n and a[i] == b[i]:
        i += 1
    return i


def key_order_path(a: Any, b: Any, path: str) -> str | None:
    """The first JSON path where ``a`` and ``b`` hold the same keys in a different order."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b) and set(a) == set(b):
            return path or "<root>"
        for key in a:
            if key in b:
                sub = key_order_path(a[key], b[key], f"{path}.{key}" if path else str(key))
                if sub is not None:
                    return sub
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            sub = key_order_path(x, y, f"{path}[{i}]")
            if sub is not None:
                return sub
    return None


def same_canonical(a: Segment, b: Segment) -> tuple[Any, Any] | None:
    """The parsed nodes of two segments when they are equal up to key order, else None."""
    try:
        x = json.loads(a.data)
        y = json.loads(b.data)
    except ValueError:
        return None
    if x == y:
        return x, y
    return None
