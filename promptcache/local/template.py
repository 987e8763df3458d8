"""Chat template of the local reference backend: API request -> token ids with block boundaries.

The backend's model reads o200k_base token ids (identical to tiktoken's, obtained offline through
:func:`promptcache.tokens.encode`). A request is first rendered with
:func:`promptcache.prefix.render` (the one renderer every part of promptcache uses), then each
rendered :class:`~promptcache.prefix.Segment` is encoded **independently** and framed with fixed
marker strings::

    <|start|>{role}<|message|> seg 1 content  <|sep|> seg 2 content           (one turn)
    <|end|><|start|>{role}<|message|> ...                                 (the next turn)
    <|end|><|start|>assistant<|message|>                                  (generation header)

Every marker sits *before* the content it introduces, so a segment's span ends with its own
last content token: the prefix "up to and including this block" does not depend on what
follows it. A block cached with a breakpoint in one request (``[Q (cache_control), "Now: …"]``)
is therefore read by a later request that sends ``Q`` as a whole message, as the hosted API
caches block by block.

Invariants (tested in tests/test_local_template.py):

* **Append-stable**: appending a turn (or rendering a request whose segments extend another's)
  never changes the tokens of earlier segments, because no token ever spans two segments and
  each segment's tokens depend only on that segment and whether it opens/closes its turn.
* **Boundaries map back**: every token index belongs to exactly one :class:`SegmentSpan` (which
  names the API content block, e.g. ``"messages[3].content[1]"``) or to the trailing
  generation header.
* **At least one uncached token**: the prompt always ends with the generation header, which no
  breakpoint covers, so every prefix-cache boundary lies strictly inside the prompt.
* ``cache_control`` / ``prompt_cache_breakpoint`` markers do not change tokens (they are
  stripped before encoding), so adding a breakpoint never invalidates a prefix.
* A string content and a one-text-part list with the same text give the same ids, for every
  role and shape (OpenAI Chat system/developer/user/assistant/tool messages, Responses message
  items and a ``function_call_output`` whose ``output`` is ``[{"type": "input_text", ...}]``,
  Anthropic system and message content), as the planner's digests and the diff count them as
  the same cached content: the wrapper's ``auto_cache`` turns a string into a one-part list to
  carry a breakpoint and the next request sends the string again (new-user trial 19;
  tests/test_s11_backend_text_forms.py).
* Anthropic request settings are encoded once, at the start of the tier their change
  invalidates (the catalog's invalidation table, ``invalidation_rules("anthropic")``, from
  hosted-api-rules.md 1.7), inside the span of that tier's first segment:

  - whole prompt (before the first segment): ``output_config.format`` / ``output_format``
    ("invalidates the whole cache for that conversation thread");
  - system tier (before the first system segment, or the first message without a system):
    ``speed`` (fast mode), the citations toggle (a ``document`` / ``search_result`` block
    with ``citations.enabled``) and the web search toggle (a ``web_search_*`` server tool,
    whose definition is encoded here and not in the tools tier: its span there is empty):
    "both change the system prompt", tools stay cached;
  - messages tier (before the first message): ``tool_choice``, ``thinking``,
    ``output_config.effort`` and any other ``output_config`` key.

  Changing one misses its tier and every later one and still hits the earlier ones.
* A text ``document`` block's ``title`` and ``context`` are content the model reads: they are
  encoded before the document text (a change misses the messages tier).
* Thinking-block stripping (hosted-api-rules.md 1.7 notes; the catalog's per-model
  ``strips_prior_thinking``): on older Claude models a plain (non-``tool_result``) user turn
  makes the API drop the thinking blocks of the assistant turns before it, so they are not in
  the prompt: such a block gets an empty span (no tokens) and everything from it on misses
  the cache entries written while it was still there. Thinking blocks of the current tool loop
  (after the last plain user turn) are kept.
* Images are "hashed into the prefix": an image becomes an image marker plus
  :data:`IMAGE_TOKENS` ids derived from the SHA-256 of its source (base64 data or URL and
  ``detail``), so the same image gives the same ids and any change to it changes them.

Deviations from the hosted APIs (a local reference backend, not a copy of their tokenisers):
token counts are o200k_base counts for both providers (Anthropic's tokenizer is not public); an
image costs a fixed number of tokens instead of a size-dependent one; a trailing assistant
message (Anthropic "prefill") is closed like any other turn rather than continued.
"""

