"""PromptBuilder: requests that cannot break their own cached prefix.

A :class:`PromptBuilder` collects a request in sections ordered by stability, renders it for
Anthropic Messages, OpenAI Chat Completions or OpenAI Responses, and places the cache markers
with :func:`promptcache.planner.plan_breakpoints`::

    tools -> system -> context -> system(dynamic=True) -> history -> turn -> tail
    (most stable)                                                     (least stable)

* **tools**: tool definitions (sorted by name by default).
* **system**: stable instructions.
* **context**: static documents (rendered as system text blocks after the instructions) and
  few-shot examples (rendered as the first messages).
* **dynamic system** (``system(text, dynamic=True)`` or ``system(text, dynamic_from=...)``):
  per-session text that must stay in the system prompt; rendered as the last system blocks,
  never marked, so the marker stays on the stable part (BR-08).
* **history**: earlier turns, tool_use / tool_result runs included.
* **turn**: the new user turn (it becomes history on the next request, so it may be cached).
* **tail**: an explicit uncached tail after the new turn (never marked, never cached).

Adding a more stable section after a less stable one raises
:class:`~promptcache._errors.OrderingError` naming both. Values declared volatile (a
:class:`Volatile` wrapper, or :meth:`PromptBuilder.volatile` which also watches for the value's
text) may only land in the turn or the tail; anywhere earlier raises
:class:`~promptcache._errors.VolatileValueError`.

Canonicalisation (on by default, each switch separate): tools sorted by name
(``sort_tools``), JSON schemas / tool inputs / other JSON values with sorted keys
(``sort_json_keys``), trailing whitespace stripped per line and at the end of every text
(``normalize_whitespace``), and sets refused with :class:`TypeError` where their iteration
order would leak into the prompt (``refuse_sets``; when off, sets are sorted). Equal inputs give
byte-identical payloads. Blank text parts are always dropped: the Anthropic API rejects
whitespace-only text blocks (BR-10). A history or example message left with no content is
refused by :meth:`PromptBuilder.to_anthropic` (Anthropic rejects empty content) and sent with
an empty text (``"content": ""``) by the OpenAI outputs, which document no such rule.

Example (an agent loop; each request reads what the previous one wrote)::

    plan = None
    for step in steps:
        b = PromptBuilder("claude-sonnet-4-6", previous=plan, stable_ttl="1h")
        b.tools(TOOLS).system(INSTRUCTIONS).document(README, title="README.md")
        b.history(*conversation)                      # earlier turns, tool runs included
        b.turn(step.question).tail(f"Now: {b.volatile(now())}")
        response = client.messages.create(**b.to_anthropic(max_tokens=1024))
        plan = b.last_plan                            # feeds the lagging breakpoints
    rich.print(b.explain())                           # segments, positions, markers, why

Deviations from DESIGN.md: the planner is :mod:`promptcache.planner` (the SDK wrapper uses it on
raw payloads); dynamic system text is a section of its own between context and history, because
BR-08 needs it inside ``system`` but after the marker.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from promptcache._errors import InvalidRequestError, OrderingError, PlanError, VolatileValueError
from promptcache.planner import (
    Boundaries,
    BreakpointPlan,
    PreviousLike,
    ReuseModel,
    WrittenEntry,
    apply_plan,
    plan_breakpoints,
)
from promptcache.prefix import PrefixView, render
from promptcache.tokens import view_count_error, view_unbounded

if TYPE_CHECKING:
    from rich.table import Table

    from promptcache.catalog import CachePolicy, ProviderRules

__all__ = [
    "ExplainRow",
    "Explanation",
    "Image",
    "Message",
    "PromptBuilder",
    "Thinking",
    "ToolCall",
    "ToolResult",
    "Volatile",
    "assistant",
    "user",
]

Section = Literal["tools", "system", "context", "dynamic system", "history", "turn", "tail"]
_ORDER: tuple[Section, ...] = ("tools", "system", "context", "dynamic system", "history", "turn",
                               "tail")
_RANK = {s: i for i, s in enumerate(_ORDER)}
_CACHED_VOLATILE_OK = frozenset({"turn", "tail"})
OutputFormat = Literal["anthropic", "openai-chat", "openai-responses"]
_OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("anthropic", "openai-chat", "openai-responses")

# Article + display name, for messages ("an Anthropic model", "an OpenAI Chat Completions request").
_PROVIDER_NAMES: dict[str, str] = {"anthropic": "an Anthropic", "openai": "an OpenAI"}
_FORMAT_NAMES: dict[str, str] = {"anthropic": "an Anthropic Messages",
                                 "openai-chat": "an OpenAI Chat Completions",
                                 "openai-responses": "an OpenAI Responses"}
_SYSTEM_ROLES = ("system", "developer")
# The builder's own sanity floor for an output-token limit, not a provider fact: a limit of 0
# asks for no output, which is meaningless unless the provider documents it as a pre-warm
# (catalog: ProviderRules.prewarm_max_tokens). Provider minima come from the catalog.
_MIN_OUTPUT_LIMIT = 1
# Responses parameters that give the model something to answer without any input item
# (``instructions`` is one too, but it is a prompt section: refused below, use system()).
_RESPONSES_INPUT_SOURCES = ("prompt", "previous_response_id", "conversation")
# Request parameters that are prompt sections, whichever format and whether or not this builder
# filled them: passed through ``**params`` they would bypass canonicalisation (tool sorting),
# the volatile checks and the planner. Value: the builder method that adds the section.
_SECTION_PARAMS: dict[str, str] = {
    "system": ".system() (or .document(), .system(dynamic=True))",
    "instructions": ".system() (sent as the leading system/developer input item)",
    "tools": ".tools() or .tool()",
    "functions": ".tools() or .tool()",  # Chat Completions' legacy name for tools
    "messages": ".turn(), .history() or .example()",
    "input": ".turn(), .history() or .example()",
}
# Other parameters the builder (or its plan) sets itself.
_BUILDER_PARAMS = ("model", "cache_control")
# prompt_cache_options.mode values (GPT-5.6+; openai-python's prompt_cache_options type).
_CACHE_OPTION_MODES = ("implicit", "explicit")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Closing tags inside a titled document's text would end the <document> wrapper early.
_DOC_CLOSE = re.compile(r"</(document)(?=[\s>]|\Z)", re.IGNORECASE)


# ============================================================================ values
class Volatile:
    """A value that changes between requests (a date, a user name, a request id).

    It may appear only in the new turn or the uncached tail; ``str()`` / f-strings give the
    value's text. Passing one to an earlier section raises :class:`VolatileValueError`.

    Attributes:
        value: the wrapped value.
        name: a label for error messages (default: the value's repr).
        formatted: how many times ``str()`` / ``format()`` / an f-string gave its text (the
            builder looks for the text in a later cached section only once it has been
            formatted: before that, a cached text cannot hold it).
    """

    __slots__ = ("formatted", "name", "value")

    def __init__(self, value: Any, name: str | None = None) -> None:
        self.value = value
        self.name = name or repr(value)
        self.formatted = 0

    def __str__(self) -> str:
        self.formatted += 1
        return str(self.value)

    def __format__(self, spec: str) -> str:
        self.formatted += 1
        return format(self.value, spec)

    def __repr__(self) -> str:
        return f"Volatile({self.value!r}, name={self.name!r})"


@dataclass(frozen=True, slots=True)
class Image:
    """An image part: base64 ``data`` (bytes are encoded for you) or a ``url``."""

    data: bytes | str | None = None
    media_type: str = "image/png"
    url: str | None = None

    def __post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            raise ValueError("Image needs exactly one of data= or url=")

    @property
    def b64(self) -> str:
        if isinstance(self.data, bytes):
            return base64.b64encode(self.data).decode("ascii")
        return str(self.data)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the assistant made (Anthropic ``tool_use``, OpenAI ``tool_calls``)."""

    id: str
    name: str
    input: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The result of a tool call (Anthropic ``tool_result``, OpenAI ``tool`` message)."""

    tool_use_id: str
    content: str | Sequence[Any] = ""
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Thinking:
    """An Anthropic thinking block from an earlier assistant turn (dropped for OpenAI)."""

    thinking: str
    signature: str = ""


Part = str | Volatile | Image | ToolCall | ToolResult | Thinking | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation message: ``role`` (``"user"`` / ``"assistant"``) and its parts."""

    role: Literal["user", "assistant"]
    parts: tuple[Any, ...]


def user(*parts: Any) -> Message:
    """A user message (text, images, tool results)."""
    return Message("user", tuple(parts))


def assistant(*parts: Any) -> Message:
    """An assistant message (text, tool calls, thinking)."""
    return Message("assistant", tuple(parts))


# ============================================================================ canonical form
@dataclass(frozen=True, slots=True)
class _Built:
    """What the last ``to_*()`` call planned with, so :meth:`PromptBuilder.explain` can explain
    that request: its format, the ``previous`` it planned against, and the canonical
    ``prompt_cache_options`` it sent (None: none given)."""

    fmt: OutputFormat
    previous: Any
    options: Any


@dataclass(frozen=True, slots=True)
class _Options:
    sort_tools: bool
    sort_json_keys: bool
    normalize_whitespace: bool
    refuse_sets: bool


def _set_error(where: str) -> TypeError:
    return TypeError(f"{where}: a set's iteration order is not stable across processes and "
                     "would leak into the prompt; pass a sorted list (or refuse_sets=False to "
                     "have sets sorted)")


def _check_previous(previous: Any, where: str = "previous") -> None:
    """Refuse a ``previous`` the planner cannot read, naming the type given."""
    if previous is None or isinstance(previous, (BreakpointPlan, PrefixView)):
        return
    what = ("must be a BreakpointPlan (a builder's last_plan), a PrefixView, or a list of "
            "WrittenEntry items or int positions")
    if not isinstance(previous, Sequence) or isinstance(previous, (str, bytes, bytearray)):
        raise TypeError(f"{where} {what}, not {type(previous).__name__}")
    for i, item in enumerate(previous):
        if not (isinstance(item, WrittenEntry)
                or (isinstance(item, int) and not isinstance(item, bool))):
            raise TypeError(f"{where}[{i}]: {where} {what}; item {i} is a "
                            f"{type(item).__name__}")


def _check_format(fmt: Any) -> OutputFormat:
    if fmt not in _OUTPUT_FORMATS:
        raise InvalidRequestError("fmt", f"{fmt!r} is not an output format; use one of: "
                                         f"{', '.join(_OUTPUT_FORMATS)}")
    return cast("OutputFormat", fmt)


def _jdump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _escape_attr(value: str) -> str:
    """``value`` escaped for a double-quoted XML attribute (``'`` is left alone)."""
    return (value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _check_encodable(text: str, where: str) -> None:
    """Raise :class:`InvalidRequestError` at ``where`` if ``text`` holds a lone surrogate (a
    request body is UTF-8 JSON, which cannot carry one)."""
    bad = _SURROGATE.search(text)
    if bad is not None:
        raise InvalidRequestError(where, f"lone surrogate U+{ord(bad.group()):04X} at character "
                                         f"{bad.start()}: the text is not valid Unicode and "
                                         "cannot be sent as UTF-8 JSON")


def _find_surrogate(node: Any, path: str) -> str | None:
    """The payload path of the first string (or key) holding a lone surrogate, or None."""
    if isinstance(node, str):
        return path if _SURROGATE.search(node) else None
    if isinstance(node, Mapping):
        for k, v in node.items():
            sub = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and _SURROGATE.search(k):
                return sub
            found = _find_surrogate(v, sub)
            if found is not None:
                return found
    elif isinstance(node, (list, tuple)):
        for i, v in enumerate(node):
            found = _find_surrogate(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


class _Canon:
    """Canonical JSON values and texts; records Volatile values met on the way."""

    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self.volatiles: list[tuple[Volatile, str]] = []

    def text(self, value: Any, where: str) -> str:
        if isinstance(value, Volatile):
            self.volatiles.append((value, where))
            value = str(value.value)
        if not isinstance(value, str):
            raise TypeError(f"{where}: text must be a str, not {type(value).__name__}")
        text: str = value
        _check_encodable(text, where)
        if self.opts.normalize_whitespace:
            text = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n")
                             .replace("\r", "\n").split("\n")).rstrip()
        return text

    def json(self, value: Any, where: str) -> Any:
        if isinstance(value, Volatile):
            self.volatiles.append((value, where))
            return self.json(value.value, where)
        if isinstance(value, Mapping):
            items = []
            for k, v in value.items():
                if not isinstance(k, str):
                    raise TypeError(f"{where}: JSON object keys must be str, got "
                                    f"{type(k).__name__}")
                _check_encodable(k, where)
                items.append((k, self.json(v, f"{where}.{k}")))
            if self.opts.sort_json_keys:
                items.sort(key=lambda kv: kv[0])
            return dict(items)
        if isinstance(value, (set, frozenset)):
            if self.opts.refuse_sets:
                raise _set_error(where)
            elems = [self.json(v, f"{where}[]") for v in value]
            return sorted(elems, key=_jdump)
        if isinstance(value, (list, tuple)):
            return [self.json(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, str):
            _check_encodable(value, where)
            return value
        if isinstance(value, bool) or value is None or isinstance(value, int):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"{where}: {value} is not valid JSON")
            return value
        dump = getattr(value, "model_dump", None)
        if callable(dump):  # pydantic models
            return self.json(dump(mode="json"), where)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self.json(dataclasses.asdict(value), where)
        raise TypeError(f"{where}: {type(value).__name__} is not JSON-serialisable")


@dataclass(frozen=True, slots=True)
class _Tool:
    name: str
    description: str
    schema: Mapping[str, Any]
    extra: Mapping[str, Any]
    raw: Mapping[str, Any] | None  # Anthropic server tools etc., passed through


@dataclass(frozen=True, slots=True)
class _Msg:
    role: Literal["user", "assistant"]
    parts: tuple[Any, ...]  # canonical parts: str, Image, ToolCall, ToolResult, Thinking, dict
    section: Section
    where: str = ""  # the message's name in errors ("history message 2", "example 0")


# ============================================================================ explain
@dataclass(frozen=True, slots=True)
class ExplainRow:
    """One row of :meth:`PromptBuilder.explain`: a segment and its breakpoint decision.

    Attributes:
        index / path / kind: the segment.
        section: the builder section it came from.
        tokens: its tokens; prefix_tokens: tokens up to and including it.
        position: its lookback position.
        breakpoint: the marker's TTL (``"5m"``, ``"1h"``, ``"30m"``), ``"implicit"`` for
            OpenAI's implicit one, or None.
        note: why a breakpoint was placed here, or why a candidate here was skipped.
    """

    index: int
    path: str
    section: str
    kind: str
    tokens: int
    prefix_tokens: int
    position: int
    breakpoint: str | None
    note: str


@dataclass(frozen=True)
class Explanation:
    """The table :meth:`PromptBuilder.explain` returns: rows plus the plan's totals.

    Render it with ``rich.print(explanation)`` (it is a rich renderable) or read ``rows``.

    Attributes:
        rows: one :class:`ExplainRow` per rendered segment, in render order.
        plan: the :class:`~promptcache.planner.BreakpointPlan` the rows explain.
        estimate: True when the token counts are estimates: always for the OpenAI formats
            (the API's per-message framing is estimated, 3 tokens a message), and for Anthropic
            (cl100k_base ids times the model's ratio, +-15 %).
        error_tokens: error bound of ``plan.total_tokens``, in tokens (0 when exact; see
            :func:`promptcache.tokens.view_count_error`: the OpenAI role framing's bound holds
            against the reference backend on text, tools and schemas; images of unknown size
            are outside it, see :func:`promptcache.tokens.view_unbounded`).
        unbounded: why the total has no error bound (``"images: size unknown"``: an OpenAI
            request with images, audio or files whose billed size the request does not give),
            or None; when set, ``error_tokens`` is not a bound and the title says so.
    """

    rows: tuple[ExplainRow, ...]
    plan: BreakpointPlan
    estimate: bool
    error_tokens: int = 0
    unbounded: str | None = None

    def table(self) -> Table:
        """A :class:`rich.table.Table` of the rows."""
        from rich.table import Table

        p = self.plan
        title = (f"{p.provider} {p.model}: {p.total_tokens} tokens"
                 f"{self._estimate_note()}, {p.marker_count} marker(s)")
        if p.read_tokens is not None:
            title += f"; expected read {p.read_tokens}, write {p.write_tokens}"
        table = Table(title=title)
        for col in ("#", "section", "path", "kind", "tokens", "prefix", "pos", "bp", "why"):
            table.add_column(col, overflow="fold")
        for r in self.rows:
            table.add_row(str(r.index), r.section, r.path, r.kind, str(r.tokens),
                          str(r.prefix_tokens), str(r.position), r.breakpoint or "", r.note)
        return table

    def __rich__(self) -> Table:
        return self.table()

    def _estimate_note(self) -> str:
        if not self.estimate:
            return ""
        if self.unbounded:
            return f" (estimate, {self.unbounded})"
        if self.error_tokens:
            return f" (estimate, +-{self.error_tokens} tokens)"
        return " (estimate)"


# ============================================================================ builder
class PromptBuilder:
    """Build a request by stability tier and let the planner place its cache markers.

    Args:
        model: the model id (its :class:`~promptcache.catalog.CachePolicy` decides minimums,
            slots, lookback, TTLs and which OpenAI caching parameters exist).
        policy: an explicit policy (for models the catalog does not list).
        canonicalize: default of the four switches below.
        sort_tools / sort_json_keys / normalize_whitespace / refuse_sets: override one switch.
        ttl: TTL of the planner's markers (default: the model's default).
        stable_ttl: TTL of the markers at or before the end of the static context (e.g.
            ``"1h"`` so other conversations keep reading the system prompt); longer TTLs are
            always placed first.
        reuse: next-request scenario weights (:class:`~promptcache.planner.ReuseModel`).
        previous: what the previous request of this conversation wrote (its plan), so the
            planner can place lagging breakpoints within the lookback.
        system_role: OpenAI role of the system message (``"system"`` or ``"developer"``).

    Raises:
        UnknownModelError: the catalog does not know ``model`` and no policy was given.
        InvalidRequestError: ``system_role`` is not ``"system"`` or ``"developer"``.
        PlanError: ``ttl`` / ``stable_ttl`` is not a TTL the model supports (the message names
            the id given and, for an alias, the catalog id: ``gpt-5.6 (gpt-5.6-sol)``).
        TypeError: ``previous`` is not a plan, a view or a list of entries / positions (the
            message names the type given).
    """

    def __init__(self, model: str, *, policy: CachePolicy | None = None,
                 canonicalize: bool = True, sort_tools: bool | None = None,
                 sort_json_keys: bool | None = None, normalize_whitespace: bool | None = None,
                 refuse_sets: bool | None = None, ttl: str | None = None,
                 stable_ttl: str | None = None, reuse: ReuseModel | None = None,
                 previous: PreviousLike = None,
                 system_role: Literal["system", "developer"] = "system") -> None:
        if system_role not in _SYSTEM_ROLES:
            raise InvalidRequestError("system_role", f"must be 'system' or 'developer', not "
                                                     f"{system_role!r}")
        if policy is None:
            from promptcache.catalog import get_policy

            policy = get_policy(model)
        self.model = model
        self.policy = policy
        self._check_ttls(ttl, stable_ttl)
        _check_previous(previous)
        self.options = _Options(
            canonicalize if sort_tools is None else sort_tools,
            canonicalize if sort_json_keys is None else sort_json_keys,
            canonicalize if normalize_whitespace is None else normalize_whitespace,
            canonicalize if refuse_sets is None else refuse_sets,
        )
        self.ttl = ttl
        self.stable_ttl = stable_ttl
        self.reuse = reuse
        self.previous = previous
        self.system_role = system_role
        self.last_plan: BreakpointPlan | None = None
        self._built: _Built | None = None  # the last to_*() call's planning inputs
        self._stage: Section | None = None
        self._tools: list[_Tool] = []
        self._system: list[str] = []
        self._documents: list[str] = []
        self._examples: list[_Msg] = []
        self._dynamic: list[str] = []
        self._history: list[_Msg] = []
        self._turn: list[Any] = []
        self._tail: list[Any] = []
        #: every declared wrapper (by identity: the same text declared twice is two wrappers,
        #: either of which may be formatted) -> (name, wrapper, whole-word pattern)
        self._watch: dict[int, tuple[str, Volatile, re.Pattern[str]]] = {}
        # (text, where) of the cached sections the prompt's author wrote (system, tools,
        # examples): volatile() looks for a value declared after them there
        self._early_texts: list[tuple[str, str]] = []

    def _model_name(self) -> str:
        """The model as the user typed it, with the catalog id when that differs (an alias)."""
        model_id = str(getattr(self.policy, "model_id", self.model))
        return self.model if model_id == self.model else f"{self.model} ({model_id})"

    def _check_ttls(self, ttl: str | None, stable_ttl: str | None) -> None:
        ttls = tuple(getattr(self.policy, "ttls", ()) or ())
        for name, value in (("ttl", ttl), ("stable_ttl", stable_ttl)):
            if value is not None and value not in ttls:
                raise PlanError(f"{name}={value!r} is not a TTL {self._model_name()} supports "
                                f"(supported: {', '.join(ttls) or 'none'})")

    # ------------------------------------------------------------------ ordering / volatile
    def _enter(self, section: Section) -> None:
        if self._stage is not None and _RANK[section] < _RANK[self._stage]:
            raise OrderingError(
                f"cannot add a {section} section after the {self._stage} section: {section} is "
                f"more stable than {self._stage} and must come first in the prompt (anything "
                f"less stable before it would change the cached prefix)")
        self._stage = section

    def _check_volatiles(self, canon: _Canon, section: Section) -> None:
        for v, where in canon.volatiles:
            text = str(v.value)
            if text:
                self._watch.setdefault(id(v), (v.name, v, _whole(text)))
            if section not in _CACHED_VOLATILE_OK:
                raise VolatileValueError(
                    f"volatile value {v.name} placed in the {section} section ({where}); "
                    "volatile values may only go in the new turn or the uncached tail")

    def _record_early(self, text: str, where: str, section: Section,
                      authored: bool = True) -> None:
        for name, v, pattern in self._watch.values():
            if v.formatted and pattern.search(text):
                raise VolatileValueError(
                    f"volatile value {name} appears in the {section} section ({where}); "
                    "volatile values may only go in the new turn or the uncached tail")
        if authored:
            self._early_texts.append((text, f"{section}: {where}"))

    def volatile(self, value: Any, name: str | None = None) -> Volatile:
        """Declare ``value`` volatile and get a :class:`Volatile` wrapper for it.

        From now on its text (``str(value)``) may not appear in any cached section (tools,
        system, context, history), also when the wrapper was formatted into a plain string
        (``f"User {v}"``): a later cached section that holds the text as a whole word (not
        inside a longer word or number: ``7`` is not found in ``17``, ``Bob`` not in
        ``Bobby``) raises, once the wrapper has been formatted (before that, no text can have
        come from it: a system prompt that merely mentions "7 days" next to a volatile user
        id 7 is fine).

        A value declared after the sections the prompt's author wrote (system, tools,
        examples) must not already be in them, as a whole word. Documents and history are
        not searched: they are data (a changelog dated today, an earlier answer that names
        the date), where the same text is a coincidence, not the value put there.

        Raises:
            VolatileValueError: the text is already in the system, tools or examples, as a
                whole word.
            ValueError: the value's text is empty.
        """
        v = Volatile(value, name)
        text = str(value)
        if not text:
            raise ValueError("a volatile value needs a non-empty text")
        pattern = _whole(text)
        for existing, where in self._early_texts:
            if pattern.search(existing):
                raise VolatileValueError(
                    f"volatile value {v.name} already appears in the {where}; volatile values "
                    "may only go in the new turn or the uncached tail")
        self._watch[id(v)] = (v.name, v, pattern)
        return v

    # ------------------------------------------------------------------ sections
    def tools(self, tools: Iterable[Any]) -> PromptBuilder:
        """Add tool definitions (Anthropic ``{name, description, input_schema}``, OpenAI chat
        ``{type: function, function: {...}}`` or Responses ``{type: function, name, ...}``).

        Raises:
            OrderingError: a later section was already added.
            InvalidRequestError: a tool is malformed or a name repeats, or ``tools`` is a single
                mapping or a string instead of a list of tools.
            TypeError: ``tools`` is a set or frozenset (empty or not): its iteration order is
                not stable across processes (with ``refuse_sets=False`` it is accepted; the
                tools are sorted by name anyway unless ``sort_tools=False``).
        """
        if isinstance(tools, (set, frozenset)) and self.options.refuse_sets:
            raise _set_error("tools")
        if isinstance(tools, (Mapping, str, bytes)):
            raise InvalidRequestError("tools", f"takes a list of tool definitions, not a "
                                               f"{type(tools).__name__}; use .tools([tool]) or "
                                               ".tool(name, description, input_schema)")
        self._enter("tools")
        for tool in tools:
            self._add_tool(tool, f"tools[{len(self._tools)}]")
        return self

    def tool(self, name: str, description: str = "", input_schema: Mapping[str, Any] | None = None,
             **extra: Any) -> PromptBuilder:
        """Add one tool definition (``input_schema`` defaults to an empty object schema)."""
        return self.tools([{"name": name, "description": description,
                            "input_schema": input_schema or {"type": "object", "properties": {}},
                            **extra}])

    def _add_tool(self, tool: Any, where: str) -> None:
        canon = _Canon(self.options)
        if not isinstance(tool, Mapping):
            raise InvalidRequestError(where, "a tool must be a mapping")
        raw: Mapping[str, Any] | None = None
        if "function" in tool and isinstance(tool["function"], Mapping):
            fn = tool["function"]
            name, desc, schema = fn.get("name"), fn.get("description", ""), fn.get("parameters")
            extra = {k: v for k, v in fn.items() if k not in ("name", "description",
                                                               "parameters")}
        elif "input_schema" in tool or tool.get("type") in (None, "function", "custom"):
            name, desc = tool.get("name"), tool.get("description", "")
            schema = tool.get("input_schema", tool.get("parameters"))
            extra = {k: v for k, v in tool.items()
                     if k not in ("name", "description", "input_schema", "parameters", "type",
                                  "cache_control")}
        else:  # Anthropic server / built-in tools: passed through
            name, desc, schema, extra = tool.get("name"), "", None, {}
            raw = canon.json({k: v for k, v in tool.items() if k != "cache_control"}, where)
        if not isinstance(name, str) or not name:
            raise InvalidRequestError(f"{where}.name", "a tool needs a non-empty string name")
        _check_encodable(name, f"{where}.name")
        if any(t.name == name for t in self._tools):
            raise InvalidRequestError(f"{where}.name", f"tool name {name!r} is used twice")
        desc_text = canon.text(desc or "", f"{where}.description")
        schema_c = canon.json(schema if schema is not None else {"type": "object",
                                                                 "properties": {}},
                              f"{where}.input_schema")
        extra_c = canon.json(extra, f"{where}") if extra else {}
        self._check_volatiles(canon, "tools")
        self._record_early(desc_text + _jdump(schema_c) + _jdump(extra_c) + _jdump(raw or {}),
                           where, "tools")
        self._tools.append(_Tool(name, desc_text, schema_c, extra_c, raw))

    def system(self, text: Any, *, dynamic: bool = False,
               dynamic_from: str | None = None) -> PromptBuilder:
        """Add system text.

        Args:
            text: the text (stable instructions).
            dynamic: the text changes per session (workspace, open files): rendered after the
                stable system and the documents, never marked.
            dynamic_from: split ``text`` at the first occurrence of this marker: the part
                before is stable, the part from the marker on is dynamic (BR-08). A blank
                dynamic part is dropped, never sent as a whitespace-only block.

        A blank ``text`` (``""``, ``"   "``) adds no block and is not an error: the Anthropic
        API rejects whitespace-only text blocks (BR-10), and a blank system text is a
        legitimate "no system prompt" (``system(config.get("system", ""))``); it still counts
        as a system section for the ordering check. ``explain()`` then shows no system segment.
        A non-str ``text`` raises :class:`TypeError`.

        Raises:
            OrderingError, VolatileValueError: see the class docstring.
        """
        if dynamic_from is not None:
            if not isinstance(text, str):
                raise TypeError("dynamic_from needs a str text")
            cut = text.find(dynamic_from)
            if cut >= 0:
                stable, rest = text[:cut], text[cut:]
                if stable.strip():
                    self.system(stable)
                if rest.strip():
                    self.system(rest, dynamic=True)
                return self
        section: Section = "dynamic system" if dynamic else "system"
        self._enter(section)
        canon = _Canon(self.options)
        where = f"system {'dynamic ' if dynamic else ''}block " \
                f"{len(self._dynamic if dynamic else self._system)}"
        value = canon.text(text, where)
        self._check_volatiles(canon, section)
        if not value.strip():
            return self
        self._record_early(value, where, section)
        (self._dynamic if dynamic else self._system).append(value)
        return self

    def document(self, text: Any, *, title: str | None = None) -> PromptBuilder:
        """Add a static document to the context (a system text block after the instructions).

        ``title`` wraps the text as ``<document title="...">...</document>``. In the title,
        ``&``, ``<``, ``>`` and ``"`` are escaped as XML character references (``&amp;``,
        ``&lt;``, ``&gt;``, ``&quot;``) so the markup stays well-formed; a title without them
        is inserted unchanged. In a titled document's text, a closing ``</document>`` tag (any
        case, also ``</document`` before whitespace or at the end) is escaped as
        ``&lt;/document`` so it cannot end the wrapper early; the rest of the text is inserted
        unchanged. An untitled document is never escaped.

        Raises:
            OrderingError, VolatileValueError: see the class docstring.
            InvalidRequestError: the text or the title holds a lone surrogate.
            TypeError: the title is not a str.
        """
        self._enter("context")
        canon = _Canon(self.options)
        where = f"document {len(self._documents)}"
        if not isinstance(text, (str, Volatile)):
            text = _jdump(canon.json(text, where))
        value = canon.text(text, where)
        title_text = None if title is None else canon.text(title, f"{where}.title")
        self._check_volatiles(canon, "context")
        if not value.strip():
            return self
        if title_text is not None:
            body = _DOC_CLOSE.sub(r"&lt;/\1", value)
            value = f'<document title="{_escape_attr(title_text)}">\n{body}\n</document>'
        self._record_early(value, where, "context", authored=False)
        self._documents.append(value)
        return self

    def example(self, user_text: Any, assistant_text: Any) -> PromptBuilder:
        """Add a few-shot example (a user/assistant message pair at the start of messages).

        Raises:
            OrderingError, VolatileValueError: see the class docstring.

        A blank text makes an empty message: :meth:`to_anthropic` then raises
        :class:`~promptcache._errors.InvalidRequestError` at ``example N``; the OpenAI outputs
        send it with an empty text.
        """
        self._enter("context")
        where = f"example {len(self._examples) // 2}"
        self._examples.append(self._message(Message("user", (user_text,)), "context", where))
        self._examples.append(self._message(Message("assistant", (assistant_text,)), "context",
                                            where))
        return self

    def history(self, *messages: Any) -> PromptBuilder:
        """Add earlier turns: :class:`Message` objects or Anthropic-shaped dicts
        (``{"role", "content": str | [blocks]}``); OpenAI chat ``tool`` messages and
        ``tool_calls`` are accepted too, and OpenAI Responses ``function_call`` /
        ``function_call_output`` items: a run of calls joins the assistant message before it,
        a run of outputs (or of chat ``tool`` messages) makes one user message. A single list
        argument is unpacked.

        The SDKs' own response objects (pydantic models) are taken wherever a message, a
        content block or a tool call goes, read as the SDK sends them
        (``model_dump(exclude_unset=True, mode="json", by_alias=True)``): Anthropic
        ``response.content`` blocks or the whole ``response``, OpenAI
        ``response.choices[0].message``, Responses ``response.output`` items.

        Raises:
            OrderingError, VolatileValueError: see the class docstring.
            InvalidRequestError: a message is not a :class:`Message`, a mapping or an SDK
                object with ``model_dump()``; has a role other than ``user`` / ``assistant`` /
                ``tool``; is a Responses item other than a message, ``function_call`` or
                ``function_call_output`` (``reasoning``, ...); or has a malformed content or
                tool call. The path names the message (``history message 2``).

        A message with no content at all (``{"role": "user"}``, blank text only) is kept:
        :meth:`to_anthropic` refuses it (Anthropic rejects empty content, "text content
        blocks must be non-empty") naming ``history message N``; the OpenAI outputs send it
        with an empty text (``"content": ""``).
        """
        self._enter("history")
        if len(messages) == 1 and isinstance(messages[0], (list, tuple)):
            messages = tuple(messages[0])
        converted: list[Message] = []
        for m in messages:
            m = _sdk_plain(m)  # once: _to_message and _tool_item take the plain form as is
            msg = _to_message(m, f"history message {len(self._history) + len(converted)}")
            prev = converted[-1] if converted else None
            if (prev is not None and _tool_item(m) and prev.role == msg.role
                    and (msg.role == "assistant"
                         or all(isinstance(p, ToolResult) for p in prev.parts))):
                # one Responses output holds [message, function_call, function_call, ...],
                # the next input [function_call_output, ...], a chat history one tool
                # message per result: one turn each, as the APIs need them (an assistant
                # message with every call, then one user message with the results)
                converted[-1] = Message(msg.role, (*prev.parts, *msg.parts))
            else:
                converted.append(msg)
        for msg in converted:
            where = f"history message {len(self._history)}"
            self._history.append(self._message(msg, "history", where))
        return self

    def turn(self, *parts: Any) -> PromptBuilder:
        """Add the new user turn (text, :class:`Volatile`, :class:`Image`, :class:`ToolResult`).

        A content block given as a mapping is read as :meth:`history` reads a message's blocks
        (a ``text`` / ``input_text`` block is text, ``tool_result`` a :class:`ToolResult`, ...),
        so it renders the same way now and in the next request's history, in the shape of the
        output format (Responses takes ``input_text``, Anthropic ``text``).

        Adjacent strings and volatile values join into one text block; blank text is dropped
        and ``turn()`` may be called again to add more. If the new turn is still empty (only
        blank text, no tail) when a request is made, the ``to_*`` methods raise
        :class:`~promptcache._errors.InvalidRequestError` at ``turn``: the API rejects an
        empty user text ("text content blocks must be non-empty"), and dropping the turn
        would silently send a different request.

        Raises:
            OrderingError, VolatileValueError: see the class docstring.
        """
        self._enter("turn")
        msg = self._message(Message("user", parts), "turn", "turn")
        self._turn.extend(msg.parts)
        return self

    def tail(self, *parts: Any) -> PromptBuilder:
        """Add the uncached tail: text after the new turn that is never cached or marked.

        Blank text is dropped (a blank tail adds nothing).
        """
        self._enter("tail")
        msg = self._message(Message("user", parts), "tail", "tail")
        self._tail.extend(msg.parts)
        return self

    def _message(self, msg: Message, section: Section, where: str) -> _Msg:
        canon = _Canon(self.options)
        parts: list[Any] = []
        pending: list[Any] = []

        def flush() -> None:
            if pending:
                text = canon.text("".join(pending), where)
                if text.strip():
                    parts.append(text)
                pending.clear()

        for i, p in enumerate(msg.parts):
            pw = f"{where} part {i}"
            if isinstance(p, Mapping):  # a known block type as the part a history dict gives
                p = _block_part(p)
            if isinstance(p, (str, Volatile)):
                if isinstance(p, Volatile):
                    canon.volatiles.append((p, pw))
                    pending.append(str(p.value))
                else:
                    pending.append(p)
                _check_encodable(pending[-1], pw)
                continue
            flush()
            if isinstance(p, (Image, ToolCall, ToolResult, Thinking)):  # their str fields
                for attr in ("id", "name", "tool_use_id", "thinking", "signature", "url", "data",
                             "media_type"):
                    v = getattr(p, attr, None)
                    if isinstance(v, str):
                        _check_encodable(v, f"{pw}.{attr}")
            if isinstance(p, Image):
                parts.append(p)
            elif isinstance(p, ToolCall):
                parts.append(ToolCall(p.id, p.name, canon.json(p.input, f"{pw}.input")))
            elif isinstance(p, ToolResult):
                content: Any
                if isinstance(p.content, (str, Volatile)):
                    content = canon.text(p.content, f"{pw}.content")
                else:
                    content = canon.json(list(p.content), f"{pw}.content")
                parts.append(ToolResult(p.tool_use_id, content, p.is_error))
            elif isinstance(p, Thinking):
                parts.append(p)
            elif isinstance(p, Mapping):
                parts.append(canon.json({k: v for k, v in p.items() if k != "cache_control"},
                                        pw))
            else:
                raise TypeError(f"{pw}: unsupported part type {type(p).__name__}")
        flush()
        self._check_volatiles(canon, section)
        if section not in _CACHED_VOLATILE_OK:
            for p in parts:
                self._record_early(_part_text(p), where, section,
                                   authored=section != "history")
        return _Msg(msg.role, tuple(parts), section, where)

    # ------------------------------------------------------------------ rendering
    def _sorted_tools(self) -> list[_Tool]:
        return sorted(self._tools, key=lambda t: t.name) if self.options.sort_tools \
            else list(self._tools)

    def _system_blocks(self) -> list[tuple[str, Section]]:
        return ([(t, "system") for t in self._system] + [(t, "context") for t in self._documents]
                + [(t, "dynamic system") for t in self._dynamic])

    def _messages(self) -> list[_Msg]:
        msgs = [*self._examples, *self._history]
        if self._turn or self._tail:
            msgs.append(_Msg("user", tuple(self._turn) + tuple(_TailPart(p) for p in self._tail),
                             "turn"))
        return msgs

    def _build(self, fmt: OutputFormat) -> tuple[dict[str, Any], dict[str, Section], set[str]]:
        """Unmarked payload, a map path -> section, and the tail paths."""
        sections: dict[str, Section] = {}
        tail_paths: set[str] = set()
        payload: dict[str, Any] = {"model": self.model}
        tools = self._sorted_tools()
        if fmt == "anthropic":
            if tools:
                payload["tools"] = []
                for i, t in enumerate(tools):
                    payload["tools"].append(_anthropic_tool(t))
                    sections[f"tools[{i}]"] = "tools"
            sys_blocks = self._system_blocks()
            if sys_blocks:
                payload["system"] = []
                for j, (text, sec) in enumerate(sys_blocks):
                    payload["system"].append({"type": "text", "text": text})
                    sections[f"system[{j}]"] = sec
            payload["messages"] = []
            for m, msg in enumerate(self._messages()):
                content = []
                for j, part in enumerate(msg.parts):
                    path = f"messages[{m}].content[{j}]"
                    if isinstance(part, _TailPart):
                        tail_paths.add(path)
                        sections[path] = "tail"
                        part = part.part
                    else:
                        sections[path] = msg.section
                    content.append(_anthropic_part(part))
                payload["messages"].append({"role": msg.role, "content": content})
        elif fmt == "openai-chat":
            self._openai_payload(payload, sections, tail_paths, tools, field="messages",
                                 tool_fn=_chat_tool, text_type="text", items_fn=_chat_messages)
        else:
            self._openai_payload(payload, sections, tail_paths, tools, field="input",
                                 tool_fn=_responses_tool, text_type="input_text",
                                 items_fn=_responses_items)
        return payload, sections, tail_paths

    def _openai_payload(self, payload: dict[str, Any], sections: dict[str, Section],
                        tail_paths: set[str], tools: Sequence[_Tool], *, field: str,
                        tool_fn: Any, text_type: str, items_fn: Any) -> None:
        """Fill ``payload`` for OpenAI Chat Completions (``field="messages"``) or Responses
        (``field="input"``): tools, one leading system/developer message holding the system
        blocks, then the conversation; records each part's section by path."""
        if tools:
            payload["tools"] = []
            for i, t in enumerate(tools):
                payload["tools"].append(tool_fn(t))
                sections[f"tools[{i}]"] = "tools"
        items: list[dict[str, Any]] = []
        sys_blocks = self._system_blocks()
        if sys_blocks:
            parts = []
            for j, (text, sec) in enumerate(sys_blocks):
                parts.append({"type": text_type, "text": text})
                sections[f"{field}[0].content[{j}]"] = sec
            items.append({"role": self.system_role, "content": parts})
        for msg in self._messages():
            for out, part_secs in items_fn(msg):
                m = len(items)
                items.append(out)
                for key, sec in part_secs.items():
                    path = f"{field}[{m}]" + (f".{key}" if key else "")
                    sections[path] = sec
                    if sec == "tail":
                        tail_paths.add(path)
        payload[field] = items

    def _boundaries(self, view: PrefixView, sections: Mapping[str, Section],
                    tail_paths: set[str]) -> tuple[Boundaries, list[str]]:
        sec_of: list[str] = []
        for seg in view.segments:
            sec_of.append(_section_of(seg.path, sections))
        last: dict[str, int] = {}
        first_tail: int | None = None
        for seg, sec in zip(view.segments, sec_of, strict=True):
            last[sec] = seg.index
            if sec == "tail" and first_tail is None:
                first_tail = seg.index
        tools_end = last.get("tools")
        system_end = last.get("system", tools_end)
        docs_end = max((seg.index for seg, sec in zip(view.segments, sec_of, strict=True)
                        if sec == "context" and seg.tier != "messages"), default=None)
        examples_end = max((seg.index for seg, sec in zip(view.segments, sec_of, strict=True)
                            if sec == "context" and seg.tier == "messages"), default=None)
        static_end = docs_end if docs_end is not None else system_end
        if examples_end is not None and not self._dynamic:
            static_end = examples_end
        hist_end = last.get("history")
        if hist_end is None:
            hist_end = examples_end
        turn_end = last.get("turn")
        if turn_end is None:
            turn_end = hist_end if hist_end is not None else (
                last.get("dynamic system", static_end))
        return Boundaries(tools_end, system_end, static_end, hist_end, turn_end,
                          first_tail), sec_of

    def _plan(self, fmt: OutputFormat, previous: PreviousLike,
              params: Mapping[str, Any] | None = None, *, options: Any = None,
              record: bool = True
              ) -> tuple[dict[str, Any], PrefixView, BreakpointPlan, list[str], Any]:
        """Build, render and plan; returns ``(payload, view, plan, section of each segment,
        canonical prompt_cache_options planned with or None)``. With ``params`` (an output
        call) the request is checked first. ``options``: canonical ``prompt_cache_options``
        to plan with (``params``' own win). ``record=True`` (:meth:`plan`) makes the plan
        :attr:`last_plan` once it is complete; ``record=False`` plans without touching any
        state (:meth:`explain`, and :meth:`_output`, which records only once the whole
        request is built). On any error nothing changes: ``last_plan`` and the request
        :meth:`explain` describes stay as they were."""
        provider = str(getattr(self.policy, "provider", "anthropic"))
        if (fmt == "anthropic") != (provider == "anthropic"):
            raise PlanError(f"{self.model} is {_PROVIDER_NAMES.get(provider, provider)} model; "
                            f"it cannot be sent as {_FORMAT_NAMES[fmt]} request")
        self._check_ttls(self.ttl, self.stable_ttl)
        payload, sections, tail_paths = self._build(fmt)
        if params is not None:
            self._check_request(fmt, payload, params)
            if fmt != "anthropic" and "prompt_cache_options" in params:
                # the caller's options (validated in _output) decide the planner's mode
                options = _Canon(self.options).json(params["prompt_cache_options"],
                                                    "prompt_cache_options")
        if options is not None:
            payload["prompt_cache_options"] = copy.deepcopy(options)
        try:
            view = render(payload, fmt, model=self.model)
        except InvalidRequestError as exc:
            # a lone surrogate the builder did not see (an id, a name, image data): name it
            where = _find_surrogate(payload, "") if not exc.path else None
            if where is None:
                raise
            raise InvalidRequestError(where, "lone surrogate: the text is not valid Unicode and "
                                             "cannot be sent as UTF-8 JSON") from None
        bounds, sec_of = self._boundaries(view, sections, tail_paths)
        plan = plan_breakpoints(view, self.policy, previous, boundaries=bounds, reuse=self.reuse,
                                ttl=self.ttl, stable_ttl=self.stable_ttl,
                                stable_key_end=bounds.static_end)
        if record:
            self.last_plan = plan
        return payload, view, plan, sec_of, options

    def _check_request(self, fmt: OutputFormat, payload: Mapping[str, Any],
                       params: Mapping[str, Any]) -> None:
        """Refuse a request the API would answer with a 400: no message, an empty history or
        example message (Anthropic), a tool call without its result or the reverse
        (:func:`_check_tool_pairs`, :func:`_check_function_call_pairs`), a bad token limit, an Anthropic pre-warm
        (``max_tokens=0``) combined with what it excludes (catalog ``prewarm_rejects``)."""
        if self._stage in ("turn", "tail") and not self._turn and not self._tail:
            raise InvalidRequestError("turn", "the new turn is empty (no parts, or only blank "
                                              "text); the API rejects an empty user text")
        field = "input" if fmt == "openai-responses" else "messages"
        if not payload.get(field) and not (fmt == "openai-responses" and any(
                params.get(k) is not None for k in _RESPONSES_INPUT_SOURCES)):
            what = ("a turn(), a history() message or system text" if fmt == "openai-chat"
                    else "a turn(), a history() message or system text"
                    if fmt == "openai-responses"
                    else "a turn() or a history() message; system text alone is not a message")
            raise InvalidRequestError(field, f"{_FORMAT_NAMES[fmt]} request needs at least one "
                                             f"message: add {what}")
        if fmt == "anthropic":
            for msg in (*self._examples, *self._history):
                if not msg.parts:
                    raise InvalidRequestError(msg.where, f"the {msg.role} message is empty (no "
                                              "content, or only blank text); the Anthropic API "
                                              "rejects empty content (text content blocks must "
                                              "be non-empty)")
            _check_tool_pairs(self._messages())
        elif fmt == "openai-chat":
            _check_tool_pairs(self._messages(), "openai-chat")
        else:
            _check_function_call_pairs(self._messages(), any(
                params.get(k) is not None for k in ("previous_response_id", "conversation")))
        from promptcache.catalog import provider_rules

        rules = provider_rules("anthropic" if fmt == "anthropic" else "openai")
        for key, (minimum, why) in _token_limits(fmt, rules).items():
            if key not in params:
                continue
            value = params[key]
            if value is None and fmt != "anthropic":
                continue  # OpenAI: null means no limit
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise InvalidRequestError(key, f"must be an int >= {minimum}, not {value!r}{why}")
        if (fmt == "anthropic" and rules.prewarm_max_tokens is not None
                and params.get("max_tokens") == rules.prewarm_max_tokens):
            rules.check_prewarm(params)

    def _check_params(self, fmt: OutputFormat, params: Mapping[str, Any]) -> None:
        """Refuse ``**params`` that are prompt sections or set by the builder, and validate
        ``prompt_cache_options`` against the model's catalog policy."""
        for k in params:
            if k in _SECTION_PARAMS:
                raise InvalidRequestError(k, f"is a prompt section: add it with "
                                             f"{_SECTION_PARAMS[k]}, so that it is "
                                             "canonicalised, checked for volatile values and "
                                             "planned (passed here it would bypass all three)")
            if k in _BUILDER_PARAMS:
                raise InvalidRequestError(k, "is set by the builder (markers and sections come "
                                             "from the plan)")
        if fmt == "openai-responses" and params.get("previous_response_id") is not None \
                and params.get("conversation") is not None:
            raise InvalidRequestError("conversation", "cannot be sent with previous_response_id: "
                                      "the API answers 400 to both (openai-python 3.57.0 "
                                      "response_create_params: previous_response_id \"cannot "
                                      "be used in conjunction with `conversation`\"); continue "
                                      "the conversation with one of them")
        if "prompt_cache_options" not in params:
            return
        opts = params["prompt_cache_options"]
        if fmt == "anthropic" or not bool(getattr(self.policy, "prompt_cache_options", False)):
            raise InvalidRequestError("prompt_cache_options", f"{self._model_name()} takes no "
                                      "prompt_cache_options (catalog: only GPT-5.6 and later "
                                      "models do; the API answers 400 to it)")
        if not isinstance(opts, Mapping):
            raise InvalidRequestError("prompt_cache_options", f"must be an object, not "
                                                              f"{type(opts).__name__}")
        mode = opts.get("mode")
        if mode is not None and mode not in _CACHE_OPTION_MODES:
            raise InvalidRequestError("prompt_cache_options.mode", f"must be one of "
                                      f"{', '.join(map(repr, _CACHE_OPTION_MODES))}, not "
                                      f"{mode!r}")
        ttls = tuple(getattr(self.policy, "ttls", ()) or ())
        ttl = opts.get("ttl")
        if ttl is not None and ttl not in ttls:
            raise InvalidRequestError("prompt_cache_options.ttl", f"{ttl!r} is not a TTL "
                                      f"{self._model_name()} supports (supported: "
                                      f"{', '.join(ttls) or 'none'})")

    def _output(self, fmt: OutputFormat, previous: PreviousLike, params: Mapping[str, Any]
                ) -> dict[str, Any]:
        """Build the request for ``fmt``. ``last_plan`` and the request :meth:`explain`
        describes are replaced only once the whole request is built: a request refused at
        any step (a parameter that is not JSON, a set, a lone surrogate, a NaN, a key the
        builder sets, ...) leaves both as they were."""
        self._check_params(fmt, params)
        if previous is not _UNSET:
            _check_previous(previous)
        prev = self.previous if previous is _UNSET else previous
        payload, _view, plan, _, options = self._plan(fmt, prev, params=params, record=False)
        out = apply_plan(payload, plan)
        if params:
            canon = _Canon(self.options)
            for k, v in params.items():
                if k in ("prompt_cache_key", "prompt_cache_options") and fmt != "anthropic":
                    out[k] = canon.json(v, k)  # the caller's own routing key / options win
                    continue
                if k in out or k in ("model", "cache_control"):
                    raise InvalidRequestError(k, "is set by the builder (markers and sections "
                                                 "come from the plan)")
                out[k] = canon.json(v, k)
        # the request is complete: only now is it the one sent (next request's previous)
        self.last_plan = plan
        self._built = _Built(fmt, prev, copy.deepcopy(options))
        return out

    def to_anthropic(self, *, max_tokens: int = 1024, previous: Any = None,
                     **params: Any) -> dict[str, Any]:
        """Keyword arguments for ``anthropic.Anthropic().messages.create``.

        Args:
            max_tokens: the required ``max_tokens``: an int >= 0 (not a bool); ``0`` is a
                pre-warm (prefill and cache writes only), which the API refuses together with
                ``stream=True``, thinking enabled, a forced ``tool_choice`` or
                ``output_config.format``. Both facts are catalog data
                (:attr:`promptcache.catalog.ProviderRules.prewarm_max_tokens` and
                ``prewarm_rejects``; source
                https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/prompt-caching.md,
                also https://platform.claude.com/docs/en/build-with-claude/prompt-caching).
            previous: the previous request's plan (default: the builder's ``previous``).
            params: other create() parameters (temperature, tool_choice, ...), canonicalised.

        Raises:
            PlanError: the model is not an Anthropic model.
            InvalidRequestError: the new turn is empty (``turn("")``), a history or example
                message is empty (``history message N`` / ``example N``), the request has no
                message (no turn and no history; system text is not a message),
                ``max_tokens`` is not an int >= 0, a ``tool_use`` has no ``tool_result`` at the
                start of the next message or a ``tool_result`` no ``tool_use`` just before it
                (the path names the message, the text the tool call id), a pre-warm is
                combined with what the API refuses with it (the path names the setting, e.g.
                ``thinking.type``), a parameter is a prompt section (``system``, ``tools``,
                ``messages``...: the message names ``.system()``, ``.tools()``,
                ``.turn()`` / ``.history()``) or one the builder sets, or
                ``prompt_cache_options`` is given (an OpenAI parameter), or a text holds a lone
                surrogate (the path names it).
            TypeError: a parameter is not JSON (a set, an object, a non-str key; named).
            ValueError: a parameter holds a NaN or infinity (named).

        On success the request's plan becomes :attr:`last_plan` and the request
        :meth:`explain` describes. On any error nothing changes: ``last_plan`` and what
        :meth:`explain` describes stay as they were (the refused request was never sent).
        """
        return self._output("anthropic", previous if previous is not None else _UNSET,
                            {"max_tokens": max_tokens, **params})

    def to_openai_chat(self, *, previous: Any = None, **params: Any) -> dict[str, Any]:
        """Keyword arguments for ``openai.OpenAI().chat.completions.create``.

        Includes ``prompt_cache_key`` (sha256 of the stable prefix) and, on models the catalog
        marks as supporting them (GPT-5.6+), ``prompt_cache_breakpoint`` markers and
        ``prompt_cache_options``. An empty history or example message is sent with an empty
        text. ``max_completion_tokens`` / ``max_tokens`` must be at least 1: the builder's own
        sanity rule (OpenAI documents no minimum; a limit of 0 asks for no output, and OpenAI
        has no pre-warm).

        Raises:
            PlanError: the model is not an OpenAI model.
            InvalidRequestError: the new turn is empty (``turn("")``), the request has no
                message (no system text, turn or history), ``max_completion_tokens`` /
                ``max_tokens`` is not None or an int >= 1 (not a bool), a parameter is a
                prompt section (``system``, ``tools``, ``functions``, ``messages``,
                ``instructions``, ``input``: the message names the method to use instead,
                ``.system()``, ``.tools()``, ``.turn()`` / ``.history()``) or one the builder
                sets, ``prompt_cache_options`` has a bad ``mode`` / ``ttl`` or the model's
                catalog policy takes none (before GPT-5.6), a text holds a lone surrogate
                (the path names it), or a tool call has no result at the start of the next
                message or a result no call just before it (as :meth:`to_anthropic`; Chat
                Completions answers both with a 400).
            TypeError, ValueError: a parameter is not JSON (as :meth:`to_anthropic`).

        On success the request's plan becomes :attr:`last_plan` and the request
        :meth:`explain` describes; on any error nothing changes (as :meth:`to_anthropic`).
        """
        return self._output("openai-chat", previous if previous is not None else _UNSET,
                            params)

    def to_openai_responses(self, *, previous: Any = None, **params: Any) -> dict[str, Any]:
        """Keyword arguments for ``openai.OpenAI().responses.create`` (see
        :meth:`to_openai_chat`).

        Raises:
            PlanError: the model is not an OpenAI model.
            InvalidRequestError: the new turn is empty (``turn("")``), ``input`` would be empty
                (no system text, turn or history) and no ``prompt`` /
                ``previous_response_id`` / ``conversation`` is given, both
                ``previous_response_id`` and ``conversation`` are given (path
                ``conversation``; the API refuses the pair), ``max_output_tokens`` is
                not None or an int >= the catalog's
                :attr:`~promptcache.catalog.ProviderRules.min_max_output_tokens` (16; not a
                bool), a parameter is a prompt section or one the builder sets (as
                :meth:`to_openai_chat`; ``instructions=`` included: use ``.system()``), a
                text holds a lone surrogate (the path names it), or a tool call has no result
                after it, or a result no call before it (unless ``previous_response_id`` /
                ``conversation`` is given: the calls are then on the server). The 16 is UNCONFIRMED: no
                official source, only the API's
                error text quoted in https://github.com/vectorize-io/hindsight/issues/58.
            TypeError, ValueError: a parameter is not JSON (as :meth:`to_anthropic`).

        On success the request's plan becomes :attr:`last_plan` and the request
        :meth:`explain` describes; on any error nothing changes (as :meth:`to_anthropic`).
        """
        return self._output("openai-responses", previous if previous is not None else _UNSET,
                            params)

    def plan(self, fmt: OutputFormat | None = None, *, previous: Any = None) -> BreakpointPlan:
        """The breakpoint plan for ``fmt`` (default: the model's provider's main format),
        planned against ``previous`` (default: the builder's) with no ``prompt_cache_options``.
        It becomes :attr:`last_plan`; on an error ``last_plan`` stays as it was.

        Raises:
            InvalidRequestError: ``fmt`` is not ``"anthropic"``, ``"openai-chat"`` or
                ``"openai-responses"`` (path ``fmt``).
            PlanError: the model's provider does not match ``fmt``.
            TypeError: ``previous`` is of a type the planner cannot read (named).
        """
        fmt = self._default_format() if fmt is None else _check_format(fmt)
        _check_previous(previous)
        return self._plan(fmt, self.previous if previous is None else previous)[2]

    def _default_format(self) -> OutputFormat:
        return "anthropic" if str(getattr(self.policy, "provider", "")) == "anthropic" \
            else "openai-chat"

    def explain(self, fmt: OutputFormat | None = None, *, previous: Any = None) -> Explanation:
        """A table of segments, tokens, positions and breakpoints, with why each breakpoint
        was placed or a candidate skipped.

        What it explains: the request the last successful :meth:`to_anthropic` /
        :meth:`to_openai_chat` / :meth:`to_openai_responses` call built (a refused call, one
        that raised, changes nothing), planned the same way: its format (so
        ``input[...]`` paths after :meth:`to_openai_responses`), the ``previous`` it planned
        against and the ``prompt_cache_options`` it sent (so an explicit-mode request shows
        explicit markers, not the implicit one). The plan is made again from the builder's
        current sections: while they are unchanged it equals :attr:`last_plan`; after more
        sections were added it is the plan the same call would give now. Before any ``to_*()``
        call it plans the model's provider's main format (``"anthropic"`` or
        ``"openai-chat"``) against the builder's ``previous`` with no
        ``prompt_cache_options``. ``fmt`` / ``previous`` override the format / previous; the
        last request's ``prompt_cache_options`` are kept only for its own format.

        It never changes :attr:`last_plan` (the plan of the request sent, which the next
        request takes as ``previous``) nor what a later call explains, whether it returns or
        raises.

        Args:
            fmt: ``"anthropic"``, ``"openai-chat"`` or ``"openai-responses"`` (default: as
                above).
            previous: the previous request's plan (default: as above).

        Returns:
            An :class:`Explanation` (``.rows``; ``rich.print()`` it for a table).

        Raises:
            InvalidRequestError, PlanError, TypeError: as :meth:`plan`.
        """
        built = self._built
        if fmt is None:
            fmt = built.fmt if built is not None else self._default_format()
        else:
            fmt = _check_format(fmt)
        _check_previous(previous)
        same = built is not None and built.fmt == fmt
        if previous is None:
            previous = built.previous if built is not None and same else self.previous
        _payload, view, plan, sec_of, _ = self._plan(
            fmt, previous, options=built.options if built is not None and same else None,
            record=False)
        placed = {b.segment_index: b for b in plan.breakpoints}
        notes: dict[int, list[str]] = {}
        for d in plan.decisions:
            if d.segment_index >= 0 and not d.placed:
                notes.setdefault(d.segment_index, []).append(f"skipped {d.role}: {d.reason}")
        for e in plan.marker_edits:
            try:
                idx = view.find(e.path).index
            except KeyError:
                continue
            notes.setdefault(idx, []).append(f"{e.action}: {e.reason}")
        rows = []
        for seg, sec in zip(view.segments, sec_of, strict=True):
            b = placed.get(seg.index)
            bp: str | None = None
            note_parts: list[str] = []
            if b is not None:
                bp = "implicit" if b.source == "implicit" else (b.ttl or "on")
                note_parts.append(f"{b.role}: {b.reason}")
            note_parts.extend(notes.get(seg.index, []))
            rows.append(ExplainRow(seg.index, seg.path, sec, seg.kind, seg.tokens,
                                   seg.end_token, seg.position, bp, "; ".join(note_parts)))
        exact, error = view_count_error(view)
        unbounded = view_unbounded(view)
        return Explanation(tuple(rows), plan, not exact or unbounded is not None, error,
                           unbounded)


def _token_limits(fmt: OutputFormat, rules: ProviderRules) -> dict[str, tuple[int, str]]:
    """Token-limit parameter -> (smallest accepted value, why) for ``fmt``: the catalog's
    provider minimum where it has one (Anthropic's pre-warm ``max_tokens``, the Responses
    ``max_output_tokens`` minimum), else the builder's own floor of 1."""
    if fmt == "anthropic":
        pre = rules.prewarm_max_tokens
        if pre is None:
            return {"max_tokens": (_MIN_OUTPUT_LIMIT, "")}
        return {"max_tokens": (pre, f" ({pre} = pre-warm: prefill and cache writes only)")}
    if fmt == "openai-chat":
        return {k: (_MIN_OUTPUT_LIMIT, "") for k in ("max_completion_tokens", "max_tokens")}
    least = rules.min_max_output_tokens
    if least is None:
        return {"max_output_tokens": (_MIN_OUTPUT_LIMIT, "")}
    src = rules.sources["min_max_output_tokens"]
    status = "" if src.confirmed else ", unconfirmed"
    return {"max_output_tokens": (least, f" (the API's minimum{status}: {src.url})")}


class _Unset:
    pass


_UNSET: Any = _Unset()


@dataclass(frozen=True, slots=True)
class _TailPart:
    part: Any


# ============================================================================ helpers
def _tool_use_id(part: Any) -> str | None:
    if isinstance(part, ToolCall):
        return part.id
    if isinstance(part, Mapping) and part.get("type") == "tool_use":
        return str(part.get("id"))
    return None


def _tool_result_id(part: Any) -> str | None:
    if isinstance(part, ToolResult):
        return part.tool_use_id
    if isinstance(part, Mapping) and part.get("type") == "tool_result":
        return str(part.get("tool_use_id"))
    return None


_PAIR_TEXT = {
    # api -> (call, result, "the X API", 400 text for a call without result, for an orphan)
    "anthropic": ("tool_use", "tool_result", "the Anthropic API",
                  "tool_use ids were found without tool_result blocks immediately after",
                  "unexpected tool_use_id found in tool_result blocks"),
    "openai-chat": ("tool_calls", "role=tool message", "Chat Completions",
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    "responding to each 'tool_call_id'",
                    "messages with role 'tool' must be a response to a preceding message with "
                    "'tool_calls'"),
}


def _check_tool_pairs(msgs: Sequence[_Msg], api: str = "anthropic") -> None:
    """Refuse an Anthropic or OpenAI Chat Completions conversation whose tool calls and
    results do not pair up.

    The Anthropic rule: each ``tool_use`` block of an assistant message must be answered by a
    ``tool_result`` block with its id in the very next message, a user message whose content
    starts with the ``tool_result`` blocks (text only after them); a ``tool_result`` must
    answer a ``tool_use`` of the assistant message right before it. Anything else is a 400
    ("``tool_use`` ids were found without ``tool_result`` blocks immediately after: ...",
    "unexpected ``tool_use_id`` found in ``tool_result`` blocks"). Source: Anthropic's tool use
    documentation, https://docs.anthropic.com/en/docs/build-with-claude/tool-use (handling
    tool results: the results follow their tool use blocks in the next user message, and come
    first in its content array); the 400 text above is the API's, as recorded by third-party
    test fixtures. The project's reference notes (hosted-api-rules.md) do not state the rule.

    Chat Completions (``api="openai-chat"``) has the same shape: the builder sends a user
    message's leading :class:`ToolResult` parts as ``role=tool`` messages right after the
    assistant message with ``tool_calls``, and the API answers 400 to an assistant
    ``tool_calls`` not followed by a tool message for each id, and to a tool message that
    does not answer the ``tool_calls`` just before it (the API's texts, as quoted in
    third-party reports, e.g. https://github.com/QwenLM/qwen-code/issues/315; OpenAI's
    function calling guide, https://platform.openai.com/docs/guides/function-calling, appends
    one tool message per call right after the assistant message). Only :class:`ToolCall` /
    :class:`ToolResult` parts count there (the chat output sends no other tool blocks).
    An assistant tool call in the last message (nothing after it) is not refused here.
    """
    call_word, result_word, api_name, no_result_400, orphan_400 = _PAIR_TEXT[api]
    anthropic = api == "anthropic"

    def call_id(p: Any) -> str | None:
        return _tool_use_id(p) if anthropic else p.id if isinstance(p, ToolCall) else None

    def result_id(p: Any) -> str | None:
        return (_tool_result_id(p) if anthropic
                else p.tool_use_id if isinstance(p, ToolResult) else None)

    pending: list[str] = []  # tool call ids of the assistant message just before
    pending_where = ""
    for i, msg in enumerate(msgs):
        parts = [p.part if isinstance(p, _TailPart) else p for p in msg.parts]
        where = msg.where or ("turn" if msg.section == "turn" else f"message {i}")
        results = [(j, rid) for j, p in enumerate(parts) if (rid := result_id(p)) is not None]
        if msg.role == "user":
            lead = 0
            while lead < len(parts) and result_id(parts[lead]) is not None:
                lead += 1
            for j, rid in results:
                if rid not in pending:
                    raise InvalidRequestError(
                        f"{where} part {j}", f"{result_word} for tool call id {rid!r} has no "
                        f"matching {call_word} in the assistant message right before it; "
                        f"{api_name} rejects it with a 400 ({orphan_400}): add the "
                        f"assistant's ToolCall({rid!r}, ...) just before, or drop the result")
                if j >= lead:
                    raise InvalidRequestError(
                        f"{where} part {j}", f"{result_word} for tool call id {rid!r} comes "
                        f"after other content; {api_name} needs the tool results first in the "
                        "user message (text after them)")
            answered = {rid for _, rid in results}
            missing = [t for t in pending if t not in answered]
        else:
            missing = pending
        if missing:
            raise InvalidRequestError(
                pending_where, f"tool call id {missing[0]!r} ({call_word}) has no "
                f"{result_word} in the next message ({where}); {api_name} rejects it with a "
                f"400 ({no_result_400}): start the next user message with "
                f"ToolResult({missing[0]!r}, ...), in history() or turn()")
        pending = ([t for p in parts if (t := call_id(p)) is not None]
                   if msg.role == "assistant" else [])
        pending_where = where


def _check_function_call_pairs(msgs: Sequence[_Msg], stored_context: bool) -> None:
    """Refuse an OpenAI Responses input whose ``function_call`` and ``function_call_output``
    items do not pair up: a call with no output after it anywhere in the input ("No tool
    output found for function call ..."), or, unless the input continues a stored response
    or conversation (``stored_context``: ``previous_response_id`` / ``conversation``, where
    the calls are on the server), an output whose ``call_id`` no earlier call has ("No tool
    call found for function call output with call_id ..."). Both 400 texts are the API's as
    quoted in third-party reports (https://github.com/continuedev/continue/issues/10092,
    https://github.com/openai/codex/issues/620); Responses does not need the output right
    after its call. A call in the last message (nothing after it) is not refused here.
    """
    calls: dict[str, str] = {}  # call id -> where
    answered: set[str] = set()
    for i, msg in enumerate(msgs):
        where = msg.where or ("turn" if msg.section == "turn" else f"message {i}")
        for j, raw in enumerate(msg.parts):
            p = raw.part if isinstance(raw, _TailPart) else raw
            if isinstance(p, ToolCall) and msg.role == "assistant":
                calls.setdefault(p.id, where)
            elif isinstance(p, ToolResult):
                if p.tool_use_id not in calls and not stored_context:
                    raise InvalidRequestError(
                        f"{where} part {j}", f"function_call_output for call id "
                        f"{p.tool_use_id!r} has no function_call before it; the Responses "
                        "API rejects it with a 400 (No tool call found for function call "
                        f"output with call_id {p.tool_use_id}): add the assistant's "
                        f"ToolCall({p.tool_use_id!r}, ...) before it, drop the result, or pass "
                        "previous_response_id")
                answered.add(p.tool_use_id)
    last = msgs[-1].where if msgs else ""
    for cid, where in calls.items():
        if cid not in answered and where != last:
            raise InvalidRequestError(
                where, f"function_call {cid!r} has no function_call_output after it; the "
                f"Responses API rejects it with a 400 (No tool output found for function call "
                f"{cid}): add ToolResult({cid!r}, ...) to the next user message, in history() "
                "or turn()")


def _section_of(path: str, sections: Mapping[str, Section]) -> str:
    probe = path
    while True:
        if probe in sections:
            return sections[probe]
        cut = max(probe.rfind("."), probe.rfind("["))
        if cut <= 0:
            break
        probe = probe[:cut]
    # a path above part level: any mapped path below it
    for p, sec in sections.items():
        if p.startswith(path + ".") or p.startswith(path + "["):
            return sec
    return "unknown"


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, ToolCall):
        return part.name + _jdump(part.input)
    if isinstance(part, ToolResult):
        return part.content if isinstance(part.content, str) else _jdump(part.content)
    if isinstance(part, Thinking):
        return part.thinking
    if isinstance(part, Mapping):
        return _jdump(part)
    return ""


def _whole(text: str) -> re.Pattern[str]:
    """A pattern finding ``text`` as a whole word: not preceded (if it starts with a letter,
    digit or ``_``) or followed (if it ends with one) by another such character."""
    head = r"(?<!\w)" if re.match(r"\w", text) else ""
    tail = r"(?!\w)" if re.search(r"\w\Z", text) else ""
    return re.compile(head + re.escape(text) + tail)


def _sdk_plain(obj: Any) -> Any:
    """A pydantic model (an SDK response object) as the SDK itself sends it; anything else as is.

    The Anthropic and OpenAI Python SDKs serialise a model found in request params with
    ``model_dump(exclude_unset=True, mode="json", by_alias=True)``, leaving out the fields
    named in the model's ``__api_exclude__`` (anthropic ``_utils/_json.py``
    ``openapi_model_dump``; openai ``_utils/_transform.py``). Detected by a callable
    ``model_dump`` (pydantic v2), so pydantic is not imported here.
    """
    if isinstance(obj, (Message, Mapping, str, Volatile, Image, ToolCall, ToolResult, Thinking)):
        return obj
    dump = getattr(obj, "model_dump", None)
    if not callable(dump) or isinstance(obj, type):
        return obj
    try:
        return dump(exclude_unset=True, mode="json", by_alias=True,
                    exclude=getattr(obj, "__api_exclude__", None))
    except TypeError:  # a model_dump() with another signature
        return dump()


def _tool_item(m: Any) -> bool:
    """Whether ``m`` is a Responses ``function_call`` / ``function_call_output`` item or an
    OpenAI chat ``role=tool`` message: one tool call or result, which joins its neighbours."""
    m = _sdk_plain(m)
    if not isinstance(m, Mapping):
        return False
    return m.get("role") == "tool" or (
        m.get("role") is None and m.get("type") in ("function_call", "function_call_output"))


def _to_message(m: Any, where: str) -> Message:
    m = _sdk_plain(m)
    if isinstance(m, Message):
        return m
    if not isinstance(m, Mapping):
        raise InvalidRequestError(
            where, "a message must be a Message, a mapping or an SDK response object with "
            f"model_dump(), not {type(m).__name__}")
    role = m.get("role")
    content = m.get("content")
    kind = m.get("type")
    if role is None and kind == "function_call":  # a Responses output / input item
        args = m.get("arguments", "{}")
        try:
            parsed = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            raise InvalidRequestError(f"{where}.arguments", "arguments are not JSON") from None
        return Message("assistant", (ToolCall(str(m.get("call_id")), str(m.get("name")),
                                               parsed if parsed is not None else {}),))
    if role is None and kind == "function_call_output":
        out = m.get("output", "")
        return Message("user", (ToolResult(str(m.get("call_id")), out if isinstance(out, str)
                                           else _text_of(out)),))
    if role is None and isinstance(kind, str) and (
            kind in ("reasoning", "item_reference", "compaction")
            or kind.endswith(("_call", "_call_output"))):
        raise InvalidRequestError(
            f"{where}.type", f"a Responses {kind!r} item has no place in the builder's "
            "history (only messages, function_call and function_call_output items): drop it, "
            "or send the conversation with previous_response_id")
    if role == "tool":  # OpenAI chat tool result
        return Message("user", (ToolResult(str(m.get("tool_call_id", "")),
                                           content if isinstance(content, str) else
                                           _text_of(content)),))
    if role not in ("user", "assistant"):
        raise InvalidRequestError(f"{where}.role", f"must be 'user' or 'assistant', not {role!r}")
    parts: list[Any] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for j, b in enumerate(content):
            b = _sdk_plain(b)
            if isinstance(b, (str, Volatile, Image, ToolCall, ToolResult, Thinking)):
                parts.append(b)
                continue
            if not isinstance(b, Mapping):
                raise InvalidRequestError(f"{where}.content[{j}]", "a block must be a mapping")
            parts.append(_block_part(b))
    elif content is not None:
        raise InvalidRequestError(f"{where}.content", "must be a string or a list of blocks")
    calls = m.get("tool_calls") or ()
    if not isinstance(calls, (list, tuple)):
        raise InvalidRequestError(f"{where}.tool_calls", "must be a list of tool calls")
    for k, call in enumerate(calls):
        call = _sdk_plain(call)
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping):
            raise InvalidRequestError(f"{where}.tool_calls[{k}]",
                                      "a tool call must be a mapping with a 'function' mapping")
        args = fn.get("arguments", "{}")
        try:
            parsed = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            raise InvalidRequestError(f"{where}.tool_calls", "arguments are not JSON") from None
        parts.append(ToolCall(str(call.get("id")), str(fn.get("name")), parsed))
    return Message(role, tuple(parts))


