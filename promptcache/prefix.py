"""PrefixView: a request seen the way the provider caches it.

Every part of promptcache (linter, diff, planner, wrapper, local backend) looks at a request
through this one renderer, so they agree on where a prefix breaks. :func:`render` turns an
Anthropic Messages, OpenAI Chat Completions or OpenAI Responses request into the ordered
:class:`Segment` s the provider caches, in its render order:

::

    Anthropic          tools[0..] -> system (string or blocks) -> messages[i].content[j]
    OpenAI chat        tools[0..] -> response_format -> messages[i] (content parts, tool_calls)
    OpenAI responses   tools[0..] -> text.format -> instructions -> input[i] (content parts)

Sources: https://platform.claude.com/docs/en/build-with-claude/prompt-caching (render order
tools -> system -> messages; cache_control placement; automatic caching; lookback positions) and
https://developers.openai.com/api/docs/guides/prompt-caching (what OpenAI caches: messages,
images, tools, the structured-output schema, "added as a prefix to the system message": so the
schema (``response_format`` / ``text.format``) comes before the system messages and
``instructions``). See ../shared/reference/hosted-api-rules.md.

Invariants:

* ``segments[i].index == i`` and ``segments[i].start_token == sum(s.tokens for s in
  segments[:i])``.
* ``Segment.data`` holds the JSON bytes of the node exactly as the SDKs send it (anthropic 2.x
  and openai 3.x post through httpx2, whose ``encode_json`` is ``json.dumps(...,
  ensure_ascii=False, separators=(",", ":"))``), key order preserved, so a
  key-order change is visible as a byte change. For a string node (a string ``system`` or
  message ``content``, the bulk of a long chat) the bytes are made on first use: linting a
  request seldom needs them, and escaping its text cost about as much as counting its tokens.
* Lookback positions (Anthropic): a run of consecutive ``tool_use`` segments is one position,
  likewise a run of ``tool_result`` segments; every other segment is one position. Positions
  are counted over tools, system and messages alike.
* A top-level ``cache_control`` (Anthropic automatic caching) lands on the last segment that
  may carry a marker, walking back past those that may not; ``view.automatic`` records it.

Deviation from DESIGN.md: OpenAI has no documented tools/system/messages hierarchy; we put
tools in ``tools``, the schema, ``instructions`` and the leading system/developer messages in
``system``, and everything from the first other message on in ``messages``, so the diff can
name the part that changed in the same words for both providers.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import itertools
import json
import marshal
import re
import struct
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import click
import orjson

from promptcache._errors import InvalidRequestError
from promptcache._slots import slot_constructor
from promptcache.tokens import TokenCounter, get_counter

if TYPE_CHECKING:
    from promptcache.catalog._rules import ImageLimits

__all__ = [
    "NO_MARKER_KINDS",
    "Breakpoint",
    "PrefixView",
    "Provider",
    "Segment",
    "Tier",
    "detect_provider",
    "remark",
    "render",
    "render_cache_clear",
    "render_command",
]

Provider = Literal["anthropic", "openai-chat", "openai-responses"]
Tier = Literal["tools", "system", "messages"]
TIERS: tuple[Tier, ...] = ("tools", "system", "messages")

_ANTHROPIC_TTLS = ("5m", "1h")
#: Anthropic blocks that cannot carry cache_control (the SDK's param types have no field;
#: hosted-api-rules.md 1.2).
NO_MARKER_KINDS = frozenset({"thinking", "redacted_thinking"})
_ANTHROPIC_ONLY_BLOCKS = frozenset({
    "tool_use", "tool_result", "thinking", "redacted_thinking", "document", "search_result",
    "server_tool_use", "web_search_tool_result", "container_upload", "tool_reference",
})
_OPENAI_CHAT_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_OPENAI_RESPONSES_PARTS = frozenset({"input_text", "input_image", "input_file", "output_text"})
_TOOL_RUN_KINDS = frozenset({"tool_use", "tool_result"})
#: Per-message overhead of the OpenAI chat format (role and separators), in tokens; the
#: figure OpenAI's cookbook uses for gpt-4o-era models. An estimate.
_OPENAI_MESSAGE_OVERHEAD = 3


#: One encoder for every segment: ``json.dumps`` with keyword arguments builds a new encoder
#: per call, which costs more than the encoding of a short block.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


#: orjson's integer range; beyond it orjson raises where json writes the digits.
_ORJSON_INT_MIN, _ORJSON_INT_MAX = -(2**63), 2**64 - 1


def _orjson_safe(node: Any) -> bool:
    """Whether ``orjson.dumps(node)`` is byte-identical to :data:`_ENCODER`'s output.

    True for trees of exactly ``dict`` (str keys), ``list``, ``tuple``, ``str``, ``bool``,
    ``None`` and ``int`` within orjson's 64-bit range. Floats (orjson writes ``1e16`` where
    ``json`` writes ``1e+16``), subclasses, non-str keys and every other type take the json
    path, which also keeps json's errors for what it cannot encode (``datetime``, ``UUID``,
    ...), where orjson would encode them. Strings escape identically (checked code point by
    code point in tests/test_prefix.py); lone surrogates make orjson raise (caught).
    """
    return _scan_types(node)[1]


def _scan_types(node: Any) -> tuple[bool, bool]:
    """(exact, orjson_safe) of a tree, in one walk.

    ``exact``: every value is exactly a ``dict``, ``list``, ``tuple``, ``str``, ``int``,
    ``float``, ``bool`` or ``None`` (no subclass, no other type): only such a node's segment is
    memoised, because only for those is a :func:`_node_key` unambiguous (``marshal`` writes any
    object with the buffer protocol, a numpy scalar say, as plain bytes of its memory).
    ``orjson_safe``: see :func:`_orjson_safe`.
    """
    safe = True
    stack = [node]
    pop, push = stack.pop, stack.append
    while stack:  # iterative: a recursive walk costs a Python call per value
        n = pop()
        t = type(n)
        if t is dict:
            for k, v in n.items():
                if type(k) is not str:
                    if type(k) not in _EXACT_KEYS:
                        return False, False
                    safe = False
                if type(v) is not str:
                    push(v)
        elif t is list or t is tuple:
            for v in n:
                if type(v) is not str:
                    push(v)
        elif t is int:
            if not _ORJSON_INT_MIN <= n <= _ORJSON_INT_MAX:
                safe = False
        elif t is float:
            safe = False
        elif not (t is str or t is bool or n is None):
            return False, False
    return True, safe


#: Dict key types json accepts besides str (it writes them as strings).
_EXACT_KEYS = (int, float, bool, type(None))


#: orjson options that send every subclass, datetime and dataclass to ``default`` (which
#: refuses them): orjson then accepts only what json encodes the same way, floats aside.
_ORJSON_STRICT = (orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME
                  | orjson.OPT_PASSTHROUGH_DATACLASS)
#: Where orjson's float output can differ from json's, it contains one of these: a negative
#: exponent (orjson ``1e-6``, json ``1e-06``), ``0.0000`` (orjson prints [1e-5, 1e-4)
#: positionally, json with an exponent) or ``null`` (NaN and infinities). Positive exponents and
#: every other float print alike (tests/test_prefix.py checks floats of every exponent).
_FLOAT_MARKS = (b"null", b"0.0000", *(bytes([d]) + b"e-" for d in b"0123456789"))


def _reject(obj: Any) -> Any:
    raise TypeError(type(obj).__name__)


def _dumps_keyed(node: Any) -> tuple[bytes, bool]:
    """(JSON bytes, exact) of a node ``marshal`` accepted (exact core types, or buffers).

    orjson in strict mode refuses buffers, subclasses and big ints, so when it succeeds the
    tree holds only exact JSON types and its bytes equal json's unless a float prints
    differently, which leaves one of :data:`_FLOAT_MARKS` in the output; only then (or when
    orjson refuses) is the tree walked. Most blocks and tool definitions skip the walk.
    """
    try:
        out = orjson.dumps(node, default=_reject, option=_ORJSON_STRICT)
    except TypeError:  # a buffer, a subclass, a big int, a non-str key, a lone surrogate
        exact, safe = _scan_types(node)
        return _dumps(node, safe), exact
    if (b"null" in out or b"0.0000" in out
            or (b"e-" in out and any(m in out for m in _FLOAT_MARKS[2:]))):
        # maybe a float that json prints otherwise (or such text inside a string): walk
        exact, safe = _scan_types(node)
        return (out if safe else _dumps(node, False)), exact
    return out, True


def _dumps(node: Any, orjson_safe: bool | None = None) -> bytes:
    """The node's JSON bytes as the SDKs send them (see the module docstring).

    orjson (faster on long strings, the bulk of a prompt) where it is byte-identical, the
    standard library's encoder otherwise. ``orjson_safe``: :func:`_orjson_safe` of ``node``,
    when the caller already knows it.
    """
    if orjson_safe is None:
        orjson_safe = type(node) is str or _orjson_safe(node)
    if orjson_safe:
        try:
            return orjson.dumps(node)
        except TypeError:  # a lone surrogate: json passes it through
            pass
    return _ENCODER.encode(node).encode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """A cache breakpoint on a segment.

    Attributes:
        ttl: ``"5m"`` or ``"1h"`` (Anthropic); OpenAI explicit: the marker's own ``ttl``,
            else the request's ``prompt_cache_options.ttl``, else ``"30m"``.
        source: ``"block"`` (a ``cache_control`` on the block), ``"automatic"`` (the
            top-level ``cache_control``) or ``"openai-explicit"`` (``prompt_cache_breakpoint``).
    """

    ttl: str | None
    source: Literal["block", "automatic", "openai-explicit"] = "block"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Segment:
    """One cached unit of a request, in the provider's render order.

    Attributes:
        index: order in the view (0-based).
        path: where it sits in the payload (``"tools[2]"``, ``"system[0]"``, ``"system"``,
            ``"messages[3].content[1]"``, ``"messages[0].content"``,
            ``"messages[2].tool_calls[0]"``, ``"instructions"``, ``"input[3].content[0]"``).
        tier: ``"tools"``, ``"system"`` or ``"messages"``.
        kind: ``"tool"``, ``"text"``, ``"image"``, ``"document"``, ``"tool_use"``,
            ``"tool_result"``, ``"thinking"``, ``"redacted_thinking"``, ``"tool_call"``,
            ``"schema"``, or another block type as sent.
        role: the message role (None for tools and top-level system).
        message_index: index of the enclosing message / input item (None outside messages).
        data: the node's JSON bytes as the SDK sends them (key order preserved; for a string
            node made on first use, see :attr:`string_node`).
        text: the human-readable text of the node, if any.
        tokens: tokens of this segment (an estimate for Anthropic models).
        start_token: tokens of every segment before this one.
        position: the Anthropic lookback position.
        breakpoint: the breakpoint on this segment, if any.
        cacheable: whether the segment may carry a cache marker.
        fingerprint: sha256 hex over (tier, role, kind, data) (a property, computed on first
            use: a lint of one request seldom needs it).
    """

    index: int
    path: str
    tier: Tier
    kind: str
    role: str | None
    message_index: int | None
    #: the JSON bytes, or the node itself while it is a string not yet dumped (:attr:`data`)
    _data: bytes | str
    text: str | None
    tokens: int
    start_token: int
    position: int
    breakpoint: Breakpoint | None
    cacheable: bool
    _fingerprint: str | None = field(default=None, repr=False, compare=False)
    #: cache slot of :func:`promptcache.planner.prefix_digests` (content digest, markers
    #: stripped); filled on first use
    _content_digest: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def data(self) -> bytes:
        """The node's JSON bytes as the SDK sends them (a string node's made on first use)."""
        d = self._data
        if type(d) is str:
            d = _dumps(d)
            object.__setattr__(self, "_data", d)
        return d  # type: ignore[return-value]

    @property
    def string_node(self) -> bool:
        """Whether the node is a JSON string (a string ``system`` / ``content``), without
        making its bytes."""
        d = self._data
        return type(d) is str or d[:1] == b'"'

    def _key(self) -> tuple[Any, ...]:
        return (self.index, self.path, self.tier, self.kind, self.role, self.message_index,
                self.data, self.text, self.tokens, self.start_token, self.position,
                self.breakpoint, self.cacheable)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self is other or self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Segment(index={self.index!r}, path={self.path!r}, tier={self.tier!r}, "
                f"kind={self.kind!r}, role={self.role!r}, "
                f"message_index={self.message_index!r}, data={self.data!r}, "
                f"text={self.text!r}, tokens={self.tokens!r}, "
                f"start_token={self.start_token!r}, position={self.position!r}, "
                f"breakpoint={self.breakpoint!r}, cacheable={self.cacheable!r})")

    @property
    def fingerprint(self) -> str:
        """sha256 hex over (tier, role, kind, data); computed once, on first use."""
        fp = self._fingerprint
        if fp is None:
            fp = hashlib.sha256(b"\x00".join(
                (self.tier.encode(), (self.role or "").encode(), self.kind.encode(), self.data)
            )).hexdigest()
            object.__setattr__(self, "_fingerprint", fp)
        return fp

    @property
    def end_token(self) -> int:
        """Tokens up to and including this segment."""
        return self.start_token + self.tokens


#: ``Segment(...)`` without the frozen dataclass's ``__init__`` (one per block of every new
#: request): the 13 fields without a default, in order; the cached digests start empty.
_new_segment = slot_constructor(Segment)
_set_content_digest = Segment.__dict__["_content_digest"].__set__


#: A queued segment: its node, and everything else that determines it (hashable; part of the
#: memo key): (path, tier, kind, role, message_index, text, token_text, extra_tokens,
#: breakpoint, cacheable, count_data). A plain tuple: a frozen dataclass per block cost more
#: than rendering a short block.
_Draft = tuple[Any, tuple[Any, ...]]


@dataclass(frozen=True)
class PrefixView:
    """A request as its provider caches it: ordered segments plus the other parameters.

    Attributes:
        provider: ``"anthropic"``, ``"openai-chat"`` or ``"openai-responses"``.
        model: the request's model id (None when absent).
        segments: the segments in render order.
        params: top-level keys that are not segments (``tool_choice``, ``thinking``,
            ``output_config``, ``prompt_cache_key``, ``temperature``, ...).
        automatic: the Anthropic top-level breakpoint, if the request has one.
        automatic_index: the segment the automatic breakpoint resolved to (None if none).
        counter_exact: whether the token counts are exact (False for Anthropic estimates and
            for every OpenAI-format request, whose role framing is estimated:
            :func:`promptcache.tokens.view_count_error` bounds it in tokens).
    """

    provider: Provider
    model: str | None
    segments: tuple[Segment, ...]
    params: Mapping[str, Any]
    automatic: Breakpoint | None = None
    automatic_index: int | None = None
    counter_exact: bool = True
    _lengths: Mapping[str, int] = field(default_factory=dict, repr=False)
    _by_path: Mapping[str, int] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ queries
    @property
    def total_tokens(self) -> int:
        """Tokens of the whole prompt (sum over segments)."""
        return self.segments[-1].end_token if self.segments else 0

    def __len__(self) -> int:
        return len(self.segments)

    def __iter__(self) -> Iterator[Segment]:
        return iter(self.segments)

    def breakpoints(self) -> list[Segment]:
        """Segments that carry a breakpoint, explicit or automatic, in render order."""
        return list(self._breakpoints)

    @functools.cached_property
    def _breakpoints(self) -> tuple[Segment, ...]:
        # computed once per view (views are immutable; lint rules ask several times)
        out = [s for s in self.segments if s.breakpoint is not None]
        if self.automatic_index is not None:
            auto = self.segments[self.automatic_index]
            if auto.breakpoint is None:
                out.append(auto)
                out.sort(key=lambda s: s.index)
        return tuple(out)

    def breakpoint_of(self, segment: Segment | int) -> Breakpoint | None:
        """The breakpoint on a segment, counting the automatic one."""
        seg = self._seg(segment)
        if seg.breakpoint is not None:
            return seg.breakpoint
        if self.automatic_index == seg.index:
            return self.automatic
        return None

    def prefix_tokens(self, segment: Segment | int) -> int:
        """Tokens from the start of the prompt up to and including ``segment``."""
        return self._seg(segment).end_token

    def tier_of(self, path: str) -> Tier:
        """The tier of the segment at ``path`` (sub-paths accepted)."""
        return self.find(path).tier

    def segments_in(self, tier: Tier) -> list[Segment]:
        """The segments of one tier, in order."""
        return [s for s in self.segments if s.tier == tier]

    def find(self, path: str) -> Segment:
        """The segment at ``path``.

        Accepts sub-paths (``"system[0].text"`` -> ``system[0]``;
        ``"messages[2].tool_calls[0].function.arguments"`` -> ``messages[2].tool_calls[0]``)
        and negative indexes (``"system[-1]"``, ``"messages[-1].content[0]"``).

        Raises:
            KeyError: no segment at or above ``path``.
        """
        resolved = self._resolve(path)
        probe = resolved
        while True:
            idx = self._by_path.get(probe)
            if idx is not None:
                return self.segments[idx]
            cut = max(probe.rfind("."), probe.rfind("["))
            if cut <= 0:
                break
            probe = probe[:cut]
        # A path above segment level ("messages[2]"): its first segment.
        prefix = resolved
        for seg in self.segments:
            if seg.path.startswith(prefix) and seg.path[len(prefix):len(prefix) + 1] in (".", "["):
                return seg
        raise KeyError(path)

    def prefix_hashes(self) -> list[str]:
        """Chained sha256 hex per segment: ``h[i]`` identifies segments ``0..i`` (cheap compare)."""
        out: list[str] = []
        h = hashlib.sha256(f"{self.provider}\x00{self.model}".encode())
        for seg in self.segments:
            h = h.copy()
            h.update(bytes.fromhex(seg.fingerprint))
            out.append(h.hexdigest())
        return out

    # ------------------------------------------------------------------ helpers
    def _seg(self, segment: Segment | int) -> Segment:
        return self.segments[segment] if isinstance(segment, int) else segment

    def _resolve(self, path: str) -> str:
        if "-" not in path:
            return path
        out: list[str] = []
        pos = 0
        for m in re.finditer(r"\[(-?\d+)\]", path):
            out.append(path[pos:m.start()])
            container = "".join(out)
            idx = int(m.group(1))
            if idx < 0:
                idx += self._lengths.get(container, 0)
            out.append(f"[{idx}]")
            pos = m.end()
        out.append(path[pos:])
        return "".join(out)


# ---------------------------------------------------------------------- detection
def detect_provider(payload: Mapping[str, Any]) -> Provider:
    """Guess the request shape from the payload.

    Returns:
        ``"openai-responses"`` when it has ``input`` / ``instructions`` and no ``messages``;
        ``"anthropic"`` when it has a top-level ``system``, Anthropic-only block types,
        ``input_schema`` tools or a ``claude`` model; otherwise ``"openai-chat"``.
    """
    if "messages" not in payload and ("input" in payload or "instructions" in payload):
        return "openai-responses"
    if "system" in payload:
        return "anthropic"
    model = payload.get("model")
    if isinstance(model, str) and "claude" in model.lower():
        return "anthropic"
    tools = payload.get("tools")
    if isinstance(tools, list):
        for tool in tools:
            if isinstance(tool, Mapping):
                if "input_schema" in tool:
                    return "anthropic"
                if "function" in tool:
                    return "openai-chat"
    messages = payload.get("messages")
    if isinstance(messages, list):
        for msg in messages:
            if not isinstance(msg, Mapping):
                continue
            role = msg.get("role")
            if role in ("developer", "tool") or "tool_calls" in msg:
                return "openai-chat"
            content = msg.get("content")
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, Mapping):
                        btype = block.get("type")
                        if not isinstance(btype, str):
                            continue
                        if btype in _ANTHROPIC_ONLY_BLOCKS or "cache_control" in block:
                            return "anthropic"
                        if btype == "image" and "source" in block:
                            return "anthropic"
                        if btype in _OPENAI_CHAT_PARTS:
                            return "openai-chat"
    if "cache_control" in payload:
        return "anthropic"
    return "openai-chat"



#: The fields of a :class:`PrefixView`, in declaration order.
_VIEW_FIELDS = tuple(f.name for f in dataclasses.fields(PrefixView))


def _new_view(*values: Any) -> PrefixView:
    """``PrefixView(*values)`` (every field, positionally) without the frozen dataclass's
    ``__init__``, which sets each field through ``object.__setattr__``: two views are built per
    wrapped call (the request, and the request with its planned markers)."""
    view = object.__new__(PrefixView)
    view.__dict__.update(zip(_VIEW_FIELDS, values, strict=True))
    return view

# ---------------------------------------------------------------------- render
#: Prompt fields of the other request shapes, which a shape's renderer would not read.
_FOREIGN_KEYS: dict[str, tuple[str, ...]] = {
    "anthropic": ("input", "instructions"),
    "openai-chat": ("system", "input", "instructions"),
    "openai-responses": ("messages", "system"),
}
_SHAPE_NAMES = {"anthropic": "Anthropic Messages", "openai-chat": "OpenAI Chat Completions",
                "openai-responses": "OpenAI Responses"}
_FOREIGN_HINTS = {
    "system": "a top-level system prompt is Anthropic's (OpenAI takes a system or developer "
              "message)",
    "input": "input is the OpenAI Responses prompt",
    "instructions": "instructions is the OpenAI Responses system prompt",
    "messages": "messages is the prompt of Anthropic Messages and OpenAI Chat Completions "
                "(Responses takes input)",
}


def render(payload: Mapping[str, Any], provider: str | None = None, *,
           model: str | None = None) -> PrefixView:
    """Render a request into the segments its provider caches, in render order.

    Args:
        payload: the request as sent to the API: a plain dict, or the SDKs' param
            TypedDicts (Anthropic ``MessageCreateParams``, OpenAI
            ``CompletionCreateParams`` / ``ResponseCreateParams``).
        provider: ``"anthropic"``, ``"openai-chat"``, ``"openai-responses"`` (``"openai"``
            means chat); detected from the payload's shape when None.
        model: overrides ``payload["model"]`` for token counting.

    Returns:
        A :class:`PrefixView`. Segments are memoised by content (bounded: entries and bytes;
        :func:`render_cache_clear` empties the memo), so a conversation re-sent turn after turn
        encodes and counts only its new blocks, and views of one conversation share their
        unchanged :class:`Segment` objects (immutable).

    Raises:
        InvalidRequestError: the payload is malformed (the error names the path and the
            reason), or holds another shape's prompt field (``system`` in an OpenAI Chat
            Completions request, ``messages`` in a Responses one, ...), which would be left
            out. No other exception escapes for JSON-like input.
    """
    if not isinstance(payload, Mapping):
        raise InvalidRequestError("", f"a request must be a JSON object, not {type(payload).__name__}")
    if provider is None:
        prov: Provider = detect_provider(payload)
    elif provider in ("anthropic", "openai-chat", "openai-responses"):
        prov = provider  # type: ignore[assignment]
    elif provider in ("openai", "openai_chat", "chat"):
        prov = "openai-chat"
    elif provider in ("responses", "openai_responses"):
        prov = "openai-responses"
    else:
        raise InvalidRequestError("", f"unknown provider {provider!r}")
    if prov != "anthropic":
        _check_openai_cache_params(payload)
    for key in _FOREIGN_KEYS[prov]:
        if key in payload:  # another API's prompt field: rendering would drop it silently
            raise InvalidRequestError(key, f"is not a field of an {_SHAPE_NAMES[prov]} request "
                                           f"(its content would be left out); "
                                           f"{_FOREIGN_HINTS[key]}")
    raw_model = payload.get("model")
    if raw_model is not None and not isinstance(raw_model, str):
        raise InvalidRequestError("model", "must be a string")
    model_id = model or raw_model
    builder = _Renderer(prov, model_id)
    try:
        if prov == "anthropic":
            builder.anthropic(payload)
        elif prov == "openai-chat":
            builder.openai_chat(payload)
        else:
            builder.openai_responses(payload)
        return builder.finish(payload)
    except InvalidRequestError:
        raise
    except (ValueError, TypeError, OverflowError, RecursionError, UnicodeError) as exc:
        raise InvalidRequestError("", f"cannot serialise the request: {exc}") from None


def remark(view: PrefixView, payload: Mapping[str, Any], paths: Iterable[str]
           ) -> PrefixView | None:
    """The view of ``payload`` without rendering it again, when ``payload`` is ``view``'s
    Anthropic request with only the cache markers at ``paths`` changed (what
    ``promptcache.planner.apply_plan`` makes: markers added, dropped, moved or re-timed, a
    string ``system`` / message ``content`` turned into a one-text-block list to carry one).

    Only the segments at ``paths`` are rebuilt, from their new nodes (their JSON bytes, marker
    and path); every other segment is shared with ``view``. A marker is not counted as prompt
    tokens, so token counts, offsets and lookback positions carry over unchanged. The result
    equals ``render(payload)`` (tests/test_prefix.py checks it on generated requests and plans).

    Args:
        view: ``render`` of the request before the marker edits.
        payload: the edited request.
        paths: segment paths of ``view`` whose markers may have changed.

    Returns:
        The new view, or None when it cannot be derived this way (not an Anthropic request, a
        path that is not one segment of ``view``, or a rebuilt segment that differs in more than
        its marker): render ``payload`` instead.

    Raises:
        InvalidRequestError: a rebuilt node is malformed (as ``render`` would raise).
    """
    if view.provider != "anthropic":
        return None
    segments = list(view.segments)
    by_path = dict(view._by_path)
    lengths = dict(view._lengths)
    scratch = _Renderer("anthropic", view.model)
    for path in paths:
        index = view._by_path.get(path)
        if index is None:
            return None
        old = segments[index]
        if old.path != path:
            return None
        try:
            node: Any = payload
            for key in _path_keys(path):
                node = node[key]
        except (KeyError, IndexError, TypeError):
            return None
        if isinstance(node, str):  # still a string: its marker was moved away, or never placed
            if node != old.text or old.breakpoint is not None:
                return None
            continue
        new_path = path
        if type(node) is list:  # a string system / content became a one-block list
            if len(node) != 1 or type(old.text) is not str or old.kind != "text":
                return None
            node = node[0]
            new_path = f"{path}[0]"
            lengths[path] = 1
        scratch.drafts.clear()
        if old.tier == "tools":
            scratch._anthropic_tool(node, new_path)
        else:
            scratch._anthropic_block(node, new_path, old.tier, old.role, old.message_index)
        [(_, rest)] = scratch.drafts
        (_, tier, kind, role, message_index, text, _, _, breakpoint, cacheable, _) = rest
        if (tier, kind, role, message_index, text, cacheable) != (
                old.tier, old.kind, old.role, old.message_index, old.text, old.cacheable):
            return None
        seg = _new_segment(index, new_path, tier, kind, role, message_index, _dumps(node),
                           text, old.tokens, old.start_token, old.position, breakpoint,
                           cacheable)
        # the content digest ignores markers and treats a string as a one-text-block list
        _set_content_digest(seg, old._content_digest)
        segments[index] = seg
        if new_path != path:
            del by_path[path]
            by_path[new_path] = index
    return _new_view(view.provider, view.model, tuple(segments), view.params, view.automatic,
                     view.automatic_index, view.counter_exact, lengths, by_path)


_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


@functools.lru_cache(maxsize=4096)
def _path_keys(path: str) -> tuple[str | int, ...]:
    """``"messages[3].content[0]"`` -> ``("messages", 3, "content", 0)`` (memoised: the wrapper
    re-marks the same few paths, ``system`` and the newest turn's, on every call)."""
    return tuple(int(idx) if idx else name for name, idx in _PATH_PART.findall(path))


# ---------------------------------------------------------------- segment memo
#: :func:`_node_key`'s answer for a node it cannot key (a type outside marshal's core types).
_NO_KEY = object()
#: Segments rendered before, by everything that determines them (see ``_Renderer.finish``).
#: A conversation re-sends its whole history on every turn; with the memo, a request costs
#: JSON encoding and token counting only for the blocks that are new since the last one.
_SEGMENT_MEMO: dict[tuple[Any, ...], Segment] = {}
#: the size each memo entry was counted with (:func:`_memo_size`), subtracted at eviction
_MEMO_SIZES: dict[tuple[Any, ...], int] = {}
#: Bounds of the memo: entries, and bytes it holds (each segment's JSON plus the marshal key of
#: a non-string node; texts share the caller's strings). Beyond either, the oldest quarter of
#: the entries is dropped.
SEGMENT_MEMO_MAX = 16_384
SEGMENT_MEMO_MAX_BYTES = 64 * 1024 * 1024
_memo_bytes = 0
_memo_lock = threading.Lock()


def _node_key(node: Any) -> Any:
    """A hashable key equal for two nodes exactly when they are the same tree of the same exact
    types (so their JSON bytes are equal), or :data:`_NO_KEY`.

    A string keys as itself (CPython caches a str's hash, so a block re-sent as the same object
    costs a dict lookup). Any other node keys as its ``marshal`` serialisation (format version
    2), a C walk several times faster than a Python one:

    * it accepts only exact core types (a ``str`` or ``dict`` subclass, a ``UUID``, an ``Enum``
      raise ``ValueError``: no key, no memo), and it writes the type of every value, so
      ``True`` / ``1`` / ``1.0`` and ``0.0`` / ``-0.0``, equal in Python, key apart as they
      print apart in JSON;
    * dicts are written in iteration order, so a key-order change is a new key;
    * version 2 writes every object in full (versions 3+ write back-references, which depend
      on reference counts and object sharing: the same content could key differently).
    """
    if type(node) is str:
        return node
    try:
        return marshal.dumps(node, 2)
    except (ValueError, RecursionError):
        return _NO_KEY


def render_cache_clear() -> None:
    """Forget every memoised segment (benchmarks measuring cold renders call this)."""
    global _memo_bytes
    with _memo_lock:
        _SEGMENT_MEMO.clear()
        _MEMO_SIZES.clear()
        _memo_bytes = 0


def _memo_size(key: tuple[Any, ...], seg: Segment) -> int:
    """Bytes a memo entry may hold, counted once, when it is memoised: the segment's JSON, plus
    the key's marshal copy of a non-string node. A string node keys as the caller's own string
    (the segment's text), which the memo keeps alive, and its JSON is made on first use: it
    counts twice its length in characters (the string, and the JSON it may get; an estimate:
    non-ASCII text and escapes make the JSON longer)."""
    node_key = key[4]
    data = seg._data
    if type(data) is str:
        return 2 * len(data)
    return len(data) + (len(node_key) if type(node_key) is bytes else 0)


def _memo_put(entries: list[tuple[tuple[Any, ...], Segment]]) -> None:
    """Memoise one render's new segments (one lock for all of them)."""
    global _memo_bytes
    with _memo_lock:
        for key, seg in entries:
            size = _memo_size(key, seg)
            if size > SEGMENT_MEMO_MAX_BYTES // 16:
                continue  # one huge block would push everything else out
            if (len(_SEGMENT_MEMO) >= SEGMENT_MEMO_MAX
                    or _memo_bytes + size > SEGMENT_MEMO_MAX_BYTES):
                drop = max(1, len(_SEGMENT_MEMO) // 4)
                for old in list(itertools.islice(_SEGMENT_MEMO, drop)):
                    if _SEGMENT_MEMO.pop(old, None) is not None:
                        # the size it was counted with: its JSON may have been made since
                        _memo_bytes -= _MEMO_SIZES.pop(old, 0)
            if key not in _SEGMENT_MEMO:
                _SEGMENT_MEMO[key] = seg
                _MEMO_SIZES[key] = size
                _memo_bytes += size


_SEGMENT_KEYS = {
    "anthropic": frozenset({"model", "tools", "system", "messages", "cache_control"}),
    "openai-chat": frozenset({"model", "tools", "messages", "response_format"}),
    "openai-responses": frozenset({"model", "tools", "instructions", "input"}),
}


class _Renderer:
    def __init__(self, provider: Provider, model: str | None) -> None:
        self.provider = provider
        self.model = model
        self.counter: TokenCounter = get_counter(model)
        self.drafts: list[_Draft] = []
        self.lengths: dict[str, int] = {}
        self.automatic: Breakpoint | None = None

    # ---------------------------------------------------------------- common
    def add(self, path: str, tier: Tier, kind: str, node: Any, *, role: str | None = None,
            message_index: int | None = None, text: str | None = None,
            token_text: str | None = None, extra_tokens: int = 0,
            breakpoint: Breakpoint | None = None, cacheable: bool = True,
            count_data: bool = False) -> None:
        """Queue a segment; ``count_data`` counts the tokens of its JSON bytes (tool
        definitions, schemas, unknown blocks) instead of ``token_text`` / ``text``."""
        self.drafts.append((node, (path, tier, kind, role, message_index, text,
                                   token_text if token_text is not None else text,
                                   extra_tokens, breakpoint, cacheable, count_data)))

    def _list(self, payload: Mapping[str, Any], key: str, path: str) -> list[Any]:
        value = payload.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise InvalidRequestError(path, f"must be an array, not {_jtype(value)}")
        self.lengths[path] = len(value)
        return value

    def finish(self, payload: Mapping[str, Any]) -> PrefixView:
        segments: list[Segment] = []
        start = 0
        position = -1
        prev_kind: str | None = None
        by_path: dict[str, int] = {}
        counter = self.counter
        count = counter.count
        memo = _SEGMENT_MEMO
        fresh: list[tuple[tuple[Any, ...], Segment]] = []
        for i, (node, rest) in enumerate(self.drafts):
            kind = rest[2]
            if not (kind in _TOOL_RUN_KINDS and kind == prev_kind):
                position += 1
            prev_kind = kind
            # Everything a Segment is made of; the draft's text / token_text / extra_tokens
            # derive from its node, so the key pins them too.
            node_key = node if type(node) is str else _node_key(node)
            key = None if node_key is _NO_KEY else (counter, i, start, position, node_key, rest)
            seg = memo.get(key) if key is not None else None
            if seg is None:
                (path, tier, kind, role, message_index, text, token_text, extra_tokens,
                 breakpoint, cacheable, count_data) = rest
                data: bytes | str
                if type(node) is str:
                    exact = True
                    data = node  # dumped on first use (Segment.data)
                elif node_key is not _NO_KEY:
                    data, exact = _dumps_keyed(node)
                else:
                    exact, safe = _scan_types(node)
                    data = _dumps(node, safe)
                if count_data:
                    if isinstance(data, str):  # counted on its JSON: made now
                        data = _dumps(data)
                    counted = data if not _has_marker(node) else _dumps(_unmarked(node))
                    tokens = count(counted.decode("utf-8", "replace")) + extra_tokens
                elif token_text is not None:
                    tokens = count(token_text) + extra_tokens
                else:
                    tokens = extra_tokens
                seg = _new_segment(i, path, tier, kind, role, message_index, data, text, tokens,
                                   start, position, breakpoint, cacheable)
                if key is not None and exact:
                    fresh.append((key, seg))
            segments.append(seg)
            by_path.setdefault(seg.path, i)
            start += seg.tokens
        if fresh:
            _memo_put(fresh)
        automatic_index: int | None = None
        if self.automatic is not None:
            for seg in reversed(segments):
                if seg.cacheable:
                    automatic_index = seg.index
                    break
        params = {k: v for k, v in payload.items() if k not in _SEGMENT_KEYS[self.provider]}
        # An OpenAI-format request's counts are never exact, even with an exact tokenizer: the
        # API frames each message, the tools block and the reply header, and the renderer only
        # estimates that (_OPENAI_MESSAGE_OVERHEAD a message; bound: tokens.view_count_error).
        counter_exact = self.counter.exact and self.provider == "anthropic"
        return _new_view(self.provider, self.model, tuple(segments), params, self.automatic,
                         automatic_index, counter_exact, dict(self.lengths), by_path)

    # ---------------------------------------------------------------- anthropic
    def _cache_control(self, block: Mapping[str, Any], path: str) -> Breakpoint | None:
        cc = block.get("cache_control")
        if cc is None:
            return None
        if type(cc) is not dict and not isinstance(cc, Mapping):
            raise InvalidRequestError(f"{path}.cache_control", "must be an object")
        if cc.get("type") != "ephemeral":
            raise InvalidRequestError(f"{path}.cache_control.type",
                                      "must be 'ephemeral' (the only cache type)")
        ttl = cc.get("ttl", "5m")
        if ttl not in _ANTHROPIC_TTLS:
            raise InvalidRequestError(f"{path}.cache_control.ttl", "must be '5m' or '1h'")
        return Breakpoint(str(ttl), "block")

    def anthropic(self, payload: Mapping[str, Any]) -> None:
        for i, tool in enumerate(self._list(payload, "tools", "tools")):
            self._anthropic_tool(tool, f"tools[{i}]")
        system = payload.get("system")
        if isinstance(system, str):
            self.add("system", "system", "text", system, text=system,
                     cacheable=_has_text(system))
        elif isinstance(system, list):
            self.lengths["system"] = len(system)
            for i, block in enumerate(system):
                self._anthropic_block(block, f"system[{i}]", "system", None, None)
        elif system is not None:
            raise InvalidRequestError("system", "must be a string or an array of text blocks")
        append = self.drafts.append
        for m, msg in enumerate(self._list(payload, "messages", "messages")):
            mpath = f"messages[{m}]"
            if type(msg) is not dict and not isinstance(msg, Mapping):
                raise InvalidRequestError(mpath, "a message must be an object")
            role = msg.get("role")
            if type(role) is not str and not isinstance(role, str):
                raise InvalidRequestError(f"{mpath}.role", "must be a string")
            content = msg.get("content")
            if type(content) is str:  # the common case, queued inline (what add() queues)
                append((content, (f"{mpath}.content", "messages", "text", role, m, content,
                                  content, 0, None, _has_text(content), False)))
            elif isinstance(content, str):
                self.add(f"{mpath}.content", "messages", "text", content, role=role,
                         message_index=m, text=content, cacheable=_has_text(content))
            elif isinstance(content, list):
                self.lengths[f"{mpath}.content"] = len(content)
                for j, block in enumerate(content):
                    self._anthropic_block(block, f"{mpath}.content[{j}]", "messages", role, m)
            else:
                raise InvalidRequestError(f"{mpath}.content",
                                          "must be a string or an array of content blocks")
        auto = payload.get("cache_control")
        if auto is not None:
            bp = self._cache_control(payload, "")
            self.automatic = Breakpoint(bp.ttl if bp else "5m", "automatic")

    def _anthropic_tool(self, tool: Any, path: str) -> None:
        if type(tool) is not dict and not isinstance(tool, Mapping):
            raise InvalidRequestError(path, "a tool must be an object")
        name = tool.get("name")
        if not isinstance(name, str):
            raise InvalidRequestError(f"{path}.name", "must be a string")
        desc = tool.get("description")
        self.add(path, "tools", "tool", tool, text=desc if isinstance(desc, str) else name,
                 count_data=True, breakpoint=self._cache_control(tool, path))

    def _anthropic_block(self, block: Any, path: str, tier: Tier, role: str | None,
                         m: int | None) -> None:
        if type(block) is not dict and not isinstance(block, Mapping):
            raise InvalidRequestError(path, "a content block must be an object")
        btype = block.get("type")
        if not isinstance(btype, str):
            raise InvalidRequestError(f"{path}.type", "must be a string")
        bp = self._cache_control(block, path)
        text: str | None = None
        token_text: str | None = None
        extra = 0
        cacheable = btype not in NO_MARKER_KINDS
        if btype == "text":
            value = block.get("text")
            if not isinstance(value, str):
                raise InvalidRequestError(f"{path}.text", "must be a string")
            text = value
            cacheable = _has_text(value)
        elif btype in ("thinking", "redacted_thinking"):
            value = block.get("thinking", block.get("data", ""))
            text = value if isinstance(value, str) else None
        elif btype == "tool_use" or btype == "server_tool_use":
            name = block.get("name")
            text = f"{name}({_dumps(block.get('input', {})).decode('utf-8', 'replace')})"
        elif btype == "tool_result":
            content = block.get("content")
            if content is not None and type(content) is not str:
                if not isinstance(content, list):
                    raise InvalidRequestError(f"{path}.content",
                                              "must be a string or an array of content blocks")
                others: list[str] = []
                for j, item in enumerate(content):
                    if type(item) is not dict and not isinstance(item, Mapping):
                        raise InvalidRequestError(f"{path}.content[{j}]",
                                                  "a content block must be an object")
                    if (not isinstance(item.get("text"), str)
                            and item.get("type") not in ("image", "document")):
                        # a search_result, tool_reference, ...: counted on its JSON, as a
                        # top-level block of an unknown type is
                        others.append(_dumps(_unmarked(item)).decode("utf-8", "replace"))
                text = _flatten_text(content)
                if others:
                    token_text = "\n".join([text or "", *others])
            else:
                text = content
            extra = _media_tokens(content)
        elif btype == "image":
            extra = _image_tokens(block.get("source"))
            text = None
            token_text = ""
        elif btype == "document":
            source = block.get("source")
            if isinstance(source, Mapping) and source.get("type") == "text":
                data = source.get("data")
                text = data if isinstance(data, str) else None
                # title and context are content the model reads: counted with the text
                head = [v for v in (block.get("title"), block.get("context"))
                        if isinstance(v, str) and v]
                if head:
                    token_text = "\n".join([*head, text or ""])
            else:
                extra = _document_tokens(source)
                token_text = ""
        else:
            raw_text = block.get("text")
            text = raw_text if isinstance(raw_text, str) else _flatten_text(block.get("content"))
            token_text = _dumps(_unmarked(block)).decode("utf-8", "replace") if not text else None
        kind = btype if btype != "server_tool_use" else "tool_use"
        self.add(path, tier, kind, block, role=role, message_index=m, text=text,
                 token_text=token_text, extra_tokens=extra, breakpoint=bp, cacheable=cacheable)

    # ---------------------------------------------------------------- openai chat
    def openai_chat(self, payload: Mapping[str, Any]) -> None:
        for i, tool in enumerate(self._list(payload, "tools", "tools")):
            path = f"tools[{i}]"
            if type(tool) is not dict and not isinstance(tool, Mapping):
                raise InvalidRequestError(path, "a tool must be an object")
            fn = tool.get("function")
            desc = fn.get("description") if isinstance(fn, Mapping) else None
            self.add(path, "tools", "tool", tool, text=desc if isinstance(desc, str) else None,
                     count_data=True)
        rf = payload.get("response_format")
        if rf is not None:
            if type(rf) is not dict and not isinstance(rf, Mapping):
                raise InvalidRequestError("response_format", "must be an object")
            if rf.get("type") == "json_schema":
                self.add("response_format", "system", "schema", rf,
                         count_data=True)
        leading = True
        ttl = _openai_ttl(payload)
        for m, msg in enumerate(self._list(payload, "messages", "messages")):
            mpath = f"messages[{m}]"
            if type(msg) is not dict and not isinstance(msg, Mapping):
                raise InvalidRequestError(mpath, "a message must be an object")
            role = msg.get("role")
            if not isinstance(role, str):
                raise InvalidRequestError(f"{mpath}.role", "must be a string")
            if role not in ("system", "developer"):
                leading = False
            tier: Tier = "system" if leading else "messages"
            overhead = _OPENAI_MESSAGE_OVERHEAD + (1 if "name" in msg else 0)
            before = len(self.drafts)
            content = msg.get("content")
            kind_default = "tool_result" if role == "tool" else "text"
            if isinstance(content, str):
                self.add(f"{mpath}.content", tier, kind_default, content, role=role,
                         message_index=m, text=content, extra_tokens=overhead,
                         cacheable=_has_text(content))
            elif isinstance(content, list):
                self._openai_parts(content, f"{mpath}.content", tier, role, m, ttl,
                                   overhead if len(self.drafts) == before else 0, kind_default)
            elif content is not None:
                raise InvalidRequestError(f"{mpath}.content", "must be a string, an array or null")
            calls = msg.get("tool_calls")
            if calls is not None:
                if not isinstance(calls, list):
                    raise InvalidRequestError(f"{mpath}.tool_calls", "must be an array")
                self.lengths[f"{mpath}.tool_calls"] = len(calls)
                for k, call in enumerate(calls):
                    cpath = f"{mpath}.tool_calls[{k}]"
                    if type(call) is not dict and not isinstance(call, Mapping):
                        raise InvalidRequestError(cpath, "a tool call must be an object")
                    fn = call.get("function")
                    text = None
                    if isinstance(fn, Mapping):
                        args = fn.get("arguments")
                        text = f"{fn.get('name')}({args if isinstance(args, str) else _dumps(args).decode()})"
                    extra = overhead if len(self.drafts) == before else 0
                    self.add(cpath, tier, "tool_call", call, role=role, message_index=m,
                             text=text, extra_tokens=extra, cacheable=False)
            if len(self.drafts) == before:  # empty message: the role header still counts
                self.add(f"{mpath}.content", tier, kind_default, content, role=role,
                         message_index=m, text="", extra_tokens=overhead, cacheable=False)

    def _openai_parts(self, parts: list[Any], path: str, tier: Tier, role: str | None, m: int,
                      ttl: str | None, overhead: int, kind_text: str) -> None:
        """Content parts of an OpenAI chat message or Responses input item.

        Chat parts: ``text``, ``image_url``, ``input_audio``, ``file``; Responses parts:
        ``input_text``, ``output_text``, ``input_image``, ``input_file``. The message's
        ``overhead`` tokens go to its first segment.
        """
        self.lengths[path] = len(parts)
        for j, part in enumerate(parts):
            ppath = f"{path}[{j}]"
            if type(part) is not dict and not isinstance(part, Mapping):
                raise InvalidRequestError(ppath, "a content part must be an object")
            ptype = part.get("type")
            if not isinstance(ptype, str):
                raise InvalidRequestError(f"{ppath}.type", "must be a string")
            bp = _openai_breakpoint(part, ppath, ttl)
            extra = overhead if j == 0 else 0
            if ptype in ("text", "input_text", "output_text"):
                value = part.get("text")
                if not isinstance(value, str):
                    raise InvalidRequestError(f"{ppath}.text", "must be a string")
                self.add(ppath, tier, kind_text, part, role=role, message_index=m, text=value,
                         extra_tokens=extra, breakpoint=bp,
                         cacheable=_has_text(value) and ptype != "output_text")
            elif ptype in ("image_url", "input_image"):
                self.add(ppath, tier, "image", part, role=role, message_index=m, token_text="",
                         extra_tokens=extra + _openai_image_tokens(part), breakpoint=bp)
            else:
                self.add(ppath, tier, ptype, part, role=role, message_index=m,
                         count_data=True, extra_tokens=extra,
                         breakpoint=bp)

    def _function_output_parts(self, item: Mapping[str, Any], parts: list[Any], ipath: str,
                               tier: Tier, role: str | None, m: int, ttl: str | None) -> None:
        """A Responses ``function_call_output`` whose ``output`` is a list of parts
        (``input_text``, ``input_image``, ``input_file``; openai-python
        ``ResponseFunctionCallOutputItemListParam``): one segment for the whole item, as for a
        string output, at ``input[m]``.

        * Its breakpoint is the ``prompt_cache_breakpoint`` of its parts (the last one that
          has one; hosted-api-rules.md 2.3: a breakpoint sits on an ``input_text`` /
          ``input_image`` / ``input_file`` part). The entry it writes is modelled as ending at
          the item's end (the planner marks the last part that can carry one).
        * It may carry a marker (``cacheable``) when a part can: a non-blank ``input_text``, an
          ``input_image`` or an ``input_file``.
        * One ``input_text`` part and nothing else is the same content as a string output of
          that text (text and token count alike; the planner's digests and the local backend's
          template read them as equal): the planner turns a string output into that form to
          carry a breakpoint, and the caller's next request sends the string again.
        """
        bp: Breakpoint | None = None
        markable = False
        marked = False
        for j, part in enumerate(parts):
            if type(part) is not dict and not isinstance(part, Mapping):
                continue
            ptype = part.get("type")
            if "prompt_cache_breakpoint" in part:
                marked = True
                bp = _openai_breakpoint(part, f"{ipath}.output[{j}]", ttl) or bp
            if ptype == "input_text":
                value = part.get("text")
                markable = markable or (isinstance(value, str) and _has_text(value))
            elif ptype in ("input_image", "input_file"):
                markable = True
        text: str | None = None
        if len(parts) == 1 and isinstance(parts[0], Mapping):
            only = parts[0]
            if only.get("type") == "input_text" and isinstance(only.get("text"), str) and \
                    not (set(only) - {"type", "text", "prompt_cache_breakpoint"}):
                text = str(only["text"])
        if text is not None:
            self.add(ipath, tier, "tool_result", item, role=role, message_index=m, text=text,
                     token_text=text, breakpoint=bp, cacheable=markable)
        elif marked:  # counted without the markers (a marker is not prompt text)
            unmarked = {k: (v if k != "output" else [_unmarked(p) for p in parts])
                        for k, v in item.items()}
            self.add(ipath, tier, "tool_result", item, role=role, message_index=m,
                     token_text=_dumps(unmarked).decode("utf-8", "replace"), breakpoint=bp,
                     cacheable=markable)
        else:
            self.add(ipath, tier, "tool_result", item, role=role, message_index=m,
                     count_data=True, cacheable=markable)

    # ---------------------------------------------------------------- openai responses
    def openai_responses(self, payload: Mapping[str, Any]) -> None:
        for i, tool in enumerate(self._list(payload, "tools", "tools")):
            path = f"tools[{i}]"
            if type(tool) is not dict and not isinstance(tool, Mapping):
                raise InvalidRequestError(path, "a tool must be an object")
            desc = tool.get("description")
            self.add(path, "tools", "tool", tool, text=desc if isinstance(desc, str) else None,
                     count_data=True)
        instructions = payload.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise InvalidRequestError("instructions", "must be a string")
        # The structured-output schema is a prefix to the system message (hosted-api-rules.md
        # 2.1 [O4][O6]), as on Chat Completions: it comes before ``instructions``, so a
        # schema change misses the instructions too.
        text_cfg = payload.get("text")
        if isinstance(text_cfg, Mapping) and isinstance(text_cfg.get("format"), Mapping):
            fmt = text_cfg["format"]
            if fmt.get("type") == "json_schema":
                self.add("text.format", "system", "schema", fmt,
                         count_data=True)
        if isinstance(instructions, str):
            self.add("instructions", "system", "text", instructions, role="developer",
                     text=instructions, cacheable=_has_text(instructions))
        ttl = _openai_ttl(payload)
        items = payload.get("input")
        if isinstance(items, str):
            self.add("input", "messages", "text", items, role="user", message_index=0,
                     text=items, extra_tokens=_OPENAI_MESSAGE_OVERHEAD,
                     cacheable=_has_text(items))
            return
        if items is None:
            return
        if not isinstance(items, list):
            raise InvalidRequestError("input", "must be a string or an array of items")
        self.lengths["input"] = len(items)
        leading = True
        for m, item in enumerate(items):
            ipath = f"input[{m}]"
            if type(item) is not dict and not isinstance(item, Mapping):
                raise InvalidRequestError(ipath, "an input item must be an object")
            itype = item.get("type", "message")
            role = item.get("role")
            if role is not None and not isinstance(role, str):
                raise InvalidRequestError(f"{ipath}.role", "must be a string")
            if not (itype == "message" and role in ("system", "developer")):
                leading = False
            tier: Tier = "system" if leading else "messages"
            if itype != "message":
                kind = {"function_call": "tool_call", "function_call_output": "tool_result",
                        "reasoning": "thinking"}.get(str(itype), str(itype))
                out = item.get("output")
                if itype == "function_call_output" and isinstance(out, list):
                    self._function_output_parts(item, out, ipath, tier, role, m, ttl)
                    continue
                text = out if isinstance(out, str) else None
                if itype == "function_call_output" and text is not None:
                    # a string output can carry an explicit breakpoint once the planner writes
                    # it as one input_text part (hosted-api-rules.md 2.3; openai-python
                    # FunctionCallOutput.output: str | list of input_text / input_image /
                    # input_file parts)
                    self.add(ipath, tier, kind, item, role=role, message_index=m, text=text,
                             token_text=text, cacheable=_has_text(text))
                    continue
                self.add(ipath, tier, kind, item, role=role, message_index=m, text=text,
                         token_text=text, count_data=text is None, cacheable=False)
                continue
            content = item.get("content")
            if isinstance(content, str):
                self.add(f"{ipath}.content", tier, "text", content, role=role, message_index=m,
                         text=content, extra_tokens=_OPENAI_MESSAGE_OVERHEAD,
                         cacheable=_has_text(content))
            elif isinstance(content, list):
                self._openai_parts(content, f"{ipath}.content", tier, role, m, ttl,
                                   _OPENAI_MESSAGE_OVERHEAD, "text")
            else:
                raise InvalidRequestError(f"{ipath}.content", "must be a string or an array")


# ---------------------------------------------------------------------- small helpers
#: Keys of a cache marker on a block: request metadata, not prompt text, so a block's token
#: count is the same with and without one (a marker placed or moved shifts no token offsets).
_MARKER_KEYS = ("cache_control", "prompt_cache_breakpoint")


def _has_marker(node: Any) -> bool:
    return isinstance(node, Mapping) and any(k in node for k in _MARKER_KEYS)


def _unmarked(node: Any) -> Any:
    """``node`` without its cache marker keys (the same object when it has none)."""
    if not _has_marker(node):
        return node
    return {k: v for k, v in node.items() if k not in _MARKER_KEYS}


def _has_text(s: str) -> bool:
    """``bool(s.strip())`` without copying ``s`` (``str.strip`` strips exactly the characters
    ``str.isspace`` accepts)."""
    return bool(s) and not s.isspace()


def _jtype(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if value is None:
        return "null"
    return type(value).__name__


def _flatten_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text") for b in content
                 if isinstance(b, Mapping) and isinstance(b.get("text"), str)]
        return "\n".join(p for p in parts if isinstance(p, str)) if parts else None
    return None


def _media_tokens(content: Any) -> int:
    if not isinstance(content, list):
        return 0
    total = 0
    for b in content:
        if isinstance(b, Mapping):
            if b.get("type") == "image":
                total += _image_tokens(b.get("source"))
            elif b.get("type") == "document":
                total += _document_tokens(b.get("source"))
    return total


@functools.cache
def _anthropic_image_limits() -> ImageLimits:
    """The catalog's Anthropic image sizing rule (:class:`promptcache.catalog.ImageLimits`:
    1568 px long edge, ~1,600 tokens, width * height / 750; source
    https://platform.claude.com/docs/en/build-with-claude/vision). Loaded on first use."""
    from promptcache.catalog._rules import provider_rules

    limits = provider_rules("anthropic").image_limits
    if limits is None:  # the shipped catalog always has it; a malformed one is a CatalogError
        raise RuntimeError("catalog: no Anthropic image_limits")
    return limits


def _image_tokens(source: Any) -> int:
    """Anthropic image estimate: the image is scaled down (aspect ratio kept) until its long
    edge is at most ``max_long_edge_px`` and it costs at most ``max_tokens``; then tokens ~=
    width * height / ``pixels_per_token`` (the catalog's ``image_limits``). An image whose
    size cannot be read (a URL or file source, a non-PNG) counts ``max_tokens``, the most an
    image can cost."""
    limits = _anthropic_image_limits()
    cap = limits.max_tokens
    if not isinstance(source, Mapping) or source.get("type") != "base64":
        return cap
    data = source.get("data")
    if not isinstance(data, str):
        return cap
    try:
        head = base64.b64decode(data[:64] + "=" * (-len(data[:64]) % 4), validate=False)
    except (ValueError, TypeError):
        return cap
    dims = _png_size(head)
    if dims is None:
        return cap
    w, h = max(dims[0], 1), max(dims[1], 1)
    scale = min(1.0, limits.max_long_edge_px / max(w, h))
    tokens = (w * scale) * (h * scale) / limits.pixels_per_token
    return max(1, round(min(tokens, float(cap))))


def _png_size(head: bytes) -> tuple[int, int] | None:
    if len(head) >= 24 and head[:8] == b"\x89PNG\r\n\x1a\n":
        w, h = struct.unpack(">II", head[16:24])
        return int(w), int(h)
    return None


def _document_tokens(source: Any) -> int:
    if isinstance(source, Mapping):
        data = source.get("data")
        if isinstance(data, str):
            # base64 PDF: about 1,500-3,000 tokens a page; ~ 3 KB of base64 per token-page
            return max(1, len(data) // 40)
    return 1500


def _openai_image_tokens(part: Mapping[str, Any]) -> int:
    """OpenAI image estimate: 85 tokens at ``detail: low``, else 765 (a 1024x1024 image at high
    detail: 85 + 170 x 4 tiles). Source: https://developers.openai.com/api/docs/guides/images-vision
    """
    img = part.get("image_url")
    detail = img.get("detail") if isinstance(img, Mapping) else part.get("detail")
    return 85 if detail == "low" else 765


def _check_openai_cache_params(payload: Mapping[str, Any]) -> None:
    """The shape of OpenAI's caching fields, which the API checks (a 400 otherwise):
    ``prompt_cache_key`` a string; ``prompt_cache_options`` an object whose ``mode`` is
    ``"implicit"`` or ``"explicit"`` and whose ``ttl`` is a string (source:
    ../shared/reference/hosted-api-rules.md 2.1 and 2.3,
    https://developers.openai.com/api/docs/guides/prompt-caching). Whether the model takes
    ``prompt_cache_options`` at all, and which TTLs, is the catalog's (lint, the builder).

    Raises:
        InvalidRequestError: one of them is malformed (the error names the field).
    """
    key = payload.get("prompt_cache_key")
    if key is not None and not isinstance(key, str):
        raise InvalidRequestError("prompt_cache_key", f"must be a string, not {_jtype(key)}")
    opts = payload.get("prompt_cache_options")
    if opts is None:
        return
    if not isinstance(opts, Mapping):
        raise InvalidRequestError("prompt_cache_options", f"must be an object, not {_jtype(opts)}")
    mode = opts.get("mode")
    if mode is not None and mode not in ("implicit", "explicit"):
        raise InvalidRequestError("prompt_cache_options.mode",
                                  f"must be 'implicit' or 'explicit', not {mode!r}")
    ttl = opts.get("ttl")
    if ttl is not None and not isinstance(ttl, str):
        raise InvalidRequestError("prompt_cache_options.ttl", f"must be a string, not {_jtype(ttl)}")


def _openai_ttl(payload: Mapping[str, Any]) -> str | None:
    opts = payload.get("prompt_cache_options")
    if isinstance(opts, Mapping):
        ttl = opts.get("ttl")
        return ttl if isinstance(ttl, str) else "30m"
    return None


def _openai_breakpoint(part: Mapping[str, Any], path: str, ttl: str | None) -> Breakpoint | None:
    marker = part.get("prompt_cache_breakpoint")
    if marker is None:
        return None
    if type(marker) is not dict and not isinstance(marker, Mapping):
        raise InvalidRequestError(f"{path}.prompt_cache_breakpoint", "must be an object")
    # a breakpoint's own ttl overrides the request's prompt_cache_options.ttl (openai-python
    # 3.57.0, PromptCacheBreakpoint: "When `ttl` is omitted, the breakpoint inherits the
    # request's prompt_cache_options.ttl")
    own = marker.get("ttl")
    if own is not None and not isinstance(own, str):
        raise InvalidRequestError(f"{path}.prompt_cache_breakpoint.ttl",
                                  f"must be a string, not {_jtype(own)}")
    return Breakpoint(own or ttl or "30m", "openai-explicit")


# ---------------------------------------------------------------------- CLI
@click.command("render")
@click.argument("source", default="-")
@click.option("--provider", type=click.Choice(["anthropic", "openai-chat", "openai-responses"]),
              default=None, help="Request shape (default: detected).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def render_command(source: str, provider: str | None, fmt: str) -> None:
    """Show SOURCE (a request JSON; '-' is stdin) as the ordered segments its provider caches.

    SOURCE holds a request body as sent to the API, or an object with the body under
    "request" / "body" (plus optional "usage", "timestamp"...), as diff and lint read it.
    Exit status: 0 shown, 2 bad input (one line on stderr: ``promptcache: FILE: reason``).
    """
    from promptcache._cliutil import fail, read_request

    payload, _ = read_request(source)  # a bare body, or one under "request" / "body" / ...
    try:
        view = render(payload, provider)
    except ValueError as exc:  # InvalidRequestError is a ValueError too
        fail(f"{source}: {exc}")
    except RecursionError:  # parsed, yet too deep to walk
        fail(f"{source}: request nested too deeply")
    rows = [
        {"index": s.index, "path": s.path, "tier": s.tier, "kind": s.kind, "tokens": s.tokens,
         "start_token": s.start_token, "position": s.position,
         "breakpoint": (view.breakpoint_of(s).ttl if view.breakpoint_of(s) else None),  # type: ignore[union-attr]
         "fingerprint": s.fingerprint[:12]}
        for s in view.segments
    ]
    if fmt == "json":
        click.echo(json.dumps({"provider": view.provider, "model": view.model,
                               "total_tokens": view.total_tokens, "segments": rows}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{view.provider} {view.model or ''}: {view.total_tokens} tokens"
                        f"{'' if view.counter_exact else ' (estimate)'}")
    for col in ("#", "path", "tier", "kind", "tokens", "start", "pos", "bp", "fingerprint"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r["index"]), str(r["path"]), str(r["tier"]), str(r["kind"]),
                      str(r["tokens"]), str(r["start_token"]), str(r["position"]),
                      str(r["breakpoint"] or ""), str(r["fingerprint"]))
    Console().print(table)


def segments_bytes(segments: Sequence[Segment]) -> bytes:
    """Concatenated ``data`` of ``segments`` (what a prefix hash covers)."""
    return b"".join(s.data for s in segments)