from __future__ import annotations

import codecs
import hashlib
import json
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from promptcache._errors import UnknownModelError
from promptcache.catalog import get_policy, invalidation_rules
from promptcache.prefix import PrefixView, Segment, render
from promptcache.tokens import encode

__all__ = [
    "ENCODING",
    "IMAGE_TOKENS",
    "Provider",
    "SegmentSpan",
    "TemplatedPrompt",
    "TokenDecoder",
    "apply_template",
    "decode_tokens",
    "encode_text",
]

Provider = Literal["anthropic", "openai-chat", "openai-responses"]

ENCODING = "o200k_base"
"""The tokenizer of the local model (tiktoken-identical ids, offline)."""

IMAGE_TOKENS = 16
"""Ids an image occupies in the prompt (besides its marker), derived from its SHA-256."""

_ORDINARY_VOCAB = 199_998
"""Image ids are drawn from ``[0, _ORDINARY_VOCAB)``: ordinary o200k_base ids only."""

_TURN_START = "<|start|>{role}<|message|>"
_SEP = "<|sep|>"
_TURN_END = "<|end|>"
_IMAGE = "<|image|>"
_SETTINGS = "<|settings|>"
_SYSTEM_SETTINGS = "<|system_settings|>"
_REQUEST_SETTINGS = "<|request_settings|>"
#: Settings placed at the messages tier when the catalog has no rule for them (what is left of
#: ``output_config`` once its ruled keys are placed, e.g. a task budget).
_MESSAGES_TIER_PARAMS = ("tool_choice", "thinking", "output_config")
#: Blocks whose ``citations: {"enabled": true}`` turns citations on; hosted-api-rules.md 1.7:
#: the "citations toggle" changes the system prompt (tools kept, system and messages miss).
_CITATION_KINDS = frozenset({"document", "search_result", "tool_result"})
#: Anthropic's web search server tool (``web_search_20250305``, ...); hosted-api-rules.md 1.7:
#: the "web search toggle" changes the system prompt, not the tools.
_WEB_SEARCH_PREFIX = "web_search_"
_GENERATION_ROLE = "assistant"
#: The settings hooks a segment of each tier may open (the earlier tiers' hooks come first:
#: a request without a system prompt opens the system hook at its first message).
_TIERS_FROM: dict[str, tuple[str, ...]] = {
    "tools": ("tools",),
    "system": ("tools", "system"),
    "messages": ("tools", "system", "messages"),
}

# keys that mark breakpoints and must not change tokens; never stripped below these keys
_MARKER_KEYS = ("cache_control", "prompt_cache_breakpoint")
_MEDIA_KINDS = frozenset({"image", "input_image", "image_url", "document", "input_file", "file"})
_OPAQUE_KEYS = frozenset({"input_schema", "input", "parameters", "schema", "arguments"})


@lru_cache(maxsize=256)
def _marker(text: str) -> tuple[int, ...]:
    return tuple(encode(text, ENCODING))


def encode_text(text: str) -> list[int]:
    """Encode ``text`` to o200k_base ids (ordinary encoding, no special tokens; offline)."""
    return encode(text, ENCODING)


