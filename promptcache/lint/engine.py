"""The lint engine: the :class:`Rule` base class and the contexts rules look at.

Shape (after ruff's one-rule-one-module registry and sqlfluff's small rule classes)::

    sources/*  --load-->  contexts  --(rule.inputs)-->  Rule.check_<kind>(ctx)  -->  Finding
                          RequestContext   one request payload, rendered by promptcache.prefix
                          LogContext       a sequence of RequestContexts (JSONL / recordings)
                          TemplateContext  static text + holes of one template
                          PythonContext    taint flows found in one Python file

A rule declares the input kinds it checks (``inputs``) and implements the matching
``check_request`` / ``check_log`` / ``check_template`` / ``check_python``; each yields
:class:`~promptcache.lint.finding.Finding` objects built with ``ctx.finding(self, ...)``,
which fills in ``file:line:col`` from the context's locator.

Deviation from the style anchors: no crawler/segment-seeker classes; a rule gets one whole
context per call, because the interesting facts (cached prefix end, previous request) are
per request, not per node.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Literal, Protocol

from promptcache.lint.facts import CacheFacts
from promptcache.lint.finding import Finding, Severity
from promptcache.prefix import PrefixView, Segment

__all__ = [
    "DOC_SECTIONS",
    "Flow",
    "InputKind",
    "Locator",
    "LogContext",
    "Piece",
    "PythonContext",
    "RequestContext",
    "Rule",
    "RuleStatus",
    "TemplateContext",
    "Volatility",
    "run_rules",
    "text_path",
]

InputKind = Literal["request", "log", "template", "python"]
RuleStatus = Literal["stable", "preview", "deprecated"]

#: The fixed sections every rule docstring carries, in order (a test enforces them).
DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety",
                "References")


class Locator(Protocol):
    """Maps a payload path (and a character offset inside its string value) to line/col."""

    def __call__(self, path: str | None, offset: int | None = None) -> tuple[int, int]: ...


def _no_location(path: str | None, offset: int | None = None) -> tuple[int, int]:
    return (1, 1)


# --------------------------------------------------------------------------- rule base
class Rule:
    """Base class of every lint rule (one subclass per module ``rules/PCnnn.py``).

    Class attributes (all required):
        code: stable code, ``"PC101"``; the module is named after it.
        name: dotted name, ``"volatile.timestamp"``.
        summary: one line for listings and SARIF ``shortDescription``.
        groups: selection groups (``("all", "volatile")``).
        severity: default :class:`Severity`.
        status: ``"stable"`` (selected by default), ``"preview"`` (opt-in) or ``"deprecated"``.
        since: the promptcache version that added it.
        message: what the finding says (a rule may give a more specific message per finding).
        fix_title: the fix hint.
        inputs: input kinds it checks.
        aggregate_in_logs: True when ``check_request`` should not run per log entry because
            ``check_log`` reports once for the whole log.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    groups: ClassVar[tuple[str, ...]] = ("all",)
    severity: ClassVar[Severity]
    status: ClassVar[RuleStatus] = "stable"
    since: ClassVar[str] = "0.1.0"
    message: ClassVar[str]
    fix_title: ClassVar[str]
    inputs: ClassVar[frozenset[InputKind]]
    aggregate_in_logs: ClassVar[bool] = False

    def check_request(self, ctx: RequestContext) -> Iterable[Finding]:
        """Findings for one request (default: none)."""
        return ()

    def check_log(self, ctx: LogContext) -> Iterable[Finding]:
        """Findings across the requests of a log (default: none)."""
        return ()

    def check_template(self, ctx: TemplateContext) -> Iterable[Finding]:
        """Findings for one template (default: none)."""
        return ()

    def check_python(self, ctx: PythonContext) -> Iterable[Finding]:
        """Findings for one Python file (default: none)."""
        return ()

    # ------------------------------------------------------------------ documentation
    @classmethod
    def doc(cls) -> str:
        """The rule's documentation (its docstring, dedented)."""
        import inspect

        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def doc_sections(cls) -> dict[str, str]:
        """``{"What it does": "...", ...}`` parsed from the ``## Heading`` lines of the doc."""
        out: dict[str, str] = {}
        current: str | None = None
        lines: list[str] = []
        for line in cls.doc().splitlines():
            m = re.match(r"^##\s+(.+?)\s*$", line)
            if m:
                if current is not None:
                    out[current] = "\n".join(lines).strip()
                current, lines = m.group(1), []
            elif current is not None:
                lines.append(line)
        if current is not None:
            out[current] = "\n".join(lines).strip()
        return out

    @classmethod
    def metadata(cls) -> dict[str, Any]:
        """JSON-ready description (``promptcache rule --format json``, SARIF rules)."""
        return {
            "code": cls.code,
            "name": cls.name,
            "summary": cls.summary,
            "groups": list(cls.groups),
            "severity": cls.severity.value,
            "status": cls.status,
            "since": cls.since,
            "message": cls.message,
            "fix_title": cls.fix_title,
            "inputs": sorted(cls.inputs),
            "doc": cls.doc(),
        }