def _block_part(b: Mapping[str, Any]) -> Any:
    """A content block given as a mapping, as the builder's own part: a text block
    (``text`` / ``input_text`` / ``output_text``) its text, ``tool_use`` a :class:`ToolCall`,
    ``tool_result`` a :class:`ToolResult`, ``thinking`` a :class:`Thinking`, an Anthropic
    ``image`` with a ``base64`` or ``url`` source an :class:`Image`; any other block (an image
    with a Files API ``file`` source...) a plain dict, sent as given. So the same
    block renders the same way in the new turn and, on the next request, in the history, in
    the shape each API takes (Responses refuses ``type: "text"`` with a 400, Anthropic
    ``input_text``). Keys the part does not keep (``cache_control``, ``citations``) are
    dropped, as for a history message given as a mapping."""
    t = b.get("type")
    if t in ("text", "input_text", "output_text"):
        text = b.get("text", "")
        return text if isinstance(text, (str, Volatile)) else str(text)
    if t == "tool_use":
        return ToolCall(str(b.get("id")), str(b.get("name")), b.get("input") or {})
    if t == "tool_result":
        c = b.get("content", "")
        return ToolResult(str(b.get("tool_use_id")), c if isinstance(c, str)
                          else [_sdk_plain(x) for x in (c or [])],
                          bool(b.get("is_error", False)))
    if t == "thinking":
        return Thinking(str(b.get("thinking", "")), str(b.get("signature", "")))
    if t == "image" and isinstance(b.get("source"), Mapping):
        src = b["source"]
        if src.get("type") == "base64" and isinstance(src.get("data"), str):
            return Image(src["data"], str(src.get("media_type")))
        if src.get("type") == "url" and isinstance(src.get("url"), str):
            return Image(url=src["url"])
        # any other source (a Files API {"type": "file", "file_id": ...}) is sent as given:
        # read as a URL it became {"url": "None"} (review 24)
    return dict(b)


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return "" if content is None else str(content)