@dataclass(frozen=True, slots=True)
class SegmentSpan:
    """Where one rendered segment lies in the token ids.

    Attributes:
        segment: the rendered API content block.
        start: index of its first token: the marker before its content (the previous turn's
            end marker and its own turn header if it opens a turn, else the separator).
        end: one past its last content token; the prefix "up to and including this block" is
            ``token_ids[:end]`` and does not depend on the blocks after it.
        content_start: index of the first token of the block's own content.
        content_end: one past the last content token (equal to ``end``).

    A segment that is not in the prompt (a thinking block a plain user turn strips, a web
    search tool encoded in the system tier) has an empty span: ``start == end``.
    """

    segment: Segment
    start: int
    end: int
    content_start: int
    content_end: int

    @property
    def tokens(self) -> int:
        """Tokens this span occupies, markers included."""
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class TemplatedPrompt:
    """A request as the local model reads it.

    Attributes:
        view: the rendered request (:func:`promptcache.prefix.render`).
        token_ids: the prompt, o200k_base ids (length ``total_tokens``).
        spans: one :class:`SegmentSpan` per segment, in render order, contiguous from 0.
        generation_start: index of the generation header (the last turn's end marker and the
            assistant header; == ``spans[-1].end``, or 0).
    """

    view: PrefixView
    token_ids: tuple[int, ...]
    spans: tuple[SegmentSpan, ...]
    generation_start: int

    @property
    def total_tokens(self) -> int:
        """Prompt length in tokens."""
        return len(self.token_ids)

    @property
    def boundaries(self) -> list[int]:
        """Token index after each span (``span.end``), in render order."""
        return [span.end for span in self.spans]

    def span_of(self, segment: Segment | int | str) -> SegmentSpan:
        """The span of a segment (object, render index or path such as ``"system[0]"``).

        Raises:
            KeyError: no such segment.
        """
        if isinstance(segment, str):
            segment = self.view.find(segment)
        index = segment if isinstance(segment, int) else segment.index
        for span in self.spans:
            if span.segment.index == index:
                return span
        raise KeyError(index)

    def segment_at(self, token_index: int) -> SegmentSpan | None:
        """The span holding ``token_index``; ``None`` for the generation header.

        Raises:
            IndexError: ``token_index`` outside ``[0, total_tokens)``.
        """
        if not 0 <= token_index < self.total_tokens:
            raise IndexError(token_index)
        if token_index >= self.generation_start:
            return None
        ends = [span.end for span in self.spans]
        return self.spans[bisect_right(ends, token_index)]