# --------------------------------------------------------------------------- volatility
@dataclass(frozen=True, slots=True)
class Volatility:
    """What makes a value change between requests.

    Attributes:
        kind: ``"timestamp"``, ``"id"``, ``"random"``, ``"set-order"`` or ``"key-order"``.
        granularity: for timestamps: ``"microsecond"``, ``"millisecond"``, ``"second"``,
            ``"minute"``, ``"hour"``, ``"day"`` (None when unknown or not a timestamp).
        origin: what produced it (``"datetime.now()"``, ``"{{ current_date }}"``, ``"uuid"``).
    """

    kind: str
    granularity: str | None
    origin: str

    @property
    def severity(self) -> Severity:
        """Day granularity is info (changes once a day); everything else is a warning."""
        if self.kind == "timestamp" and self.granularity in ("day", "month", "year"):
            return Severity.INFO
        return Severity.WARNING


# --------------------------------------------------------------------------- contexts
def text_path(segment: Segment) -> str:
    """The payload path of a segment's human text (where a character offset applies).

    ``system[0]`` -> ``system[0].text``; string content (``messages[0].content``) -> itself;
    a tool -> ``tools[i].description``.
    """
    if segment.string_node:
        return segment.path
    if segment.kind == "tool":
        return segment.path + ".description"
    if segment.kind in ("text", "input_text", "output_text"):
        return segment.path + ".text"
    return segment.path


@dataclass(eq=False)
class RequestContext:
    """One request payload, as the provider caches it.

    Attributes:
        view: the rendered :class:`~promptcache.prefix.PrefixView`.
        payload: the payload as given.
        facts: the model's :class:`~promptcache.lint.facts.CacheFacts`.
        file: input file name (``"<request>"`` for :func:`lint_request`).
        locator: payload path + char offset -> (line, col).
        previous: the request sent before this one (logs, or ``lint_request(previous=...)``).
        usage: the response usage recorded with the request (logs), if any.
        timestamp: when it was sent, in seconds since the epoch (logs), if known.
        entry: 0-based index in its log (None outside logs).
        scratch: per-request memo shared by rules (volatile scan, divergence).
    """

    view: PrefixView
    payload: Mapping[str, Any]
    facts: CacheFacts
    file: str = "<request>"
    locator: Locator = _no_location
    previous: RequestContext | None = None
    usage: Mapping[str, Any] | None = None
    timestamp: float | None = None
    entry: int | None = None
    scratch: dict[str, Any] = field(default_factory=dict)

    kind: ClassVar[InputKind] = "request"

    @cached_property
    def cached_end(self) -> int | None:
        """Index of the last segment inside the cached prefix, or None when nothing is cached.

        Anthropic: the last breakpoint (explicit or automatic). OpenAI: the automatic prefix,
        i.e. everything before the newest message (or up to the last explicit breakpoint if that
        is later), and only when the prompt reaches the minimum cacheable size.
        """
        view = self.view
        if not view.segments:
            return None
        if view.provider == "anthropic":
            bps = view.breakpoints()
            return bps[-1].index if bps else None
        minimum = self.facts.min_cacheable_tokens
        if minimum is not None and view.total_tokens < minimum:
            return None
        end: int | None = None
        last_msg = max((s.message_index for s in view.segments
                        if s.message_index is not None and s.tier == "messages"), default=None)
        for seg in view.segments:
            if last_msg is not None and seg.tier == "messages" and seg.message_index == last_msg:
                break
            end = seg.index
        for seg in view.segments:
            if seg.breakpoint is not None and (end is None or seg.index > end):
                end = seg.index
        return end

    @property
    def cached_end_token(self) -> int:
        """Tokens of the cached prefix (0 when nothing is cached)."""
        end = self.cached_end
        return 0 if end is None else self.view.segments[end].end_token

    def covering_breakpoint(self, segment: Segment) -> Segment | None:
        """The first breakpoint segment at or after ``segment`` (Anthropic), else None."""
        for bp in self.view.breakpoints():
            if bp.index >= segment.index:
                return bp
        return None

    def finding(self, rule: type[Rule] | Rule, message: str | None = None, *,
                path: str | None = None, offset: int | None = None, at: str | None = None,
                severity: Severity | None = None, fix: str | None = None,
                **details: Any) -> Finding:
        """A finding of ``rule`` at payload ``path``; the location is ``at`` (default: ``path``)
        plus the character ``offset`` inside that string value.

        In a log, a finding of the same rule at the same path as an earlier request's is folded
        into that one (:func:`run_rules`), so its location is not looked up.
        """
        seen: set[tuple[str, str]] | None = self.scratch.get("log_seen")
        line, col = 1, 1
        key = (rule.code, path if path is not None else (message or rule.message))
        if seen is None or key not in seen:
            line, col = self.locator(at if at is not None else path, offset)
            if seen is not None:
                seen.add(key)
        if self.entry is not None:
            details.setdefault("request_index", self.entry)
        return Finding(rule.code, rule.name, severity or rule.severity, message or rule.message,
                       self.file, line, col, path, fix or rule.fix_title, details)