def _anthropic_tool(t: _Tool) -> dict[str, Any]:
    if t.raw is not None:
        return dict(t.raw)
    out: dict[str, Any] = {"name": t.name}
    if t.description:
        out["description"] = t.description
    out["input_schema"] = dict(t.schema)
    out.update(t.extra)
    return out


def _chat_tool(t: _Tool) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": t.name}
    if t.description:
        fn["description"] = t.description
    fn["parameters"] = dict(t.schema)
    fn.update({k: v for k, v in t.extra.items() if k == "strict"})
    return {"type": "function", "function": fn}


def _responses_tool(t: _Tool) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function", "name": t.name}
    if t.description:
        out["description"] = t.description
    out["parameters"] = dict(t.schema)
    out["strict"] = t.extra.get("strict")
    return out


def _anthropic_part(part: Any) -> dict[str, Any]:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if isinstance(part, Image):
        if part.url is not None:
            return {"type": "image", "source": {"type": "url", "url": part.url}}
        return {"type": "image", "source": {"type": "base64", "media_type": part.media_type,
                                            "data": part.b64}}
    if isinstance(part, ToolCall):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": dict(part.input)}
    if isinstance(part, ToolResult):
        out: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.tool_use_id}
        if isinstance(part.content, str):
            if part.content:
                out["content"] = part.content
        else:
            out["content"] = list(part.content)
        if part.is_error:
            out["is_error"] = True
        return out
    if isinstance(part, Thinking):
        return {"type": "thinking", "thinking": part.thinking, "signature": part.signature}
    if isinstance(part, Mapping):
        return dict(part)
    raise TypeError(f"unsupported part {type(part).__name__}")


