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
* Request settings that the hosted API renders at the start of the messages tier
  (``tool_choice``, ``thinking``, ``output_config``; Anthropic) are encoded once, before the
  first message, inside that message's span: changing them misses the messages tier but still
  hits tools and system (hosted-api-rules.md 1.7).
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
_MESSAGES_TIER_PARAMS = ("tool_choice", "thinking", "output_config")
_GENERATION_ROLE = "assistant"

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


def _canonical(segment: Segment) -> str:
    try:
        node = json.loads(segment.data)
    except (ValueError, UnicodeDecodeError):
        return segment.data.decode("utf-8", errors="replace")
    return json.dumps(_strip_markers(node), ensure_ascii=False, separators=(",", ":"))


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
    if kind in ("text", "thinking", "document") and segment.text is not None:
        return encode_text(segment.text)
    return encode_text(_canonical(segment))


def _turn_key(segment: Segment) -> tuple[str, int | None]:
    return (segment.tier, segment.message_index)


def _role(segment: Segment) -> str:
    if segment.tier == "tools":
        return "tools"
    return segment.role or segment.tier


def _messages_tier_settings(view: PrefixView) -> list[int]:
    """Tokens of the Anthropic request settings that only affect the messages tier
    (``tool_choice``, ``thinking``, ``output_config``): changing them invalidates the messages
    cache but keeps tools and system (hosted-api-rules.md 1.7)."""
    if view.provider != "anthropic":
        return []
    found = {k: view.params[k] for k in _MESSAGES_TIER_PARAMS if view.params.get(k) is not None}
    if not found:
        return []
    text = json.dumps(_strip_markers(found), ensure_ascii=False, separators=(",", ":"))
    return [*_marker(_SETTINGS), *encode_text(text)]


def apply_template(
    payload: Mapping[str, Any] | PrefixView,
    provider: Provider | None = None,
    *,
    model: str | None = None,
) -> TemplatedPrompt:
    """Render a request and encode it with the backend's chat template.

    Args:
        payload: an Anthropic Messages, OpenAI Chat Completions or Responses request body, or an
            already rendered :class:`PrefixView`.
        provider: the request shape (see :func:`promptcache.prefix.render`).
        model: model id, passed to the renderer.

    Returns:
        the :class:`TemplatedPrompt` (token ids, per-segment spans).

    Raises:
        InvalidRequestError: the payload is malformed (from the renderer).
    """
    view = payload if isinstance(payload, PrefixView) else render(payload, provider, model=model)
    segments = view.segments
    ids: list[int] = []
    spans: list[SegmentSpan] = []
    settings = _messages_tier_settings(view)
    for i, segment in enumerate(segments):
        start = len(ids)
        opens = i == 0 or _turn_key(segments[i - 1]) != _turn_key(segment)
        if opens and i:
            ids.extend(_marker(_TURN_END))  # closes the previous turn
        if settings and segment.tier == "messages":
            ids.extend(settings)  # once, before the first message
            settings = []
        ids.extend(_marker(_TURN_START.format(role=_role(segment)) if opens else _SEP))
        content_start = len(ids)
        ids.extend(_content_ids(segment))
        spans.append(SegmentSpan(segment, start, len(ids), content_start, len(ids)))
    generation_start = len(ids)
    if segments:
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