@dataclass(eq=False)
class LogContext:
    """The requests of one log file, in order (JSONL, or a recorded exchange list).

    Attributes:
        file: input file name.
        entries: one :class:`RequestContext` per request, ``previous`` linked.
    """

    file: str
    entries: Sequence[RequestContext]

    kind: ClassVar[InputKind] = "log"


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of a template: static text or a hole (a substitution).

    Attributes:
        kind: ``"text"`` or ``"hole"``.
        text: the static text, or the hole's source (``"{{ now() }}"``).
        line, col: 1-based start in the file.
        volatility: for holes, what makes the value change (None: not known to vary).
    """

    kind: Literal["text", "hole"]
    text: str
    line: int
    col: int
    volatility: Volatility | None = None


@dataclass(eq=False)
class TemplateContext:
    """One prompt template: the static text and holes in order.

    Attributes:
        file: input file name.
        name: which template (``"system_template"`` in a YAML file; the file name otherwise).
        syntax: ``"jinja"``, ``"format"`` (``str.format``), ``"handlebars"``, ``"text"``.
        pieces: in source order.
        model: model named by the file (prompty front matter), if any.
    """

    file: str
    name: str
    syntax: str
    pieces: Sequence[Piece]
    model: str | None = None
    count_tokens: Callable[[str], int] | None = None

    kind: ClassVar[InputKind] = "template"

    @cached_property
    def stable_tokens_after(self) -> list[int]:
        """For each piece, tokens of static text after it (to the end of the template)."""
        from promptcache.tokens import count_text

        counter = self.count_tokens or (lambda s: count_text(s, self.model))
        out = [0] * len(self.pieces)
        total = 0
        for i in range(len(self.pieces) - 1, -1, -1):
            out[i] = total
            piece = self.pieces[i]
            if piece.kind == "text" and piece.text.strip():
                total += counter(piece.text)
        return out

    def finding(self, rule: type[Rule] | Rule, message: str | None = None, *, line: int,
                col: int, severity: Severity | None = None, fix: str | None = None,
                **details: Any) -> Finding:
        """A finding of ``rule`` at ``line:col``."""
        details.setdefault("template", self.name)
        return Finding(rule.code, rule.name, severity or rule.severity, message or rule.message,
                       self.file, line, col, None, fix or rule.fix_title, details)


@dataclass(frozen=True, slots=True)
class Flow:
    """A volatile value that reaches the cached prefix of an API call (Python source).

    Attributes:
        volatility: what varies.
        line, col: 1-based position of the volatile expression (``datetime.now()``).
        sink: the argument it reaches (``"system="``, ``"tools="``, ``"messages[0]"``,
            ``"prompt_cache_key="``).
        call: the call it reaches (``"client.messages.create"``).
        sink_line: line of that argument (an inline suppression may sit on either line).
        suppress_lines: other lines where an inline suppression silences this flow: the first
            line of the call, and of the message element holding the argument.
        call_line: first line of the call that sends an argument written outside it (a
            message dict bound to a name, a helper's list); None when the argument is
            the call's own (on its lines) or the call is not known.

    A value that reaches several calls gives one flow per call (per sink line), so that a
    suppression on one call's line silences that call only; the linter then reports each
    value once per rule, at its first call not suppressed.
    """

    volatility: Volatility
    line: int
    col: int
    sink: str
    call: str
    sink_line: int
    suppress_lines: tuple[int, ...] = ()
    call_line: int | None = None

    @property
    def where(self) -> str:
        """The flow's place for a message: ``"line 13"``, or ``"line 13, sent by the call at
        line 15"`` when the argument was written before the call (a message dict bound to a
        name, built by a helper)."""
        if self.call_line is None or self.call_line == self.sink_line:
            return f"line {self.sink_line}"
        return f"line {self.sink_line}, sent by the call at line {self.call_line}"


@dataclass(eq=False)
class PythonContext:
    """The taint flows found in one Python file."""

    file: str
    flows: Sequence[Flow]

    kind: ClassVar[InputKind] = "python"

    def finding(self, rule: type[Rule] | Rule, flow: Flow, message: str, *,
                severity: Severity | None = None, fix: str | None = None,
                **details: Any) -> Finding:
        """A finding of ``rule`` at the flow's volatile expression."""
        details.setdefault("sink", flow.sink)
        details.setdefault("call", flow.call)
        details.setdefault("sink_line", flow.sink_line)
        if flow.suppress_lines:
            details.setdefault("suppress_lines", list(flow.suppress_lines))
        details.setdefault("origin", flow.volatility.origin)
        if flow.volatility.granularity:
            details.setdefault("granularity", flow.volatility.granularity)
        return Finding(rule.code, rule.name, severity or rule.severity, message,
                       self.file, flow.line, flow.col, None, fix or rule.fix_title, details)