def _result_text(part: ToolResult) -> str:
    if isinstance(part.content, str):
        return part.content
    return _text_of(part.content) if all(isinstance(b, Mapping) for b in part.content) \
        else _jdump(part.content)


def _chat_messages(msg: _Msg) -> list[tuple[dict[str, Any], dict[str, Section]]]:
    """OpenAI chat messages for one builder message, with part-path -> section maps."""
    out: list[tuple[dict[str, Any], dict[str, Section]]] = []
    if not msg.parts:  # an empty history / example message is sent as it is (empty text)
        return [({"role": msg.role, "content": ""}, {"content": msg.section})]
    if msg.role == "assistant":
        texts = [p for p in msg.parts if isinstance(p, str)]
        calls = [p for p in msg.parts if isinstance(p, ToolCall)]
        m: dict[str, Any] = {"role": "assistant"}
        secs: dict[str, Section] = {}
        if texts:
            m["content"] = "\n\n".join(texts)
            secs["content"] = msg.section
        if calls:
            m["tool_calls"] = [{"id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": _jdump(c.input)}}
                               for c in calls]
            for k in range(len(calls)):
                secs[f"tool_calls[{k}]"] = msg.section
        if not texts and not calls:
            return out
        out.append((m, secs))
        return out
    parts: list[dict[str, Any]] = []
    psecs: dict[str, Section] = {}

    def flush() -> None:
        if parts:
            out.append(({"role": "user", "content": list(parts)}, dict(psecs)))
            parts.clear()
            psecs.clear()

    for raw in msg.parts:
        sec: Section = "tail" if isinstance(raw, _TailPart) else msg.section
        p = raw.part if isinstance(raw, _TailPart) else raw
        if isinstance(p, ToolResult):
            flush()
            out.append(({"role": "tool", "tool_call_id": p.tool_use_id,
                         "content": _result_text(p) or "(empty)"}, {"content": sec}))
            continue
        if isinstance(p, str):
            node: dict[str, Any] = {"type": "text", "text": p}
        elif isinstance(p, Image):
            url = p.url if p.url is not None else f"data:{p.media_type};base64,{p.b64}"
            node = {"type": "image_url", "image_url": {"url": url}}
        elif isinstance(p, Mapping):
            node = dict(p)
        else:
            continue  # thinking / tool calls never appear in user messages
        psecs[f"content[{len(parts)}]"] = sec
        parts.append(node)
    flush()
    return out


