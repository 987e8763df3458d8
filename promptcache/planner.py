"""Breakpoint planner: where to put cache markers so the next request reads the most.

:func:`plan_breakpoints` takes a request as the provider caches it (a
:class:`~promptcache.prefix.PrefixView`), the model's :class:`~promptcache.catalog.CachePolicy`
and, optionally, what the previous request wrote, and returns a :class:`BreakpointPlan`.
:func:`apply_plan` writes a plan into a payload (a copy); :func:`auto_cache` does both for an
arbitrary outgoing request (the SDK wrapper's ``auto_cache`` calls it), keeping the markers the
caller already placed.

Anthropic rules the plan obeys (sources: https://platform.claude.com/docs/en/build-with-claude/prompt-caching
and https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/prompt-caching.md; see
../shared/reference/hosted-api-rules.md 1.1-1.7):

* entries are written only at breakpoints; a breakpoint reads an entry an earlier request wrote
  only if that entry lies at most ``policy.lookback_positions`` (20) positions before it
  (:attr:`Segment.position <promptcache.prefix.Segment.position>`: a run of tool_use or
  tool_result blocks is one position);
* a prefix shorter than ``policy.min_cacheable_tokens`` is neither written nor read (1.4). The
  counts are estimates (``promptcache.tokens.view_count_bound``, +-15 %): a prefix the estimate
  puts under the minimum but whose upper bound reaches it still gets a marker, which costs
  nothing if the real prefix is shorter; the predicted reads and writes keep the minimum on the
  estimate, as ``diff`` does;
* on older Claude models (catalog ``strips_prior_thinking``) a plain user turn strips earlier
  thinking blocks (1.7, :func:`stripped_thinking`): prefix tokens and entry digests are those of
  the content without them, so entries written after such a block are not read once it is
  stripped (as ``diff`` and the local backend model it);
* at most ``policy.max_breakpoints`` (4) markers, the top-level (automatic) one included (on
  OpenAI GPT-5.6+ the 4 limits the entries written per request, not the markers: the caller's
  markers are all kept, and the planner adds its own within the write budget);
* longer TTLs before shorter ones (``1h`` before ``5m``);
* no marker on a block that cannot carry one (thinking, empty or whitespace-only text).

OpenAI (https://developers.openai.com/api/docs/guides/prompt-caching; openai-python
``prompt_cache_options``): a ``prompt_cache_key`` derived from the stable prefix (sha256 of its
canonical bytes, so every process computes the same key) for every model; explicit
``prompt_cache_breakpoint`` markers and ``prompt_cache_options`` only where the catalog says the
model supports them (GPT-5.6 and later); reads there have no lookback limit. In the default
``implicit`` mode the API writes one implicit breakpoint on the newest input item whatever its
type (a ``function_call_output`` too; hosted-api-rules.md 2.3): the plan counts it there, as
the diff engine and the local backend do; only the explicit markers need a markable part.
A Responses ``function_call_output`` is one (explicit mode's tool loops are cached, new-user
trial 19): its breakpoint sits on an output part (``input_text`` / ``input_image`` /
``input_file``, hosted-api-rules.md 2.3), so a string output is sent as one ``input_text``
part carrying it (openai-python ``FunctionCallOutput.output`` takes either; the renderer, the
digests and the local backend read the two forms as the same content) and a list output gets
it on its last part that can carry one.

The reuse model (what "best" means)
-----------------------------------
A plan ``B`` (the planner's markers plus the caller's) is scored in tokens::

    score(B) = read_now(B) + sum_s weight_s * read_next_s(B)

* ``read_now``: prefix tokens of the longest entry the previous request wrote (still a prefix
  of this request) that some breakpoint of ``B`` reaches through the lookback. This is the
  cache read of *this* request (Anthropic only reads what a breakpoint's lookback finds).
* ``read_next_s``: the cache read of the *next* request in scenario ``s``: the prefix tokens
  of the longest entry ``B`` writes (or refreshes) that lies inside the prefix the next request
  shares. The scenarios and their default weights (:class:`ReuseModel`, a stated prior, not a
  measurement; pass your own):

  - ``continuation`` (0.8): the next request appends to this one (the agent loop / chat
    case); it shares everything up to the end of the new turn.
  - ``new_conversation`` (0.2): another conversation with the same tools, system and static
    context; it shares up to the end of the static context.
  - ``branch`` (0.0): the same history with a different new turn (regenerate, side
    questions); it shares up to the end of the history.
  - ``tools_only`` (0.0): a new system prompt over the same tools.

  The next request is assumed to place its own breakpoints by the same rules, so it can reach
  any entry this request writes (that is what the lagging breakpoints below are for).

Among all plans that satisfy the rules, the planner takes the one with the highest score; ties
go to fewer cache-write tokens (writes cost 1.25x or 2x), then to fewer markers (slots stay free
for the caller), then to later positions. The search is
exhaustive over a small candidate set: the section ends (tools, system, static context, history,
new turn), lagging breakpoints (the furthest block still within the lookback of an entry the
previous request wrote) and chain fillers (blocks ``lookback`` positions apart), so the
result is the optimum of the model over those candidates.

Chain rule (Anthropic): every breakpoint the planner places after the first of the request lies
at most ``lookback`` positions after an earlier breakpoint of the same request or an entry the
previous request wrote. A request that edits or branches the conversation anywhere after the
first breakpoint then re-writes at most ``lookback`` positions. Cost of the rule: on the first
request of a long, cold conversation (more than ``lookback * (slots - 1)`` positions between the
system and the end) the system-end breakpoint is skipped, and it is placed on the next request.

Deviation from DESIGN.md: the planner lives in its own module (``promptcache.planner``) next to
``promptcache.builder``, because the SDK wrapper and the linter use it on raw payloads.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import combinations
from math import comb
from typing import TYPE_CHECKING, Any, Literal

from promptcache._errors import InvalidRequestError, PlanError
from promptcache._slots import slot_constructor
from promptcache.prefix import NO_MARKER_KINDS, PrefixView, Segment, render

if TYPE_CHECKING:
    from promptcache.catalog import CachePolicy

__all__ = [
    "Boundaries",
    "BreakpointPlan",
    "Decision",
    "FanoutCost",
    "MarkerEdit",
    "PlannedBreakpoint",
    "ReuseModel",
    "WrittenEntry",
    "apply_plan",
    "auto_cache",
    "cached_prefix_tokens",
    "fanout_cost",
    "infer_boundaries",
    "may_reach_minimum",
    "plan_breakpoints",
    "prefix_digests",
    "prompt_cache_key",
    "segment_digest",
    "should_warm_first",
    "stripped_thinking",
]

_TTL_RANK = {"5m": 0, "30m": 1, "1h": 2, "12h": 3}
_MARKER_KEYS = frozenset({"cache_control", "prompt_cache_breakpoint"})
_SEGMENT_KEYS = frozenset({"tools", "system", "messages", "input", "instructions"})
_OPENAI_MARKABLE_KINDS = frozenset({"text", "image", "file", "input_audio", "input_file",
                                    "tool_result"})
#: Upper bound on the candidate set searched exhaustively (C(16, 4) = 1820 subsets).
_MAX_CANDIDATES = 16


# ============================================================================ data
@dataclass(frozen=True, slots=True)
class ReuseModel:
    """Weights of the next-request scenarios the planner optimises for (see module docstring).

    Weights are relative (they need not sum to 1) and must be >= 0.
    """

    continuation: float = 0.8
    new_conversation: float = 0.2
    branch: float = 0.0
    tools_only: float = 0.0

    def __post_init__(self) -> None:
        for name in ("continuation", "new_conversation", "branch", "tools_only"):
            if getattr(self, name) < 0:
                raise ValueError(f"ReuseModel.{name} must be >= 0")


@dataclass(frozen=True, slots=True)
class Boundaries:
    """Segment indexes where the request's sections end (None: the section is absent).

    Attributes:
        tools_end: last tool definition.
        system_end: last stable system segment.
        static_end: last segment of the static prefix shared across conversations (the end of
            the static context; equals ``system_end`` when there is no context section).
        history_end: last segment before the new turn.
        turn_end: last segment that may be cached (the end of the new turn).
        uncached_from: first segment of the explicit uncached tail (never marked), or None.
    """

    tools_end: int | None = None
    system_end: int | None = None
    static_end: int | None = None
    history_end: int | None = None
    turn_end: int | None = None
    uncached_from: int | None = None


@dataclass(frozen=True, slots=True)
class WrittenEntry:
    """A cache entry a request wrote (or refreshed) at one of its breakpoints.

    Attributes:
        segment_index: the breakpoint's segment index.
        position: its lookback position.
        prefix_tokens: tokens of the cached prefix (up to and including the segment).
        prefix_digest: chained sha256 hex of the prefix content as the provider caches it
            (markers ignored; thinking blocks a plain user turn strips left out, see
            :func:`prefix_digests`), used to check the entry is still a prefix of a later
            request.
    """

    segment_index: int
    position: int
    prefix_tokens: int
    prefix_digest: str | None


@dataclass(frozen=True, slots=True)
class PlannedBreakpoint:
    """One breakpoint of a plan.

    Attributes:
        segment_index / path / position / prefix_tokens: where it sits and what it caches.
        ttl: ``"5m"`` / ``"1h"`` (Anthropic), ``"30m"`` (OpenAI explicit), None (OpenAI's
            implicit breakpoint, which is not emitted).
        source: ``"planner"`` (placed by this plan), ``"user"`` (a marker already in the
            payload, kept), ``"automatic"`` (Anthropic's top-level cache_control) or
            ``"implicit"`` (OpenAI's implicit breakpoint on the newest message).
        role: why the slot exists: ``"tools-end"``, ``"system-end"``, ``"static-end"``,
            ``"history-end"``, ``"turn-end"``, ``"lagging"``, ``"chain"``, ``"user"``,
            ``"automatic"``, ``"implicit"``.
        reason: one sentence for :func:`explain` tables.
        prefix_digest: chained content digest of the prefix (see :func:`prefix_digests`).
    """

    segment_index: int
    path: str
    position: int
    prefix_tokens: int
    ttl: str | None
    source: Literal["planner", "user", "automatic", "implicit"]
    role: str
    reason: str
    prefix_digest: str


@dataclass(frozen=True, slots=True)
class Decision:
    """A candidate the planner considered: placed or skipped, and why."""

    segment_index: int
    path: str
    role: str
    placed: bool
    reason: str


@dataclass(frozen=True, slots=True)
class MarkerEdit:
    """A change to a marker the caller placed, needed for the API to accept the request.

    Attributes:
        path: the marker's block.
        action: ``"drop"`` (over the slot limit: the earliest go first), ``"move"`` (from a
            block that cannot carry one to ``to_path``), ``"remove_block"`` (an empty or
            whitespace-only text block, rejected by the API, is deleted), ``"retime"`` (TTL
            changed to ``ttl`` to restore longer-before-shorter order).
        to_path: target block of a move.
        ttl: new TTL of a retime or a move.
        reason: one sentence.
    """

    path: str
    action: Literal["drop", "move", "remove_block", "retime"]
    to_path: str | None
    ttl: str | None
    reason: str


@dataclass(frozen=True)
class BreakpointPlan:
    """Where a request's cache markers go, and what that is expected to read and write.

    Attributes:
        provider: ``"anthropic"``, ``"openai-chat"`` or ``"openai-responses"``.
        model: the policy's model id.
        breakpoints: every breakpoint of the request in render order (planner, user, automatic,
            implicit).
        decisions: every candidate considered, placed or skipped, with the reason.
        marker_edits: changes to the caller's own markers (see :class:`MarkerEdit`).
        read_tokens: expected cache-read tokens of this request (Anthropic; None elsewhere or
            when unknown).
        write_tokens: expected cache-write (creation) tokens of this request (Anthropic).
        total_tokens: tokens of the whole request.
        expected_next_read: expected cache-read tokens of the next request under ``reuse``
            (on a model that caches without markers, gpt-4o and the other OpenAI models before
            GPT-5.6: the shared prefixes on the 1,024 + 128 n grid).
        prompt_cache_key: OpenAI routing key to send (None: keep the caller's / none).
        prompt_cache_options: OpenAI ``prompt_cache_options`` to send (None: send nothing).
        lookback: the lookback used (None: no limit).
        reuse: the reuse model scored against.
        read_entry: the entry of an earlier request this request is expected to read (None:
            none). A read refreshes the entry's TTL, so it stays cached for the next request of
            the conversation as the written ones do: :meth:`written` includes it, and a plan
            passed as the next plan's ``previous`` hands it on. Without it, an entry that one
            request wrote and the next only read (its marker dropped as redundant) would be
            forgotten by the request after, which may still read it.
        dropped_params: top-level parameters of the request the model rejects, which
            :func:`apply_plan` removes (``prompt_cache_options`` on an OpenAI model before
            GPT-5.6: the API answers 400, hosted-api-rules.md 2.3).
        explicit_writes: GPT-5.6+ explicit breakpoints: how many of the latest explicit
            breakpoints the API writes (``max_breakpoints - 1``, 3, beside the implicit one in
            the default implicit mode; ``max_breakpoints``, 4, in explicit mode); earlier ones
            are only read. None: every breakpoint writes (Anthropic; OpenAI models without
            explicit breakpoints). Source: hosted-api-rules.md 2.3,
            https://developers.openai.com/api/docs/guides/prompt-caching.
    """

    provider: str
    model: str
    breakpoints: tuple[PlannedBreakpoint, ...]
    decisions: tuple[Decision, ...] = ()
    marker_edits: tuple[MarkerEdit, ...] = ()
    read_tokens: int | None = None
    write_tokens: int | None = None
    total_tokens: int = 0
    expected_next_read: float = 0.0
    prompt_cache_key: str | None = None
    prompt_cache_options: Mapping[str, Any] | None = None
    lookback: int | None = None
    reuse: ReuseModel = field(default_factory=ReuseModel)
    read_entry: WrittenEntry | None = None
    dropped_params: tuple[str, ...] = ()
    explicit_writes: int | None = None

    @property
    def paths(self) -> list[str]:
        """Paths of the emitted markers (planner and user, not automatic/implicit)."""
        return [b.path for b in self.breakpoints if b.source in ("planner", "user")]

    @property
    def positions(self) -> list[int]:
        """Lookback positions of every breakpoint, in render order."""
        return [b.position for b in self.breakpoints]

    @property
    def marker_count(self) -> int:
        """Markers the request carries, the automatic one included (Anthropic's limit counts
        it)."""
        return sum(1 for b in self.breakpoints if b.source != "implicit")

    def written(self) -> tuple[WrittenEntry, ...]:
        """The entries this request writes or refreshes (feed to the next plan's ``previous``):
        one per breakpoint that writes (on GPT-5.6+, the implicit one and only the latest
        :attr:`explicit_writes` explicit ones), plus :attr:`read_entry` when no breakpoint sits
        on its block, in segment order."""
        out = [WrittenEntry(b.segment_index, b.position, b.prefix_tokens, b.prefix_digest)
               for b in self._writing()]
        read = self.read_entry
        if read is not None and all(e.segment_index != read.segment_index for e in out):
            out.append(read)
            out.sort(key=lambda e: e.segment_index)
        return tuple(out)

    def _writing(self) -> tuple[PlannedBreakpoint, ...]:
        """The breakpoints that write an entry (see :attr:`explicit_writes`)."""
        limit = self.explicit_writes
        if limit is None:
            return self.breakpoints
        explicit = [b for b in self.breakpoints if b.source != "implicit"]
        if len(explicit) <= limit:
            return self.breakpoints
        skipped = {id(b) for b in explicit[: len(explicit) - max(limit, 0)]}
        return tuple(b for b in self.breakpoints if id(b) not in skipped)


PreviousLike = BreakpointPlan | PrefixView | Sequence[WrittenEntry] | Sequence[int] | None


# ============================================================================ digests
def _dumps(node: Any) -> bytes:
    return json.dumps(node, ensure_ascii=False, separators=(",", ":")).encode("utf-8",
                                                                             "surrogatepass")


def segment_digest(seg: Segment) -> bytes:
    """Content digest of a segment (32-byte sha256 over tier, role, kind and content), with
    ``cache_control`` / ``prompt_cache_breakpoint`` ignored and a string content equal to a
    one-text-block list.

    Computed once per segment (kept in the segment's ``_content_digest`` slot; segments are
    immutable and shared between the views of one conversation through the render memo).
    """
    digest = seg._content_digest
    if digest is None:
        digest = _compute_segment_digest(seg)
        object.__setattr__(seg, "_content_digest", digest)
    return digest


def _compute_segment_digest(seg: Segment) -> bytes:
    raw = seg._data
    if type(raw) is str:  # a string node whose JSON was never needed: its text is the node
        return hashlib.sha256(b"\x00".join(((seg.tier or "").encode(), (seg.role or "").encode(),
                                            seg.kind.encode(), _canonical_text_node(raw))
                                           )).digest()
    data = seg.data
    node: Any = None
    parsed = False
    if b'"cache_control"' in data or b'"prompt_cache_breakpoint"' in data or data[:1] == b'"':
        node = json.loads(data)
        parsed = True
    if parsed:
        if isinstance(node, dict):
            node = {k: v for k, v in node.items() if k not in _MARKER_KEYS}
        data = _canonical_text_node(node)
    elif data[:1] == b"{" and b'"text"' in data:  # any size: marked blocks are parsed too
        data = _canonical_text_node(json.loads(data))
    h = hashlib.sha256(b"\x00".join(((seg.tier or "").encode(), (seg.role or "").encode(),
                                     seg.kind.encode(), data)))
    return h.digest()


def _canonical_text_node(node: Any) -> bytes:
    if isinstance(node, str):
        return b"T\x00" + node.encode("utf-8", "surrogatepass")
    if (isinstance(node, dict) and set(node) == {"type", "text"}
            and node.get("type") in ("text", "input_text") and isinstance(node.get("text"), str)):
        return b"T\x00" + str(node["text"]).encode("utf-8", "surrogatepass")
    if isinstance(node, dict) and node.get("type") == "function_call_output" and \
            isinstance(node.get("output"), list):
        node = {k: (_function_output_content(v) if k == "output" else v)
                for k, v in node.items()}
    return _dumps(node)


def _function_output_content(parts: list[Any]) -> Any:
    """A Responses ``function_call_output``'s ``output`` list as cached content: its parts'
    ``prompt_cache_breakpoint`` s ignored, and one ``input_text`` part equal to the string of
    its text (the planner writes a string output so to carry a breakpoint; the renderer and the
    local backend's template read the two forms as the same content)."""
    clean = [{k: v for k, v in p.items() if k not in _MARKER_KEYS} if isinstance(p, dict)
             else p for p in parts]
    if len(clean) == 1 and isinstance(clean[0], dict) and set(clean[0]) == {"type", "text"} \
            and clean[0].get("type") == "input_text" and isinstance(clean[0].get("text"), str):
        return clean[0]["text"]
    return clean


def prefix_digests(view: PrefixView, base: PrefixView | None = None, *,
                   policy: CachePolicy | None = None) -> list[str]:
    """Chained sha256 hex per segment over content with markers stripped.

    ``out[i]`` identifies segments ``0..i`` of ``view``: equal digests mean an identical cached
    prefix (a string content and a one-text-block list count as equal; ``cache_control`` and
    ``prompt_cache_breakpoint`` are ignored). Stable across processes (no ``hash()``).

    Args:
        view: the request.
        base: an earlier view of the same conversation, or the view a re-marked ``view`` was
            derived from (``promptcache.prefix.remark``): the chain is resumed after the
            leading segments whose content digests equal ``base``'s (the same
            :class:`Segment` objects, which the render memo hands out for unchanged blocks,
            or re-marked copies, which carry their digest), instead of hashed from the start.
        policy: the model's cache policy. Where it has ``strips_prior_thinking`` (older
            Claude models) and a plain user turn strips earlier thinking blocks of ``view``
            (:func:`stripped_thinking`), the chain is over the content the provider caches:
            a stripped block adds nothing (its digest repeats the one before it), so every
            digest from it on differs from a request that still held the block. These are the
            digests of the planner's entries (:attr:`WrittenEntry.prefix_digest`). None: the
            content as sent.
    """
    if policy is not None:
        stripped = stripped_thinking(view, policy)
        if stripped:
            return _stripped_chain(view, stripped)
    cached: list[str] | None = getattr(view, "_prefix_digests", None)
    if cached is not None:
        return list(cached)
    out: list[str] = []
    hashers: list[Any] = []
    segs = view.segments
    start = 0
    if base is not None and base.provider == view.provider and base.model == view.model:
        base_hashers: list[Any] | None = getattr(base, "_prefix_hashers", None)
        base_out: list[str] | None = getattr(base, "_prefix_digests", None)
        if base_hashers is not None and base_out is not None:
            shared = base.segments
            n = min(len(base_hashers), len(segs))
            while start < n and (segs[start] is shared[start] or segment_digest(segs[start])
                                  == segment_digest(shared[start])):
                start += 1
            hashers = base_hashers[:start]
            out = base_out[:start]
    h = hashers[-1] if hashers else hashlib.sha256(f"{view.provider}\x00{view.model}".encode())
    for seg in segs[start:]:
        h = h.copy()
        h.update(segment_digest(seg))
        hashers.append(h)
        out.append(h.hexdigest())
    object.__setattr__(view, "_prefix_digests", out)  # views are immutable: computed once
    object.__setattr__(view, "_prefix_hashers", hashers)  # the chain's states, to resume it
    return list(out)


_THINKING_KINDS = frozenset({"thinking", "redacted_thinking"})


def stripped_thinking(view: PrefixView, policy: CachePolicy | None) -> frozenset[int]:
    """Indexes of the thinking segments of ``view`` the provider strips before caching.

    On older Claude models (catalog ``strips_prior_thinking``: older Opus and Sonnet models and
    Haiku up to 4.5) a plain (non-``tool_result``) user turn drops the thinking blocks of every
    assistant turn before it, and every message from the first stripped block falls out of
    the cache; thinking blocks after the last plain user turn (the current tool loop) are kept.
    The same rule as the diff engine (``promptcache.diff._engine._cached_segments``) and the
    local backend (``promptcache.local.template``). Empty for other models and for OpenAI.
    Source: hosted-api-rules.md 1.7 ("Thinking blocks"),
    https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/prompt-caching.md
    """
    if view.provider != "anthropic" or policy is None or \
            not getattr(policy, "strips_prior_thinking", False):
        return frozenset()
    segs = view.segments
    thinking = [s for s in segs if s.kind in _THINKING_KINDS and s.message_index is not None]
    if not thinking:
        return frozenset()
    role_of: dict[int, str | None] = {}
    tool_turns: set[int] = set()
    for s in segs:
        m = s.message_index
        if m is None:
            continue
        role_of.setdefault(m, s.role)
        if s.kind == "tool_result":
            tool_turns.add(m)
    plain = [m for m, role in role_of.items() if role == "user" and m not in tool_turns]
    if not plain:
        return frozenset()
    last_plain = max(plain)
    return frozenset(s.index for s in thinking if s.message_index is not None
                     and s.message_index < last_plain)


def _stripped_chain(view: PrefixView, stripped: frozenset[int]) -> list[str]:
    """:func:`prefix_digests` over the content the provider caches: the stripped segments add
    nothing (see :func:`stripped_thinking`)."""
    base = prefix_digests(view)  # the chain as sent, up to the first stripped block
    hashers: list[Any] | None = getattr(view, "_prefix_hashers", None)
    first = min(stripped) if hashers is not None and len(hashers) == len(base) else 0
    out = base[:first]
    h = hashers[first - 1] if hashers is not None and first > 0 else hashlib.sha256(
        f"{view.provider}\x00{view.model}".encode())
    last = out[-1] if out else h.hexdigest()
    for seg in view.segments[first:]:
        if seg.index not in stripped:
            h = h.copy()
            h.update(segment_digest(seg))
            last = h.hexdigest()
        out.append(last)
    return out


def cached_prefix_tokens(view: PrefixView, policy: CachePolicy | None
                         ) -> tuple[list[int], frozenset[int]]:
    """(prefix tokens up to each segment as the provider caches the request, the indexes of
    the thinking segments it strips): on models that strip earlier thinking blocks on a plain
    user turn (:func:`stripped_thinking`) those segments count 0 tokens; otherwise each
    segment's own ``end_token``. Shared by the planner and lint (PC303), so both measure a
    breakpoint's prefix alike (tokens; estimates where the view's counts are)."""
    stripped = stripped_thinking(view, policy)
    if not stripped:
        return [s.end_token for s in view.segments], stripped
    return _cached_end_tokens(view, stripped), stripped


def _cached_end_tokens(view: PrefixView, stripped: frozenset[int]) -> list[int]:
    """Prefix tokens per segment as the provider caches the request (the stripped thinking
    segments count 0 tokens)."""
    out: list[int] = []
    removed = 0
    for seg in view.segments:
        if seg.index in stripped:
            removed += seg.tokens
        out.append(seg.start_token + seg.tokens - removed)
    return out


def prompt_cache_key(view: PrefixView, stable_end: int | None = None, *,
                     window_tokens: int | None = None) -> str | None:
    """OpenAI ``prompt_cache_key`` derived from the stable prefix.

    Args:
        view: the request.
        stable_end: last segment index of the stable prefix; default: the last segment of the
            ``tools`` and ``system`` tiers (tools, schema, instructions, leading system and
            developer messages).
        window_tokens: hash only the first this many tokens of the stable prefix (None: all
            of it). For a prefix inferred from a raw request (the wrapper), where a value that
            changes every request may sit late in the system prompt, a window keeps the key,
            and so the routing, stable for the part that can still be read; the planner passes
            the model's minimum cacheable prefix.

    Returns:
        ``"pc-"`` + 32 hex chars of sha256 over the stable segments' content digests (markers
        ignored; a segment cut by the window by its first bytes in proportion), identical in
        every process; None when the request has no stable prefix. The key steers routing
        only: the same stable prefix shares one key, so requests that can reuse each other's
        prefix land on the same cache
        (https://developers.openai.com/api/docs/guides/prompt-caching).
    """
    if stable_end is None:
        stable = [s for s in view.segments if s.tier in ("tools", "system")]
    else:
        stable = list(view.segments[: stable_end + 1])
    if not stable:
        return None
    h = hashlib.sha256(b"promptcache-key-v1\x00" + view.provider.encode())
    for seg in stable:
        if window_tokens is not None and seg.start_token + seg.tokens > window_tokens:
            keep = max(0, window_tokens - seg.start_token)
            piece = _canonical_text_node(seg.text) if seg.text is not None else seg.data
            h.update(b"\x00window\x00" + piece[: len(piece) * keep // max(1, seg.tokens)])
            break
        h.update(segment_digest(seg))
    return "pc-" + h.hexdigest()[:32]


# ============================================================================ boundaries
def infer_boundaries(view: PrefixView) -> Boundaries:
    """Section ends of a raw payload (no builder hints).

    tools end = last ``tools`` segment; system end = static end = last ``system`` segment;
    new turn = the last message whose role is ``user`` (``tool`` results count as the new turn
    for OpenAI chat), so history end = the segment before it; turn end = the last segment.
    """
    segs = view.segments
    tools_end = system_end = history_end = turn_end = None
    for s in segs:
        tier = s.tier
        if tier == "tools":
            tools_end = s.index
        elif tier == "system":
            system_end = s.index
    if segs:
        turn_end = segs[-1].index
        last_turn_msg: int | None = None
        for s in reversed(segs):
            if s.tier == "messages" and s.role in ("user", "tool"):
                last_turn_msg = s.message_index
                break
        if last_turn_msg is not None:
            first = 0
            for s in segs:
                if s.message_index == last_turn_msg and s.tier == "messages":
                    first = s.index
                    break
            history_end = first - 1 if first > 0 else None
            if history_end is not None and segs[history_end].tier != "messages":
                history_end = None
    return _new_boundaries(tools_end, system_end, system_end, history_end, turn_end, None)


# ============================================================================ helpers
#: The TTL of each rank of :data:`_TTL_RANK`.
_RANK_TTL = {rank: name for name, rank in _TTL_RANK.items()}
#: The reuse model of a plan that names none (immutable, so one instance serves every plan).
_DEFAULT_REUSE = ReuseModel()


# The planner makes a few Decision / PlannedBreakpoint / WrittenEntry / Boundaries objects and
# one BreakpointPlan per request; these build the same frozen objects without the dataclass
# __init__ (tests/test_planner.py compares them with the __init__ results).
_new_decision = slot_constructor(Decision)
_new_breakpoint = slot_constructor(PlannedBreakpoint)
_new_entry = slot_constructor(WrittenEntry)
_new_boundaries = slot_constructor(Boundaries)


def _new_plan(provider: str, model: str, breakpoints: tuple[PlannedBreakpoint, ...],
              decisions: tuple[Decision, ...], marker_edits: tuple[MarkerEdit, ...],
              read_tokens: int | None, write_tokens: int | None, total_tokens: int,
              expected_next_read: float, prompt_cache_key: str | None,
              prompt_cache_options: Mapping[str, Any] | None, lookback: int | None,
              reuse: ReuseModel, read_entry: WrittenEntry | None = None,
              dropped_params: tuple[str, ...] = (),
              explicit_writes: int | None = None) -> BreakpointPlan:
    """``BreakpointPlan(...)`` with every field given, in declaration order."""
    plan: BreakpointPlan = object.__new__(BreakpointPlan)
    _set_dict(plan, "__dict__", {
        "provider": provider, "model": model, "breakpoints": breakpoints,
        "decisions": decisions, "marker_edits": marker_edits, "read_tokens": read_tokens,
        "write_tokens": write_tokens, "total_tokens": total_tokens,
        "expected_next_read": expected_next_read, "prompt_cache_key": prompt_cache_key,
        "prompt_cache_options": prompt_cache_options, "lookback": lookback, "reuse": reuse,
        "read_entry": read_entry, "dropped_params": dropped_params,
        "explicit_writes": explicit_writes})
    return plan


#: ``object.__setattr__`` (a frozen dataclass refuses its own)
_set_dict = object.__setattr__


def _policy_provider(policy: CachePolicy) -> str:
    return str(getattr(policy, "provider", "anthropic"))


def _lookback(policy: CachePolicy, view: PrefixView) -> int | None:
    if view.provider != "anthropic":
        return None
    lb = getattr(policy, "lookback_positions", None)
    return int(lb) if lb is not None else None


def _default_ttl(policy: CachePolicy) -> str | None:
    ttl = getattr(policy, "default_ttl", None)
    if isinstance(ttl, str):
        return ttl
    ttls = tuple(getattr(policy, "ttls", ()) or ())
    return ttls[0] if ttls else None


def _blank(text: str | None) -> bool:
    """``not (text or "").strip()`` without copying the text (``str.strip`` strips exactly the
    characters ``str.isspace`` accepts)."""
    return not text or text.isspace()


def _markable(view: PrefixView, seg: Segment) -> bool:
    """Whether the planner may put a marker on ``seg``."""
    if not seg.cacheable:
        return False
    if view.provider == "anthropic":
        kind = seg.kind
        if kind in NO_MARKER_KINDS:
            return False
        if kind != "text":
            return True
        text = seg.text  # _blank, inline
        return not (not text or text.isspace())
    # OpenAI: content parts (or string contents we can turn into parts) of non-assistant turns,
    # and Responses function_call_output items with an output part that can carry one (the
    # renderer's ``cacheable``; _set_marker puts the marker on that part).
    if seg.tier == "tools" or seg.role == "assistant" or seg.kind == "tool_call":
        return False
    if seg.path in ("instructions", "text.format", "response_format", "input"):
        return False
    if seg.kind not in _OPENAI_MARKABLE_KINDS:
        return False
    return not _blank(seg.text) or seg.kind != "text"


def _implicit_index(view: PrefixView) -> int:
    """Segment index of OpenAI's implicit breakpoint (GPT-5.6+, ``prompt_cache_options.mode``
    ``"implicit"``): the newest input item, i.e. the last segment of the messages tier (the
    last segment when the request has no message), whatever its type."""
    segs = view.segments
    for i in range(len(segs) - 1, -1, -1):
        if segs[i].tier == "messages":
            return i
    return len(segs) - 1


def _walk_back(view: PrefixView, index: int, floor: int = 0) -> int | None:
    for i in range(index, floor - 1, -1):
        if _markable(view, view.segments[i]):
            return i
    return None


def _previous_entries(view: PrefixView, previous: PreviousLike, digests: list[str],
                      min_tokens: int, end_tok: Sequence[int] | None = None,
                      policy: CachePolicy | None = None,
                      stripped: frozenset[int] = frozenset()
                      ) -> tuple[list[WrittenEntry], list[Decision]]:
    """Entries the previous request wrote that are still a prefix of ``view``.

    ``digests`` / ``end_tok``: the chain and prefix tokens of ``view`` as the provider caches
    it (``stripped``: its thinking segments a plain user turn strips, see
    :func:`stripped_thinking`); ``end_tok`` None: the view's own token offsets."""
    notes: list[Decision] = []
    if previous is None:
        return [], notes
    segs = view.segments
    # what the previous request wrote: (segment index, prefix tokens, prefix digest)
    raw: list[tuple[int, int, str | None]] = []
    if isinstance(previous, BreakpointPlan):
        raw = [(b.segment_index, b.prefix_tokens, b.prefix_digest)
               for b in previous._writing()]
        read = previous.read_entry  # read by that request, so refreshed: still cached
        if read is not None:
            read_at = read.segment_index
            for r in raw:
                if r[0] == read_at:
                    break
            else:
                raw.append((read_at, read.prefix_tokens, read.prefix_digest))
    elif isinstance(previous, PrefixView):
        pstripped = stripped_thinking(previous, policy)
        pdig = _stripped_chain(previous, pstripped) if pstripped else prefix_digests(previous)
        pend = _cached_end_tokens(previous, pstripped) if pstripped else None
        raw = [(seg.index, seg.end_token if pend is None else pend[seg.index], pdig[seg.index])
               for seg in previous.breakpoints()]
    else:
        for item in previous:
            if isinstance(item, WrittenEntry):
                raw.append((item.segment_index, item.prefix_tokens, item.prefix_digest))
            elif isinstance(item, int) and not isinstance(item, bool):
                at = [s for s in segs if s.position == item]
                if not at:
                    notes.append(_new_decision(-1, f"position {item}", "previous", False,
                                               "previous breakpoint position is past this "
                                               "request"))
                    continue
                last = at[-1]
                raw.append((last.index, last.end_token, None))
            else:
                raise TypeError("previous must be a BreakpointPlan, a PrefixView, WrittenEntry "
                                f"items or int positions, not {type(item).__name__}")
    kept: dict[int, WrittenEntry] = {}
    n = len(segs)
    for index, tokens, digest in raw:
        if index >= n or index < 0:
            notes.append(_new_decision(index, f"#{index}", "previous", False,
                                       "previous entry lies past the end of this request"))
            continue
        if digest is not None and digests[index] != digest:
            why = "content before it changed"
            if stripped and min(stripped) < index and prefix_digests(view)[index] == digest:
                first = segs[min(stripped)].path
                why = (f"a plain user turn now strips the thinking block at {first}: "
                       f"{policy.model_id if policy is not None else view.model} drops earlier "
                       "thinking blocks, so every message from that block on falls out of the "
                       "cache, hosted-api-rules.md 1.7")
            notes.append(_new_decision(index, segs[index].path, "previous", False,
                                       f"previous entry is no longer a prefix of this request "
                                       f"({why})"))
            continue
        if tokens < min_tokens or index in kept:
            continue
        seg = segs[index]
        kept[index] = _new_entry(seg.index, seg.position,
                                 seg.start_token + seg.tokens if end_tok is None
                                 else end_tok[index], digests[seg.index])
    # one entry per segment, in index order
    if len(kept) < 2:
        return list(kept.values()), notes
    return [kept[k] for k in sorted(kept)], notes


# ============================================================================ marker fixes
@dataclass
class _Fixed:
    index: int
    ttl: str | None
    source: Literal["user", "automatic", "implicit"]


def _drop_unsupported_markers(view: PrefixView, policy: CachePolicy) -> list[MarkerEdit]:
    """A ``"drop"`` edit for every ``prompt_cache_breakpoint`` of an OpenAI request whose model
    takes none (before GPT-5.6 caching is automatic and the API answers 400 to the marker;
    hosted-api-rules.md 2.3, https://developers.openai.com/api/docs/guides/prompt-caching)."""
    reason = (f"{policy.model_id} caches automatically and takes no prompt_cache_breakpoint "
              "(GPT-5.6+ only): the API would reject the request (HTTP 400), so the marker is "
              "removed; the model still caches the prompt's prefix on its own")
    return [MarkerEdit(seg.path, "drop", None, None, reason)
            for seg in view.segments if seg.breakpoint is not None]


def _fix_user_markers(view: PrefixView, policy: CachePolicy,
                      max_markers: int) -> tuple[list[_Fixed], list[MarkerEdit]]:
    """Repair the caller's markers so the API accepts them (BR-09, BR-10, TTL order); on an
    OpenAI model that takes no markers (before GPT-5.6), drop them all.

    Only Anthropic limits the markers of a request (``max_markers``, the automatic one
    counted; more is an HTTP 400): the earliest are dropped there. On OpenAI GPT-5.6+
    ``max_breakpoints`` limits cache *writes*, not markers: the API accepts any number, writes
    at the latest ones and only reads at the earlier ones (hosted-api-rules.md 2.3), so every
    marker is kept; the earliest is often the system prompt's, the entry a new conversation
    reads."""
    edits: list[MarkerEdit] = []
    segs = view.segments
    if view.automatic is None:
        for seg in segs:
            if seg.breakpoint is not None:
                break
        else:
            return [], edits  # no marker in the request
    fixed: dict[int, _Fixed] = {}
    anthropic = view.provider == "anthropic"
    if not anthropic and (not getattr(policy, "explicit_breakpoints", False) or max_markers <= 0):
        return [], _drop_unsupported_markers(view, policy)
    for seg in segs:
        bp = seg.breakpoint
        if bp is None:
            continue
        if _markable(view, seg):
            fixed[seg.index] = _Fixed(seg.index, bp.ttl, "user")
            continue
        target = _walk_back(view, seg.index - 1) if seg.index > 0 else None
        is_blank_text = seg.kind == "text" and _blank(seg.text)
        if is_blank_text and anthropic and seg.path != "system" and not seg.path.endswith(
                ".content"):
            edits.append(MarkerEdit(seg.path, "remove_block", None, None,
                                    "empty or whitespace-only text block: the API rejects it"))
        if target is None:
            edits.append(MarkerEdit(seg.path, "drop", None, None,
                                    f"a {seg.kind} block cannot carry a marker and no earlier "
                                    "block can take it"))
            continue
        tpath = segs[target].path
        edits.append(MarkerEdit(seg.path, "move", tpath, bp.ttl,
                                f"a {'blank text' if is_blank_text else seg.kind} block cannot "
                                f"carry a marker; moved to {tpath}, which caches the same prefix "
                                "up to that block"))
        prev = fixed.get(target)
        if prev is None or _TTL_RANK.get(str(bp.ttl), 0) > _TTL_RANK.get(str(prev.ttl), 0):
            fixed[target] = _Fixed(target, bp.ttl, "user")
    auto_idx = view.automatic_index if anthropic else None
    if anthropic and view.automatic is not None and auto_idx is not None:
        if auto_idx in fixed:
            same = fixed[auto_idx].ttl == view.automatic.ttl
            edits.append(MarkerEdit(
                segs[auto_idx].path, "drop", None, None,
                "the top-level cache_control already marks this block (same prefix, one slot "
                "saved)" if same else "the top-level cache_control lands on this block with a "
                "different TTL (a documented 400); the top-level one is kept"))
            del fixed[auto_idx]
    order = sorted(fixed)
    budget = max_markers - (1 if (anthropic and view.automatic is not None
                                  and auto_idx is not None) else 0)
    if anthropic and len(order) > budget:
        drop = order[: len(order) - max(budget, 0)]
        for i in drop:
            edits.append(MarkerEdit(segs[i].path, "drop", None, None,
                                    f"{len(order) + max_markers - budget} markers exceed the limit "
                                    f"of {max_markers}; the earliest go first (a later marker "
                                    "already caches everything before it)"))
            del fixed[i]
    out = [fixed[i] for i in sorted(fixed)]
    if anthropic and view.automatic is not None and auto_idx is not None:
        out.append(_Fixed(auto_idx, view.automatic.ttl, "automatic"))
        out.sort(key=lambda f: f.index)
    # TTL order: a longer TTL never after a shorter one; promote the earlier markers.
    if anthropic:
        longest_after = -1
        for f in reversed(out):
            rank = _TTL_RANK.get(str(f.ttl), 0)
            if rank < longest_after and f.source == "user":
                new_ttl = _rank_ttl(longest_after)
                edits.append(MarkerEdit(segs[f.index].path, "retime", None, new_ttl,
                                        f"a {new_ttl} marker follows this {f.ttl} one; longer "
                                        "TTLs must come first, so this one is raised to "
                                        f"{new_ttl}"))
                f.ttl = new_ttl
                rank = longest_after
            longest_after = max(longest_after, rank)
    return out, edits


# ============================================================================ search
#: A candidate of the search: (role, reason). The reason of a ``lagging`` or ``chain``
#: candidate is made only if the plan places it (:func:`_cand_reason`): until then it is
#: None and the third item holds what it names (the entry, or the segment it chains from).
_Cand = tuple[str, str | None, Any]
#: Candidates the search keeps when it must trim the set to :data:`_MAX_CANDIDATES`.
_KEEP_ROLES = frozenset({"tools-end", "system-end", "static-end", "history-end", "turn-end",
                         "lagging"})
_ANCHOR_ROLES = frozenset({"tools-end", "system-end", "static-end"})
_FIXED_REASONS = {"user": "marker already in the request (kept)",
                  "automatic": "top-level cache_control lands here (takes one slot)",
                  "implicit": "OpenAI's implicit breakpoint on the newest input item"}
#: The reason of a candidate that adds nothing, per reuse model (formatted once per model).
_NO_GAIN_REASONS: dict[int, tuple[ReuseModel, str]] = {}


def _decision_order(d: Decision) -> tuple[int, bool]:
    return d.segment_index, not d.placed


def _minus_tokens(hit: tuple[int, int, int]) -> int:
    return -hit[0]


def _no_gain_reason(reuse: ReuseModel) -> str:
    """Why a section end the plan leaves out adds nothing, naming the reuse weights."""
    hit = _NO_GAIN_REASONS.get(id(reuse))
    if hit is not None and hit[0] is reuse:
        return hit[1]
    why = ("adds no expected cache reads under the reuse model "
           f"(continuation {reuse.continuation:g}, new conversation "
           f"{reuse.new_conversation:g}, branch {reuse.branch:g}, tools only "
           f"{reuse.tools_only:g})")
    if len(_NO_GAIN_REASONS) >= 64:
        _NO_GAIN_REASONS.clear()
    _NO_GAIN_REASONS[id(reuse)] = (reuse, why)  # the model is kept, so its id stays unique
    return why


def _cand_reason(cand: _Cand, segs: Sequence[Segment], lookback: int | None) -> str:
    """The reason text of a candidate (made here for the lagging and chain ones)."""
    role, reason, about = cand
    if reason is not None:
        return reason
    if role == "lagging":
        return (f"lagging: within {lookback} positions of the entry the previous request "
                f"wrote at {segs[about.segment_index].path}, so this request reads "
                f"{about.prefix_tokens} tokens")
    return f"chain: within {lookback} positions of {segs[about].path}"


def plan_breakpoints(view: PrefixView, policy: CachePolicy, previous: PreviousLike = None, *,
                     boundaries: Boundaries | None = None, reuse: ReuseModel | None = None,
                     ttl: str | None = None, stable_ttl: str | None = None,
                     stable_key_end: int | None = None) -> BreakpointPlan:
    """Plan the cache breakpoints of one request (see the module docstring for the model).

    Args:
        view: the request (``promptcache.prefix.render``); markers already in it are kept
            (repaired where the API would reject them, see :class:`MarkerEdit`) and counted.
        policy: the model's cache policy (``promptcache.catalog.get_policy``).
        previous: what the previous request of the conversation wrote: its
            :class:`BreakpointPlan`, its :class:`PrefixView` (its markers), a sequence of
            :class:`WrittenEntry`, or a sequence of written breakpoint positions (ints, taken
            as still valid). Entries whose prefix changed are ignored.
        boundaries: section ends (the builder passes them); inferred from the view otherwise.
        reuse: the next-request scenario weights.
        ttl: TTL of the planner's markers (default: the policy's default TTL).
        stable_ttl: TTL of markers at or before the static end (e.g. ``"1h"``); must sort
            before ``ttl`` (the order is enforced).
        stable_key_end: last segment of the stable prefix hashed into the OpenAI key.

    Returns:
        A :class:`BreakpointPlan`; never more than ``policy.max_breakpoints`` markers on
        Anthropic (on GPT-5.6+ the caller's markers are all kept; only the latest are
        written), never a longer TTL after a shorter one, never a marker on a block that
        cannot carry one.

    Raises:
        PlanError: ``ttl`` / ``stable_ttl`` is not a TTL the model supports, or the provider
            of ``view`` does not match the policy.
    """
    reuse = reuse or _DEFAULT_REUSE
    anthropic = view.provider == "anthropic"
    prov = _policy_provider(policy)
    if (prov == "anthropic") != anthropic:
        raise PlanError(f"a {view.provider} request cannot be planned with the {prov} policy of "
                        f"{policy.model_id}")
    ttls = tuple(getattr(policy, "ttls", ()) or ())
    if ttl is not None or stable_ttl is not None:
        for name, value in (("ttl", ttl), ("stable_ttl", stable_ttl)):
            if value is not None and value not in ttls:
                raise PlanError(f"{name}={value!r} is not a TTL {policy.model_id} supports "
                                f"(supported: {', '.join(ttls) or 'none'})")
    bounds = boundaries or infer_boundaries(view)
    segs = view.segments
    # prefix_digests(view) without its defensive copy (the planner only reads the list)
    digests: list[str] | None = getattr(view, "_prefix_digests", None)
    if digests is None:
        digests = prefix_digests(view)
    # older Claude models: a plain user turn strips earlier thinking blocks before caching, so
    # entries and prefix tokens are those of the content without them (hosted-api-rules.md 1.7)
    stripped = stripped_thinking(view, policy) if anthropic else frozenset()
    if stripped:
        digests = _stripped_chain(view, stripped)
    min_tokens = int(getattr(policy, "min_cacheable_tokens", 0) or 0)
    lookback = _lookback(policy, view)
    max_markers = int(getattr(policy, "max_breakpoints", 0) or 0)
    explicit_ok = bool(getattr(policy, "explicit_breakpoints", False))
    decisions: list[Decision] = []

    key: str | None = None
    options: dict[str, Any] | None = None
    #: parameters the model rejects: prompt_cache_options before GPT-5.6 (an API 400)
    dropped_params: tuple[str, ...] = ()
    if not anthropic:
        if "prompt_cache_key" not in view.params:
            # a prefix inferred from a raw request may end in a value that changes every
            # request: the key covers its first min_tokens only (the builder's does not)
            key = (prompt_cache_key(view, stable_key_end) if stable_key_end is not None
                   else prompt_cache_key(view, bounds.static_end,
                                         window_tokens=min_tokens or None))
        if bool(getattr(policy, "prompt_cache_options", False)) and \
                "prompt_cache_options" not in view.params and ttls:
            options = {"mode": "implicit", "ttl": ttls[0]}
        if "prompt_cache_options" in view.params and \
                not bool(getattr(policy, "prompt_cache_options", False)):
            dropped_params = ("prompt_cache_options",)

    n = len(segs)
    if not n or not explicit_ok or max_markers <= 0:
        reason = ("the model caches automatically; it takes no breakpoints"
                  if not anthropic else "nothing to cache")
        if segs:
            decisions.append(_new_decision(segs[-1].index, segs[-1].path, "turn-end", False,
                                           reason))
        # the caller's markers on a model that takes none are dropped (the API would 400)
        dropped = tuple(_fix_user_markers(view, policy, max_markers)[1]) if segs else ()
        auto_next = _automatic_next_read(view, policy, bounds, reuse) if not anthropic else 0.0
        return _new_plan(view.provider, policy.model_id, (), tuple(decisions), dropped, None,
                         None, view.total_tokens, auto_next, key, options, lookback, reuse, None,
                         dropped_params)

    # per-segment facts the search reads many times (plain lists: no property calls). The
    # renderer counts positions cumulatively, so they never decrease with the index: the
    # segments within a range of positions are a slice, found by bisection.
    end_tok = ([s.start_token + s.tokens for s in segs] if not stripped
               else _cached_end_tokens(view, stripped))
    pos_of = [s.position for s in segs]
    # Near the minimum with an estimated count: a marker whose prefix is under the minimum by
    # the estimate but reaches it at the upper end of the count's error bound is placed (a
    # marker on a prefix under the minimum costs nothing: no error, nothing cached,
    # hosted-api-rules.md 1.4). The search treats prefixes from ``place_min`` on as cacheable;
    # the reported reads and writes keep the minimum on the estimated counts (as diff does).
    place_min, count_rate = _placement_minimum(view, end_tok, min_tokens)
    markable_memo: list[bool | None] = [None] * n  # _markable per segment, on demand

    def walk_back(index: int) -> int | None:
        """The last segment at or before ``index`` that can carry a marker."""
        i = index
        while i >= 0:
            m = markable_memo[i]
            if m is None:
                m = markable_memo[i] = _markable(view, segs[i])
            if m:
                return i
            i -= 1
        return None

    # ---- the caller's markers (repaired) and the fixed automatic / implicit breakpoints
    fixed, edits = _fix_user_markers(view, policy, max_markers)
    mode = "implicit"
    implicit_idx = -1  # the implicit breakpoint's segment (-1: none)
    if not anthropic:
        opts = view.params.get("prompt_cache_options")
        if isinstance(opts, Mapping) and opts.get("mode") == "explicit":
            mode = "explicit"
        if mode == "implicit":
            # the implicit breakpoint sits on the newest input item whatever its type (a
            # function_call_output, an assistant message): only an explicit marker needs a
            # markable part. The last segment of the messages tier, else the last segment, as
            # the diff engine (openai_written) and the local backend (openai_breakpoints) model
            # it. Source: hosted-api-rules.md 2.3 ("one implicit breakpoint on the newest
            # message").
            implicit_idx = _implicit_index(view)
            if all(f.index != implicit_idx for f in fixed):
                fixed.append(_Fixed(implicit_idx, None, "implicit"))
                fixed.sort(key=lambda f: f.index)
    n_markers = 0
    for f in fixed:
        if f.source != "implicit":
            n_markers += 1
    explicit_budget = max_markers - (1 if (not anthropic and mode == "implicit") else 0)
    slots = max(0, explicit_budget - n_markers) if not anthropic else \
        max(0, max_markers - n_markers)
    fixed_idx = {f.index for f in fixed}

    prev_entries, prev_notes = _previous_entries(view, previous, digests, place_min,
                                                 end_tok if stripped else None, policy,
                                                 stripped)
    if prev_notes:
        decisions.extend(prev_notes)

    # ---- candidates
    limit = n - 1 if bounds.uncached_from is None else bounds.uncached_from - 1
    cands: dict[int, _Cand] = {}

    section_ends = [(bounds.tools_end, "tools-end", "end of the tools"),
                    (bounds.system_end, "system-end", "end of the system prompt")]
    if bounds.static_end != bounds.system_end:
        section_ends.append((bounds.static_end, "static-end", "end of the static context"))
    section_ends.append((bounds.history_end, "history-end", "end of the history"))
    section_ends.append((bounds.turn_end, "turn-end", "end of the new turn"))
    for idx, role, reason in section_ends:
        if idx is None or idx < 0:
            continue
        target = walk_back(min(idx, limit))
        if target is None:
            decisions.append(_new_decision(idx, segs[min(idx, n - 1)].path, role,
                                           False, "no block at or before it can carry a marker"))
            continue
        if target != idx:
            reason += f" (moved back from {segs[min(idx, n - 1)].path}: that block " \
                      "cannot carry a marker)"
        if end_tok[target] < place_min:
            decisions.append(_new_decision(target, segs[target].path, role, False,
                                           f"prefix {end_tok[target]} tokens < the minimum "
                                           f"{min_tokens} for {policy.model_id}: nothing would "
                                           "be cached"))
            continue
        if target in fixed_idx:
            decisions.append(_new_decision(
                target, segs[target].path, role, False,
                "OpenAI's implicit breakpoint on the newest input item sits here (it caches "
                "this prefix)" if target == implicit_idx else "already carries a marker (kept)"))
            continue
        if target not in cands:
            cands[target] = (role, reason, None)

    if lookback is not None and slots > 0:
        def latest_within(anchor_pos: int, after_index: int) -> int | None:
            """The last segment from ``after_index`` on (up to ``limit``) within the lookback
            of ``anchor_pos`` that can hold an entry (at least ``min_tokens``, markable)."""
            i = bisect_right(pos_of, anchor_pos + lookback) - 1
            if i > limit:
                i = limit
            while i >= after_index:
                if end_tok[i] >= place_min:
                    m = markable_memo[i]
                    if m is None:
                        m = markable_memo[i] = _markable(view, segs[i])
                    if m:
                        return i
                i -= 1
            return None

        chain_next: dict[int, int | None] = {}  # the chains of several anchors often meet
        for e in prev_entries:
            at = e.segment_index
            lag = latest_within(e.position, at)
            if lag is not None and lag not in fixed_idx and lag not in cands:
                cands[lag] = ("lagging", None, e)
            if 0 <= at < n and pos_of[at] == e.position:
                # the chain from the entry's block scans the same blocks but its own
                chain_next[at] = lag if lag != at else None
        anchors = [e.segment_index for e in prev_entries]
        anchors += [i for i, c in cands.items() if c[0] in _ANCHOR_ROLES]
        for a in anchors:
            cur = a
            for _ in range(slots):
                if cur in chain_next:
                    nxt = chain_next[cur]
                else:
                    nxt = chain_next[cur] = latest_within(pos_of[cur], cur + 1)
                if nxt is None or nxt <= cur:
                    break
                if nxt not in fixed_idx and nxt not in cands:
                    cands[nxt] = ("chain", None, cur)
                cur = nxt
        end = bounds.turn_end if bounds.turn_end is not None else limit
        cur_b = walk_back(min(end, limit))
        for _ in range(slots):
            if cur_b is None:
                break
            # the first segment before cur_b whose lookback reaches it and that can hold an
            # entry
            prv: int | None = None
            i = bisect_left(pos_of, pos_of[cur_b] - lookback)
            while i < cur_b:
                if end_tok[i] >= place_min:
                    m = markable_memo[i]
                    if m is None:
                        m = markable_memo[i] = _markable(view, segs[i])
                    if m:
                        prv = i
                        break
                i += 1
            if prv is None:
                break
            if prv not in fixed_idx and prv not in cands:
                cands[prv] = ("chain", None, cur_b)
            cur_b = prv

    cand_idx = sorted(cands)
    if len(cand_idx) > _MAX_CANDIDATES:
        primary = [i for i in cand_idx if cands[i][0] in _KEEP_ROLES]
        rest = [i for i in reversed(cand_idx) if cands[i][0] not in _KEEP_ROLES]
        cand_idx = sorted(primary + rest[: max(0, _MAX_CANDIDATES - len(primary))])

    # ---- scoring
    # A plan is a set of indexes from the pool (candidates and fixed markers); the search
    # scores every combination of candidates, so sets are bit masks over the pool, bit k for
    # pool[k]. The pool is in index order, so a mask's highest bit is its last index, and
    # (positions never decreasing) the pool indexes within a position range are a run of bits.
    pool = sorted(fixed_idx.union(cand_idx)) if fixed_idx else cand_idx
    bit_of = {i: 1 << k for k, i in enumerate(pool)}
    pool_pos = [pos_of[i] for i in pool]
    #: prefix tokens of the last index of a mask m: last_tok[m.bit_length()] (0: empty mask)
    last_tok = [0]
    written_mask = 0  # the pool indexes whose prefix is long enough to be written
    for k, i in enumerate(pool):
        tok = end_tok[i]
        last_tok.append(tok)
        if tok >= place_min:
            written_mask |= 1 << k
    fixed_mask = 0
    for i in fixed_idx:
        fixed_mask |= bit_of[i]

    #: (prefix tokens, index, the pool indexes whose lookback reaches it) per previous entry;
    #: an entry's prefix tokens are the end_tok of its index
    entry_hits: list[tuple[int, int, int]] = []
    read_mask = 0  # the pool indexes that read some entry
    for e in prev_entries:
        lo = bisect_left(pool, e.segment_index)
        hi = len(pool) if lookback is None else bisect_right(pool_pos, e.position + lookback)
        hits = (1 << hi) - (1 << lo) if hi > lo else 0
        entry_hits.append((e.prefix_tokens, e.segment_index, hits))
        read_mask |= hits
    # chain_limits[b] for a candidate b whose lookback reaches no entry of the previous request:
    # (the bits before b, the lowest bit within b's lookback). A plan breaks the chain at b
    # when it holds indexes before b but none within the lookback: 0 < plan & before < lowest.
    chain_limits: dict[int, tuple[int, int]] = {}
    if lookback is not None:
        for b in cand_idx:
            bit = bit_of[b]
            if not bit & read_mask:
                chain_limits[b] = (bit - 1, 1 << bisect_left(pool_pos, pos_of[b] - lookback))

    #: (weight, end of the shared prefix, the pool indexes up to it) per next-request scenario
    #: that counts
    active = [(w, lim, (1 << bisect_right(pool, lim)) - 1) for w, lim in (
        (reuse.continuation, bounds.turn_end if bounds.turn_end is not None else limit),
        (reuse.new_conversation, bounds.static_end), (reuse.branch, bounds.history_end),
        (reuse.tools_only, bounds.tools_end)) if w and lim is not None]

    # this request's read is the longest entry a plan reaches (the first of equal ones): the
    # first entry of this list (longest first, else in order) that the plan hits
    by_tokens = sorted([h for h in entry_hits if h[0] > 0], key=_minus_tokens)

    # The score of a plan (sorted candidate indexes ``planned``, bit mask ``mask``) with the
    # fixed markers: (this request's read + the weighted reads of the next request, minus
    # the cache writes beyond the read (<= 0), minus the marker count, the index sum); the
    # highest wins, the first of equal ones. The empty plan's:
    plan_mask = fixed_mask
    now, read_i = 0, -1  # this request's read
    for tokens, index, hits in by_tokens:
        if hits & plan_mask:
            now, read_i = tokens, index
            break
    written = plan_mask & written_mask
    nxt_read = _next_read(written, now, read_i, active, last_tok)
    best_score = (now + nxt_read, min(0, now - last_tok[written.bit_length()]), 0, 0)
    best_pos: tuple[int, ...] = ()  # the best plan's candidates, by position in cand_idx
    best_mask = 0
    nc = len(cand_idx)
    subsets = _subsets(nc, min(slots, nc))
    if fixed_mask:  # the pool holds the fixed markers too: bit_of[cand_idx[j]] is not 1 << j
        cand_bits = [bit_of[i] for i in cand_idx]
        subsets = ((k, pos, sum([cand_bits[j] for j in pos], fixed_mask))
                   for k, pos, _mask in subsets)
    chain_at = [chain_limits.get(i) for i in cand_idx] if chain_limits else None
    for k, pos, plan_mask in subsets:
        if chain_at is not None and not _chain_ok_at(pos, plan_mask, chain_at):
            continue
        # the score, as for the empty plan above (_next_read inlined: thousands of plans on a
        # long request)
        now, read_i = 0, -1
        for tokens, index, hits in by_tokens:
            if hits & plan_mask:
                now, read_i = tokens, index
                break
        written = plan_mask & written_mask
        nxt_read = 0.0
        for w, lim, lim_mask in active:
            top = last_tok[(written & lim_mask).bit_length()]
            if now > top and read_i <= lim:
                top = now
            nxt_read += w * top
        first = now + nxt_read
        # the rest of the score only where the first part does not decide
        if first == best_score[0]:
            sc = (first, min(0, now - last_tok[written.bit_length()]), -k,
                  sum([cand_idx[j] for j in pos]))
            if sc > best_score:
                best_pos, best_mask, best_score = pos, plan_mask ^ fixed_mask, sc
        elif first > best_score[0]:
            best_pos, best_mask = pos, plan_mask ^ fixed_mask
            best_score = (first, min(0, now - last_tok[written.bit_length()]), -k,
                          sum([cand_idx[j] for j in pos]))
    best = tuple([cand_idx[j] for j in best_pos])

    # ---- TTLs of the planner's markers
    base_ttl = ttl or _default_ttl(policy)
    stable = stable_ttl or base_ttl
    if (stable is not None and base_ttl is not None
            and _TTL_RANK.get(stable, 0) < _TTL_RANK.get(base_ttl, 0)):
        raise PlanError(f"stable_ttl={stable!r} is shorter than ttl={base_ttl!r}; longer TTLs "
                        "must come first")
    chosen = set(best)
    rows: list[PlannedBreakpoint] = []
    static_lim = bounds.static_end if bounds.static_end is not None else -1
    ttl_of: dict[int, str | None] = {f.index: f.ttl for f in fixed}
    if anthropic and not fixed:
        # Longer TTLs first: with no caller marker after it, a planner marker keeps its TTL
        # (the clamp below leaves its rank as it is; a TTL it does not rank becomes 5m).
        stable_emit = _RANK_TTL[_TTL_RANK.get(str(stable), 0)]
        base_emit = _RANK_TTL[_TTL_RANK.get(str(base_ttl), 0)]
        for i in best:
            ttl_of[i] = stable_emit if i <= static_lim else base_emit
    else:
        for i in best:
            ttl_of[i] = stable if i <= static_lim else base_ttl
    if anthropic and fixed:
        # Longer TTLs first: a planner marker followed by caller markers is raised to the
        # longest of their TTLs, but not above any marker before it.
        order = sorted(ttl_of)
        ranks = [_TTL_RANK.get(str(ttl_of[i]), 0) for i in order]
        for pos_i, i in enumerate(order):
            if i in chosen:
                rank = ranks[pos_i]
                later_fixed = [ranks[p] for p in range(pos_i + 1, len(order))
                               if order[p] not in chosen]
                if later_fixed:
                    upper = min(ranks[:pos_i], default=rank)
                    rank = max(min(rank, upper), max(later_fixed))
                ranks[pos_i] = rank
                ttl_of[i] = _rank_ttl(rank)
    marked = sorted(chosen | fixed_idx) if fixed_idx else list(best)
    # this request's read: the longest entry the plan reaches (its prefix is end_tok[read_i])
    plan_mask = best_mask | fixed_mask
    now = 0
    read_at: int | None = None
    for tokens, index, hits in by_tokens:
        if hits & plan_mask and tokens >= min_tokens:  # a near-minimum entry reads nothing
            now, read_at = tokens, index
            break
    next_read = best_score[0] - now
    if place_min < min_tokens:
        # the search counted the near-minimum prefixes as cached; the prediction does not
        strict = 0
        for k, i in enumerate(pool):
            if end_tok[i] >= min_tokens:
                strict |= 1 << k
        next_read = _next_read(plan_mask & strict, now,
                               read_at if read_at is not None else -1, active, last_tok)
    fixed_by_idx = {f.index: f for f in fixed} if fixed else {}
    planner_ttl = (ttls[0] if ttls else None) if not anthropic else None
    for i in marked:
        seg = segs[i]
        if i in chosen:
            c = cands[i]
            src: Literal["planner", "user", "automatic", "implicit"] = "planner"
            role = c[0]
            reason = c[1] if c[1] is not None else _cand_reason(c, segs, lookback)
            if read_at is not None and role != "lagging" and lookback is not None:
                # the first marker at or after the entry, within its lookback, reads it
                # (positions never decrease, so a marker between the two would be within it too)
                if i >= read_at and 0 <= pos_of[i] - pos_of[read_at] <= lookback and \
                        marked[bisect_left(marked, read_at)] == i:
                    reason += f"; its lookback reads the previous entry at {segs[read_at].path}"
            if end_tok[i] < min_tokens:
                reason += "; " + _near_minimum_note(end_tok[i], count_rate, min_tokens,
                                                    policy.model_id)
            emit_ttl = ttl_of.get(i) if anthropic else planner_ttl
            rows.append(_new_breakpoint(i, seg.path, pos_of[i], end_tok[i], emit_ttl, src,
                                        role, reason, digests[i]))
            decisions.append(_new_decision(i, seg.path, role, True, reason))
        else:
            f = fixed_by_idx[i]
            rows.append(_new_breakpoint(i, seg.path, pos_of[i], end_tok[i], ttl_of.get(i),
                                        f.source, f.source, _FIXED_REASONS[f.source],
                                        digests[i]))
    if len(cand_idx) > len(best):
        full = len(chosen) >= slots
        if full:
            why = (f"no slot left: {slots} free after the caller's markers, all taken by a "
                   "plan with more expected reads")
        for i in cand_idx:
            if i in chosen:
                continue
            role = cands[i][0]
            if full:
                pass
            elif chain_limits and not _chain_ok((*best, i), best_mask | fixed_mask | bit_of[i],
                                                chain_limits):
                why = (f"would break the lookback chain: more than {lookback} positions after "
                       "every earlier breakpoint and every entry the previous request wrote")
            elif role == "chain":
                why = "not needed: the chosen breakpoints already reach each other"
            else:
                why = _no_gain_reason(reuse)
            decisions.append(_new_decision(i, segs[i].path, role, False, why))

    write: int | None = None
    read: int | None = None
    if anthropic:
        read = now
        top = max([end_tok[i] for i in marked if end_tok[i] >= min_tokens], default=0)
        write = max(0, top - read) if top > read else 0
    decisions.sort(key=_decision_order)
    read_entry = None
    if read_at is not None:
        for e in prev_entries:
            if e.segment_index == read_at:
                read_entry = e
                break
    return _new_plan(view.provider, policy.model_id, tuple(rows), tuple(decisions),
                     tuple(edits), read, write, end_tok[-1], float(next_read), key, options,
                     lookback, reuse, read_entry, dropped_params,
                     None if anthropic else explicit_budget)


def _placement_minimum(view: PrefixView, end_tok: Sequence[int],
                       min_tokens: int) -> tuple[int, float]:
    """(the smallest estimated prefix the planner may mark, the count's relative error bound).

    Anthropic counts are estimates (``promptcache.tokens.view_count_bound``: +-15 % on text):
    a prefix of ``t`` estimated tokens may really hold up to ``t * (1 + bound)``, so one whose
    upper end reaches ``min_tokens`` may be cached and gets a marker (one under the minimum
    costs nothing, hosted-api-rules.md 1.4). Exact counts (and OpenAI requests, whose counts
    are exact but for the framing) keep ``min_tokens``. Returns ``(min_tokens, 0.0)`` when no
    prefix lies under the minimum within the error bound (``end_tok`` never decreases)."""
    if view.provider != "anthropic" or min_tokens <= 0 or not end_tok \
            or end_tok[0] >= min_tokens:
        return min_tokens, 0.0
    from promptcache.tokens import view_count_bound

    exact, rate = view_count_bound(view)
    if exact or rate <= 0:
        return min_tokens, 0.0
    floor = math.ceil(min_tokens / (1 + rate))
    # the smallest count may_reach_minimum() accepts (float rounding either way)
    while floor > 0 and (floor - 1) * (1 + rate) >= min_tokens:
        floor -= 1
    while floor * (1 + rate) < min_tokens:
        floor += 1
    # end_tok never decreases: no prefix in [floor, min_tokens) means nothing near the minimum
    near = bisect_left(end_tok, floor)
    if near >= len(end_tok) or end_tok[near] >= min_tokens:
        return min_tokens, 0.0
    return min(floor, min_tokens), rate


def may_reach_minimum(tokens: int, rate: float, minimum: int) -> bool:
    """Whether an estimated prefix of ``tokens`` under ``minimum`` may reach it within the
    count's relative error ``rate`` (``tokens * (1 + rate) >= minimum``): the planner marks
    such a prefix and lint PC303 says so (one rule for both; a marker under the minimum costs
    nothing, hosted-api-rules.md 1.4). False at or above the minimum."""
    return tokens < minimum and tokens * (1 + rate) >= minimum


def _near_minimum_note(tokens: int, rate: float, min_tokens: int, model: str) -> str:
    """The decision reason of a marker on a prefix the estimate puts under the minimum."""
    return (f"the prefix count {tokens} is an estimate (+-{rate:.0%}, up to "
            f"{math.floor(tokens * (1 + rate))} tokens) near the minimum {min_tokens} for "
            f"{model}: the real prefix may reach the minimum, and if it is shorter the marker "
            "costs nothing (no error, nothing cached)")


def _automatic_next_read(view: PrefixView, policy: CachePolicy, bounds: Boundaries,
                         reuse: ReuseModel) -> float:
    """Expected read (tokens) of the next request on a model that caches without markers
    (OpenAI before GPT-5.6, catalog ``automatic_caching``): in each reuse scenario the prefix
    it shares with this request, on the cacheable grid: 0 under ``min_cacheable_tokens``
    (1,024), else the minimum plus whole ``cache_step_tokens`` (128) steps
    (:func:`promptcache.catalog.cache_grid_tokens`, as ``diff`` predicts a read). Source:
    https://developers.openai.com/api/docs/guides/prompt-caching (hosted-api-rules.md 2.1:
    "Turns on automatically for prompts of >= 1,024 tokens. After that, hits grow in
    128-token increments")."""
    segs = view.segments
    if not segs or not bool(getattr(policy, "automatic_caching", False)):
        return 0.0
    minimum = int(getattr(policy, "min_cacheable_tokens", 0) or 0)
    step = int(getattr(policy, "cache_step_tokens", 0) or 1)
    from promptcache.catalog import cache_grid_tokens

    limit = len(segs) - 1 if bounds.uncached_from is None else bounds.uncached_from - 1
    total = 0.0
    for weight, end in ((reuse.continuation, bounds.turn_end if bounds.turn_end is not None
                         else limit), (reuse.new_conversation, bounds.static_end),
                        (reuse.branch, bounds.history_end), (reuse.tools_only, bounds.tools_end)):
        if not weight or end is None or end < 0:
            continue
        seg = segs[min(end, len(segs) - 1)]
        shared = seg.start_token + seg.tokens
        total += weight * cache_grid_tokens(shared, minimum, step)
    return total


def _next_read(written: int, now: int, read_i: int,
               active: Sequence[tuple[float, int, int]], last_tok: Sequence[int]) -> float:
    """The weighted read of the next request (tokens) for a plan writing the pool indexes in
    ``written`` (bit mask) while this request reads ``now`` tokens at index ``read_i`` (-1:
    none): in each scenario (weight, end of its shared prefix, its pool mask) the longest entry
    inside the shared prefix, the last one the plan writes there or the entry this request
    read (``last_tok[m.bit_length()]``: the prefix tokens of mask ``m``'s last index)."""
    nxt_read = 0.0
    for w, lim, lim_mask in active:
        top = last_tok[(written & lim_mask).bit_length()]
        if now > top and read_i <= lim:
            top = now
        nxt_read += w * top
    return nxt_read


def _chain_ok_at(positions: Iterable[int], plan_mask: int,
                 chain_at: Sequence[tuple[int, int] | None]) -> bool:
    """:func:`_chain_ok` with the limits by candidate position (``chain_at``)."""
    for j in positions:
        limits = chain_at[j]
        if limits is not None and 0 < plan_mask & limits[0] < limits[1]:
            return False
    return True


#: (size, candidate positions, their bit mask) of every subset the search scores, per
#: (candidates, largest size), in the order itertools.combinations() makes them, sizes
#: ascending (the mask is the pool's when the pool is the candidates alone). Tables of up to
#: 4,096 subsets are kept (C(16, 4) and below: every table of the 4-slot limit).
_SUBSETS: dict[tuple[int, int], tuple[tuple[int, tuple[int, ...], int], ...]] = {}


def _subsets(n: int, kmax: int) -> Iterable[tuple[int, tuple[int, ...], int]]:
    """The subsets of ``n`` candidates with 1 to ``kmax`` members (see :data:`_SUBSETS`)."""
    table = _SUBSETS.get((n, kmax))
    if table is not None:
        return table
    made = ((k, pos, sum([1 << j for j in pos])) for k in range(1, kmax + 1)
            for pos in combinations(range(n), k))
    if sum(comb(n, k) for k in range(1, kmax + 1)) > 4096:
        return made  # made as the search goes
    table = _SUBSETS[(n, kmax)] = tuple(made)
    return table


def _chain_ok(planned: Iterable[int], plan_mask: int,
              chain_limits: Mapping[int, tuple[int, int]]) -> bool:
    """Every planned marker but the first reads an earlier one (or an entry) within the
    lookback, so the markers' entries chain (``chain_limits``: see the search)."""
    for b in planned:
        limits = chain_limits.get(b)
        if limits is not None and 0 < plan_mask & limits[0] < limits[1]:
            return False
    return True


def _rank_ttl(rank: int) -> str:
    return _RANK_TTL[rank]

# ============================================================================ apply
def _split_path(path: str) -> list[str | int]:
    out: list[str | int] = []
    for part in path.replace("]", "").split("."):
        if "[" in part:
            head, *idx = part.split("[")
            if head:
                out.append(head)
            out.extend(int(i) for i in idx)
        else:
            out.append(part)
    return out


def _node_parent(payload: Any, path: str) -> tuple[Any, str | int]:
    keys = _split_path(path)
    node = payload
    for k in keys[:-1]:
        node = node[k]
    return node, keys[-1]


def _text_part_type(provider: str) -> str:
    return "input_text" if provider == "openai-responses" else "text"


def _marker(provider: str, ttl: str | None) -> tuple[str, dict[str, Any]]:
    if provider == "anthropic":
        cc: dict[str, Any] = {"type": "ephemeral"}
        if ttl is not None and ttl != "5m":
            cc["ttl"] = ttl
        return "cache_control", cc
    return "prompt_cache_breakpoint", {"mode": "explicit"}


class _CopyOnWrite:
    """Copies the containers on a path before an edit, each at most once (the rest of the
    payload stays shared with the caller's, which is never mutated)."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.fresh: set[int] = {id(root)}
        self.keep: list[Any] = [root]  # keeps the copies alive, so their ids stay unique

    def own(self, parent: Any, key: str | int) -> Any:
        """``parent[key]``, replaced by a shallow copy first unless it is one already."""
        child = parent[key]
        if id(child) in self.fresh or not isinstance(child, dict | list | tuple):
            return child
        child = dict(child) if isinstance(child, dict) else list(child)
        parent[key] = child
        self.fresh.add(id(child))
        self.keep.append(child)
        return child

    def parent(self, path: str) -> tuple[Any, str | int]:
        """The (copied) container holding ``path``'s node, and the node's key in it."""
        keys = _split_path(path)
        node: Any = self.root
        for k in keys[:-1]:
            node = self.own(node, k)
        return node, keys[-1]


def _set_marker(payload: dict[str, Any] | _CopyOnWrite, provider: str, path: str,
                ttl: str | None) -> None:
    key, value = _marker(provider, ttl)
    if isinstance(payload, _CopyOnWrite):
        parent, last = payload.parent(path)
        node = payload.own(parent, last)
    else:
        parent, last = _node_parent(payload, path)
        node = parent[last]
    if isinstance(node, str):
        node = {"type": _text_part_type(provider), "text": node}
        # "system" string / "messages[i].content" string -> a one-block list
        parent[last] = [node]
    if not isinstance(node, dict):
        raise InvalidRequestError(path, "cannot carry a cache marker")
    if provider == "openai-responses" and node.get("type") == "function_call_output":
        _mark_function_output(payload, node, path, key, value)
        return
    node[key] = value


def _markable_output_part(part: Any) -> bool:
    """Whether a ``function_call_output`` part can carry a ``prompt_cache_breakpoint``: a
    non-blank ``input_text``, an ``input_image`` or an ``input_file`` (hosted-api-rules.md
    2.3), as the renderer's ``cacheable`` reads it."""
    if not isinstance(part, Mapping):
        return False
    ptype = part.get("type")
    if ptype == "input_text":
        text = part.get("text")
        return isinstance(text, str) and not _blank(text)
    return ptype in ("input_image", "input_file")


def _mark_function_output(payload: dict[str, Any] | _CopyOnWrite, item: dict[str, Any],
                          path: str, key: str, value: dict[str, Any]) -> None:
    """Put the explicit breakpoint of the Responses ``function_call_output`` ``item`` (already
    the payload's own copy) on its output: a string output becomes one ``input_text`` part
    carrying it (the same content: openai-python ``FunctionCallOutput.output`` takes a string or
    a list of ``input_text`` / ``input_image`` / ``input_file`` parts, and a breakpoint sits on
    a part, hosted-api-rules.md 2.3); in a list, the last part that can carry one gets it,
    unless a part already has one (the caller's, kept as it is)."""
    out = item.get("output")
    if isinstance(out, str):
        item["output"] = [{"type": "input_text", "text": out, key: dict(value)}]
        return
    if not isinstance(out, list):
        raise InvalidRequestError(f"{path}.output", "cannot carry a cache marker")
    if any(isinstance(p, Mapping) and key in p for p in out):
        return
    for j in range(len(out) - 1, -1, -1):
        if _markable_output_part(out[j]):
            break
    else:
        raise InvalidRequestError(f"{path}.output", "no part can carry a cache marker")
    if isinstance(payload, _CopyOnWrite):
        out = payload.own(item, "output")
        part = payload.own(out, j)
    else:
        part = out[j]
    part[key] = dict(value)


def _clear_marker(payload: dict[str, Any] | _CopyOnWrite, provider: str, path: str) -> None:
    if isinstance(payload, _CopyOnWrite):
        parent, last = payload.parent(path)
        node = payload.own(parent, last)
    else:
        parent, last = _node_parent(payload, path)
        node = parent[last]
    if not isinstance(node, dict):
        return
    key = "cache_control" if provider == "anthropic" else "prompt_cache_breakpoint"
    node.pop(key, None)
    out = node.get("output")
    if provider == "openai-responses" and node.get("type") == "function_call_output" and \
            isinstance(out, list):  # its breakpoints sit on its output parts
        for j, part in enumerate(out):
            if isinstance(part, Mapping) and key in part:
                if isinstance(payload, _CopyOnWrite):
                    out = payload.own(node, "output")
                    part = payload.own(out, j)
                part.pop(key, None)


def apply_plan(payload: Mapping[str, Any], plan: BreakpointPlan, *,
               share_unchanged: bool = False) -> dict[str, Any]:
    """A copy of ``payload`` with ``plan``'s markers, marker repairs and OpenAI options.

    Planner markers are added (a string ``system`` / message ``content``, or a Responses
    ``function_call_output``'s string ``output``, becomes a one-block list to carry one; a list
    ``output`` carries it on its last part that can); the caller's markers are dropped, moved, re-timed or their empty block
    removed as ``plan.marker_edits`` says; for OpenAI, ``prompt_cache_key`` and
    ``prompt_cache_options`` are set when the plan has them and the payload does not, and the
    parameters in ``plan.dropped_params`` are removed. The input is never mutated.

    Args:
        payload: the request the plan was made for (same paths).
        plan: from :func:`plan_breakpoints` on ``render(payload)``.
        share_unchanged: copy only the containers on the edited paths and share the rest
            with ``payload`` (faster: the SDK wrapper sends the result at once). The default
            deep-copies the segment keys, so editing the result never reaches ``payload``.

    Returns:
        The new payload.

    Raises:
        InvalidRequestError: a plan path does not exist in ``payload``.
    """
    # Deep-copy only the parts that carry segments; other kwargs (timeouts, headers, SDK
    # sentinels) are passed through as they are.
    out: dict[str, Any]
    target: dict[str, Any] | _CopyOnWrite
    if share_unchanged:
        out = dict(payload)
        target = cow = _CopyOnWrite(out)
    else:
        try:
            out = {k: (copy.deepcopy(v) if k in _SEGMENT_KEYS else v)
                   for k, v in payload.items()}
        except RecursionError:
            raise InvalidRequestError("", "nested too deeply to copy") from None
        target = out
    prov = plan.provider
    removals: list[str] = []
    try:
        for e in plan.marker_edits:
            if e.action in ("drop", "move"):
                _clear_marker(target, prov, e.path)
            if e.action == "remove_block":
                removals.append(e.path)
        for b in plan.breakpoints:
            if b.source in ("planner", "user"):
                _set_marker(target, prov, b.path, b.ttl)
    except (KeyError, IndexError, TypeError) as exc:
        raise InvalidRequestError("", f"the plan does not fit this payload: {exc}") from None
    for path in sorted(removals, key=_split_path, reverse=True):
        parent, last = cow.parent(path) if share_unchanged else _node_parent(out, path)
        if isinstance(parent, list) and isinstance(last, int) and len(parent) > 1:
            del parent[last]
    if prov != "anthropic":
        for name in plan.dropped_params:  # parameters the model rejects (an API 400)
            out.pop(name, None)
        if plan.prompt_cache_key and "prompt_cache_key" not in out:
            out["prompt_cache_key"] = plan.prompt_cache_key
        if plan.prompt_cache_options and "prompt_cache_options" not in out:
            out["prompt_cache_options"] = dict(plan.prompt_cache_options)
    return out


def auto_cache(payload: Mapping[str, Any], model: str | None = None, *,
               policy: CachePolicy | None = None, previous: PreviousLike = None,
               provider: str | None = None, reuse: ReuseModel | None = None,
               ttl: str | None = None) -> dict[str, Any]:
    """Plan and apply cache markers on an arbitrary outgoing request (pure; returns a copy).

    Markers the caller placed are kept (repaired only where the API would reject them) and
    count against the limit; the planner fills the remaining slots. A parameter the model
    rejects (``prompt_cache_options`` before GPT-5.6) is removed
    (``BreakpointPlan.dropped_params``).

    Args:
        payload: keyword arguments of ``messages.create`` / ``chat.completions.create`` /
            ``responses.create``.
        model: the model id (default: ``payload["model"]``).
        policy: an explicit cache policy (default: ``get_policy(model)``).
        previous: what the previous request of the conversation wrote (see
            :func:`plan_breakpoints`).
        provider: request shape; detected when None.
        reuse / ttl: passed to :func:`plan_breakpoints`.

    Raises:
        InvalidRequestError: the payload is malformed.
        UnknownModelError: the catalog does not know ``model`` and no policy was given.
    """
    from promptcache.catalog import get_policy

    model_id = model or payload.get("model")
    if policy is None:
        if not isinstance(model_id, str):
            raise InvalidRequestError("model", "a model id is needed to look up the cache policy")
        policy = get_policy(model_id)
    # SDK kwargs may hold omitted sentinels (NOT_GIVEN / omit) and tuples for the iterables.
    clean: dict[str, Any] = {}
    for k, v in payload.items():
        if type(v).__name__ in ("NotGiven", "Omit"):
            continue
        if k in _SEGMENT_KEYS and isinstance(v, (tuple, Iterator)):
            v = list(v)
        clean[k] = v
    view = render(clean, provider, model=model_id if isinstance(model_id, str) else None)
    plan = plan_breakpoints(view, policy, previous, reuse=reuse, ttl=ttl)
    out = apply_plan(clean, plan)
    for k, v in payload.items():
        if k not in out and k not in plan.dropped_params:  # the sentinels go back unchanged
            out[k] = v
    return out


# ============================================================================ fan-out
@dataclass(frozen=True, slots=True)
class FanoutCost:
    """Input cost of ``requests`` parallel requests over one shared prefix (USD, Decimal).

    Attributes:
        naive_usd: all sent at once on a cold cache: each writes the shared prefix.
        warmed_usd: one sent first; the rest released once its response starts streaming
            (they read the prefix).
        saving_usd / saving_fraction: naive - warmed, and that over naive.
        arithmetic: the formula with the numbers, for reports.
    """

    naive_usd: Decimal
    warmed_usd: Decimal
    saving_usd: Decimal
    saving_fraction: Decimal
    arithmetic: str


def fanout_cost(requests: int, shared_prefix_tokens: int, unique_suffix_tokens: int, *,
                input_per_mtok: Decimal | float | str, cache_write_per_mtok: Decimal | float | str,
                cache_read_per_mtok: Decimal | float | str) -> FanoutCost:
    """Input cost of a cold fan-out, naive versus warm-then-fan-out (BR-21).

    An Anthropic cache entry becomes readable only once the first response begins
    (https://platform.claude.com/docs/en/build-with-claude/prompt-caching), so N requests sent
    together on a cold cache each pay the write. Sending one first and releasing the other N-1
    when its first token arrives turns N-1 writes into reads::

        naive  = N * (P * write + S * input) / 1e6
        warmed = (P * write + S * input) / 1e6 + (N-1) * (P * read + S * input) / 1e6

    Args:
        requests: N, >= 1.
        shared_prefix_tokens: P, tokens of the shared (cached) prefix.
        unique_suffix_tokens: S, uncached tokens per request.
        input_per_mtok / cache_write_per_mtok / cache_read_per_mtok: USD per million tokens.

    Raises:
        ValueError: a count is negative or ``requests`` < 1.
    """
    if requests < 1 or shared_prefix_tokens < 0 or unique_suffix_tokens < 0:
        raise ValueError("requests must be >= 1 and token counts >= 0")
    inp, wr, rd = (Decimal(str(x)) for x in (input_per_mtok, cache_write_per_mtok,
                                              cache_read_per_mtok))
    mtok = Decimal(1_000_000)
    n, p, s = Decimal(requests), Decimal(shared_prefix_tokens), Decimal(unique_suffix_tokens)
    first = (p * wr + s * inp) / mtok
    other = (p * rd + s * inp) / mtok
    naive = n * first
    warmed = first + (n - 1) * other
    saving = naive - warmed
    frac = saving / naive if naive else Decimal(0)
    arith = (f"naive: {requests}*({shared_prefix_tokens}*{wr} + {unique_suffix_tokens}*{inp})/1e6"
             f" = {naive.normalize()}; warmed: ({shared_prefix_tokens}*{wr} + "
             f"{unique_suffix_tokens}*{inp})/1e6 + {requests - 1}*({shared_prefix_tokens}*{rd} + "
             f"{unique_suffix_tokens}*{inp})/1e6 = {warmed.normalize()}")
    return FanoutCost(naive, warmed, saving, frac, arith)


def should_warm_first(policy: CachePolicy, concurrency: int, shared_prefix_tokens: int) -> bool:
    """Whether to send one request first and hold the rest until it starts streaming.

    True only where it pays: the provider caches at explicit markers (Anthropic; OpenAI GPT-5.6+
    explicit mode behaves alike), more than one request would be in flight, and the shared
    prefix reaches the model's minimum. Otherwise the wait is pure latency (BR-21).
    """
    if concurrency <= 1:
        return False
    if not bool(getattr(policy, "explicit_breakpoints", False)):
        return False
    return shared_prefix_tokens >= int(getattr(policy, "min_cacheable_tokens", 0) or 0)