def _strip_markers(node: Any) -> Any:
    """Copy of a JSON node without cache markers (key order preserved); base64 payloads of
    nested media are replaced by their SHA-256 so they are hashed into the prefix, not spelled
    out token by token."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _MARKER_KEYS:
                continue
            if key == "data" and node.get("type") == "base64" and isinstance(value, str):
                out[key] = "sha256:" + hashlib.sha256(value.encode("utf-8")).hexdigest()
                continue
            out[key] = value if key in _OPAQUE_KEYS else _strip_markers(value)
        return out
    if isinstance(node, list):
        return [_strip_markers(item) for item in node]
    return node


#: Part types that are plain text: one such part (``{"type", "text"}`` and nothing else once
#: markers are stripped) is the same content as its text as a string.
_TEXT_PART_TYPES = frozenset({"text", "input_text"})


def _text_part(node: Any) -> str | None:
    """The text of a one-text part (``{"type": "text" | "input_text", "text": str}``, no other
    key once markers are stripped); None for anything else."""
    if (
        isinstance(node, dict)
        and len(node) == 2
        and node.get("type") in _TEXT_PART_TYPES
        and isinstance(node.get("text"), str)
    ):
        return str(node["text"])
    return None


def _string_form(node: Any) -> Any:
    """``node`` (markers stripped) with a one-text-part list written as the string it equals.

    The rest of promptcache (renderer, planner digests, diff) treats a string content and a
    one-text-block list with the same text as the same cached content; the wrapper's
    ``auto_cache`` relies on it (it turns a string content into a one-part list to carry a
    ``prompt_cache_breakpoint``, and the next request sends the string again). So here:

    * an OpenAI Chat ``tool`` message's content part ``{"type": "text", "text": T}`` (its
      segment is the part itself) renders as the string content ``T`` does;
    * a Responses ``function_call_output`` whose ``output`` is ``[{"type": "input_text",
      "text": T}]`` renders as ``output: T`` does.

    Text segments (every role's ``text`` parts, Anthropic text blocks) are encoded from their
    text already, whichever form they came in.
    """
    text = _text_part(node)
    if text is not None:
        return text
    if isinstance(node, dict) and node.get("type") == "function_call_output":
        output = node.get("output")
        if isinstance(output, list) and len(output) == 1 and isinstance(output[0], dict) \
                and output[0].get("type") == "input_text":
            text = _text_part(output[0])
            if text is not None:
                return {**node, "output": text}
    return node


def _canonical(segment: Segment) -> str:
    try:
        node = json.loads(segment.data)
    except (ValueError, UnicodeDecodeError):
        return segment.data.decode("utf-8", errors="replace")
    return json.dumps(_string_form(_strip_markers(node)), ensure_ascii=False,
                      separators=(",", ":"))


def _image_ids(segment: Segment) -> list[int]:
    digest = hashlib.sha256(_canonical(segment).encode("utf-8")).digest()
    ids: list[int] = []
    counter = 0
    while len(ids) < IMAGE_TOKENS:
        block = hashlib.sha256(digest + counter.to_bytes(4, "little")).digest()
        for i in range(0, len(block), 4):
            ids.append(int.from_bytes(block[i : i + 4], "little") % _ORDINARY_VOCAB)
        counter += 1
    return [*_marker(_IMAGE), *ids[:IMAGE_TOKENS]]


def _content_ids(segment: Segment) -> list[int]:
    """The content tokens of one segment, independent of every other segment."""
    kind = segment.kind
    if kind in _MEDIA_KINDS and not (kind == "document" and segment.text is not None):
        return _image_ids(segment)
    if kind == "document" and segment.text is not None:
        return [*_document_header(segment), *encode_text(segment.text)]
    if kind in ("text", "thinking") and segment.text is not None:
        return encode_text(segment.text)
    return encode_text(_canonical(segment))


def _turn_key(segment: Segment) -> tuple[str, int | None]:
    return (segment.tier, segment.message_index)


def _role(segment: Segment) -> str:
    if segment.tier == "tools":
        return "tools"
    return segment.role or segment.tier


def _document_header(segment: Segment) -> list[int]:
    """Tokens of a text document's ``title`` and ``context`` (content the model reads; empty
    when neither is set)."""
    try:
        node = json.loads(segment.data)
    except (ValueError, UnicodeDecodeError):
        return []
    if not isinstance(node, dict):
        return []
    fields = {k: node[k] for k in ("title", "context") if isinstance(node.get(k), str)}
    if not fields:
        return []
    return encode_text(json.dumps(fields, ensure_ascii=False, separators=(",", ":")))


def _pop_path(params: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    """Remove ``params[a][b]...`` (``"a.b"``) and return ``(found, value)``; containers on the
    path are copied, never changed in place (``params`` itself is the caller's copy)."""
    keys = dotted.split(".")
    node: Any = params
    parents: list[tuple[dict[str, Any], str]] = []
    for key in keys[:-1]:
        child = node.get(key) if isinstance(node, dict) else None
        if not isinstance(child, Mapping):
            return False, None
        child = dict(child)
        node[key] = child
        parents.append((node, key))
        node = child
    if not isinstance(node, dict) or keys[-1] not in node or node[keys[-1]] is None:
        return False, None
    value = node.pop(keys[-1])
    for parent, key in reversed(parents):  # drop containers left empty by the pop
        if parent[key]:
            break
        del parent[key]
    return True, value


def _citations_enabled(view: PrefixView) -> bool:
    """True when a block of the request turns citations on (``citations.enabled``)."""
    for segment in view.segments:
        if segment.kind not in _CITATION_KINDS or b'"citations"' not in segment.data:
            continue
        try:
            node = json.loads(segment.data)
        except (ValueError, UnicodeDecodeError):
            continue
        blocks = [node]
        if isinstance(node, dict) and isinstance(node.get("content"), list):
            blocks.extend(node["content"])
        for block in blocks:
            cit = block.get("citations") if isinstance(block, dict) else None
            if isinstance(cit, dict) and cit.get("enabled") is True:
                return True
    return False


def _web_search_tools(view: PrefixView) -> dict[int, Any]:
    """Anthropic web search server tools: segment index -> the definition (markers kept in
    the node, stripped when encoded)."""
    if view.provider != "anthropic":
        return {}
    out: dict[int, Any] = {}
    for segment in view.segments_in("tools"):
        if _WEB_SEARCH_PREFIX.encode() not in segment.data:
            continue
        try:
            node = json.loads(segment.data)
        except (ValueError, UnicodeDecodeError):
            continue
        kind = node.get("type") if isinstance(node, dict) else None
        if isinstance(kind, str) and kind.startswith(_WEB_SEARCH_PREFIX):
            out[segment.index] = node
    return out


def _settings_tokens(marker: str, found: Mapping[str, Any]) -> list[int]:
    if not found:
        return []
    text = json.dumps(_strip_markers(dict(found)), ensure_ascii=False, separators=(",", ":"))
    return [*_marker(marker), *encode_text(text)]


def _request_settings(view: PrefixView) -> dict[str, list[int]]:
    """Tokens of the Anthropic request settings, by the tier whose start they are encoded at
    (``"tools"``: before everything; ``"system"``; ``"messages"``). Placement follows the
    catalog's invalidation table (hosted-api-rules.md 1.7): a setting is encoded at the start
    of the first tier its change invalidates, so the earlier tiers stay cached."""
    if view.provider != "anthropic":
        return {}
    params: dict[str, Any] = dict(view.params)
    found: dict[str, dict[str, Any]] = {"tools": {}, "system": {}, "messages": {}}
    for rule in invalidation_rules("anthropic"):
        for key in rule.keys:
            present, value = _pop_path(params, key)
            if present and key not in found[rule.invalidates]:
                found[rule.invalidates][key] = value
    for key in _MESSAGES_TIER_PARAMS:  # unruled leftovers (e.g. the rest of output_config)
        if params.get(key) is not None and params[key] != {}:
            found["messages"].setdefault(key, params[key])
    if _citations_enabled(view):
        found["system"]["citations"] = True
    web_search = list(_web_search_tools(view).values())
    if web_search:
        found["system"]["web_search"] = web_search
    return {
        "tools": _settings_tokens(_REQUEST_SETTINGS, found["tools"]),
        "system": _settings_tokens(_SYSTEM_SETTINGS, found["system"]),
        "messages": _settings_tokens(_SETTINGS, found["messages"]),
    }


_THINKING_KINDS = frozenset({"thinking", "redacted_thinking"})


def _strips_prior_thinking(view: PrefixView, strip: bool | None) -> bool:
    if strip is not None:
        return strip
    if view.provider != "anthropic" or view.model is None:
        return False
    try:
        return bool(get_policy(view.model).strips_prior_thinking)
    except UnknownModelError:
        return False


def _stripped_thinking(view: PrefixView) -> frozenset[int]:
    """Indexes of the thinking segments a plain user turn strips: those in messages before the
    last user message that holds no ``tool_result`` block."""
    messages = [seg for seg in view.segments if seg.tier == "messages"]
    tool_turns = {seg.message_index for seg in messages if seg.kind == "tool_result"}
    plain = [
        seg.message_index
        for seg in messages
        if seg.role == "user" and seg.message_index is not None
        and seg.message_index not in tool_turns
    ]
    if not plain:
        return frozenset()
    last_plain = max(i for i in plain if i is not None)
    return frozenset(
        seg.index
        for seg in messages
        if seg.kind in _THINKING_KINDS
        and seg.message_index is not None
        and seg.message_index < last_plain
    )


def apply_template(
    payload: Mapping[str, Any] | PrefixView,
    provider: Provider | None = None,
    *,
    model: str | None = None,
    strip_prior_thinking: bool | None = None,
) -> TemplatedPrompt:
    """Render a request and encode it with the backend's chat template.

    Args:
        payload: an Anthropic Messages, OpenAI Chat Completions or Responses request body, or an
            already rendered :class:`PrefixView`.
        provider: the request shape (see :func:`promptcache.prefix.render`).
        model: model id, passed to the renderer.
        strip_prior_thinking: drop the thinking blocks a plain user turn strips (see the
            module docstring); None (default): the catalog's ``strips_prior_thinking`` of the
            view's model (False for an unknown model and for OpenAI).

    Returns:
        the :class:`TemplatedPrompt` (token ids, per-segment spans).

    Raises:
        InvalidRequestError: the payload is malformed (from the renderer).
    """
    view = payload if isinstance(payload, PrefixView) else render(payload, provider, model=model)
    segments = view.segments
    ids: list[int] = []
    spans: list[SegmentSpan] = []
    settings = _request_settings(view)
    stripped = (
        _stripped_thinking(view) if _strips_prior_thinking(view, strip_prior_thinking)
        else frozenset()
    ) | frozenset(_web_search_tools(view))  # web search: encoded in the system tier instead
    previous: Segment | None = None  # the last segment encoded
    for segment in segments:
        start = len(ids)
        if segment.index in stripped:  # not in the prompt here: an empty span
            spans.append(SegmentSpan(segment, start, start, start, start))
            continue
        opens = previous is None or _turn_key(previous) != _turn_key(segment)
        if opens and previous is not None:
            ids.extend(_marker(_TURN_END))  # closes the previous turn
        previous = segment
        for tier in _TIERS_FROM[segment.tier]:  # each once, at the start of its tier
            ids.extend(settings.pop(tier, ()))
        ids.extend(_marker(_TURN_START.format(role=_role(segment)) if opens else _SEP))
        content_start = len(ids)
        ids.extend(_content_ids(segment))
        spans.append(SegmentSpan(segment, start, len(ids), content_start, len(ids)))
    generation_start = len(ids)
    if previous is not None:
        ids.extend(_marker(_TURN_END))
    ids.extend(_marker(_TURN_START.format(role=_GENERATION_ROLE)))
    return TemplatedPrompt(view, tuple(ids), tuple(spans), generation_start)


@lru_cache(maxsize=1)
def _tokenizer() -> Any:
    import toktok._toktok as toktok  # bundled o200k_base, no download

    return toktok.Tokenizer(ENCODING)


def _token_bytes(ids: Iterable[int]) -> bytes:
    tok = _tokenizer()
    n_vocab: int = tok.n_vocab
    specials = {199_999, 200_018}
    return bytes(tok.decode_bytes([i for i in ids if 0 <= i < n_vocab and i not in specials]))


def decode_tokens(ids: Sequence[int]) -> str:
    """Decode generated ids to text (ids outside the o200k_base vocabulary and special tokens
    are dropped; invalid UTF-8 becomes U+FFFD)."""
    return _token_bytes(ids).decode("utf-8", errors="replace")


class TokenDecoder:
    """Incremental decoder for streaming: feed ids one by one, get the text they complete.

    Multi-byte characters split over several tokens come out once complete, so the
    concatenation of :meth:`feed` results plus :meth:`flush` equals :func:`decode_tokens`.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token_id: int) -> str:
        """Text completed by ``token_id`` (possibly empty)."""
        return str(self._decoder.decode(_token_bytes([token_id])))

    def flush(self) -> str:
        """Text still buffered at the end of generation."""
        return str(self._decoder.decode(b"", final=True))