Context = RequestContext | LogContext | TemplateContext | PythonContext


# --------------------------------------------------------------------------- running
def _dedupe_log(findings: list[Finding]) -> list[Finding]:
    """In a log, the same problem repeats on every request: keep the first finding of each
    rule at each payload path (the value itself may differ, e.g. a new timestamp every time),
    count the rest."""
    seen: dict[tuple[str, str | None, str], int] = {}
    out: list[Finding] = []
    counts: list[int] = []
    for f in findings:
        key = (f.code, f.path, "" if f.path is not None else f.message)
        if key in seen:
            counts[seen[key]] += 1
            continue
        seen[key] = len(out)
        out.append(f)
        counts.append(1)
    result: list[Finding] = []
    for f, n in zip(out, counts, strict=True):
        if n > 1:
            details = dict(f.details)
            details["occurrences"] = n
            f = Finding(f.code, f.name, f.severity, f"{f.message} (in {n} requests)", f.file,
                        f.line, f.col, f.path, f.fix, details)
        result.append(f)
    return result


def run_rules(contexts: Iterable[Context], rules: Sequence[Rule]) -> list[Finding]:
    """Run every rule on every context whose kind it declares.

    Returns:
        Findings in context order, then rule order. Log entries run the per-request checks
        (duplicates across entries are folded into one finding with ``occurrences``).
    """
    out: list[Finding] = []
    for ctx in contexts:
        if isinstance(ctx, RequestContext):
            for rule in rules:
                if "request" in rule.inputs:
                    out.extend(rule.check_request(ctx))
        elif isinstance(ctx, LogContext):
            per: list[Finding] = []
            for entry in ctx.entries:
                for rule in rules:
                    if "request" in rule.inputs and not rule.aggregate_in_logs:
                        per.extend(rule.check_request(entry))
            for rule in rules:
                if "log" in rule.inputs:
                    per.extend(rule.check_log(ctx))
            out.extend(_dedupe_log(per))
        elif isinstance(ctx, TemplateContext):
            for rule in rules:
                if "template" in rule.inputs:
                    out.extend(rule.check_template(ctx))
        elif isinstance(ctx, PythonContext):
            for rule in rules:
                if "python" in rule.inputs:
                    out.extend(rule.check_python(ctx))
    return out