def _responses_items(msg: _Msg) -> list[tuple[dict[str, Any], dict[str, Section]]]:
    """OpenAI Responses input items for one builder message."""
    out: list[tuple[dict[str, Any], dict[str, Section]]] = []
    if not msg.parts:  # an empty history / example message is sent as it is (empty text)
        return [({"role": msg.role, "content": ""}, {"content": msg.section})]
    if msg.role == "assistant":
        texts = [p for p in msg.parts if isinstance(p, str)]
        if texts:
            out.append(({"role": "assistant", "content": "\n\n".join(texts)},
                        {"content": msg.section}))
        for c in msg.parts:
            if isinstance(c, ToolCall):
                out.append(({"type": "function_call", "call_id": c.id, "name": c.name,
                             "arguments": _jdump(c.input)}, {"": msg.section}))
        return out
    parts: list[dict[str, Any]] = []
    psecs: dict[str, Section] = {}

    def flush() -> None:
        if parts:
            out.append(({"role": "user", "content": list(parts)}, dict(psecs)))
            parts.clear()
            psecs.clear()

    for raw in msg.parts:
        sec: Section = "tail" if isinstance(raw, _TailPart) else msg.section
        p = raw.part if isinstance(raw, _TailPart) else raw
        if isinstance(p, ToolResult):
            flush()
            out.append(({"type": "function_call_output", "call_id": p.tool_use_id,
                         "output": _result_text(p)}, {"": sec}))
            continue
        if isinstance(p, str):
            node: dict[str, Any] = {"type": "input_text", "text": p}
        elif isinstance(p, Image):
            url = p.url if p.url is not None else f"data:{p.media_type};base64,{p.b64}"
            node = {"type": "input_image", "image_url": url, "detail": "auto"}
        elif isinstance(p, Mapping):
            node = dict(p)
        else:
            continue
        psecs[f"content[{len(parts)}]"] = sec
        parts.append(node)
    flush()
    return out
