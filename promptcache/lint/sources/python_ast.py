"""Python source: follow volatile values into the cached prefix of LLM API calls (AST taint).

Sources (what varies between requests): ``datetime.now/utcnow/today``, ``date.today``,
``time.time/time_ns/localtime/gmtime/ctime/asctime/strftime``, ``uuid.uuid1/4/6/7``,
``random.*``, ``secrets.*``, ``os.getpid``, ``os.urandom``; iteration over a ``set`` (a literal,
``set(...)``, or a parameter annotated ``set[...]`` / ``frozenset`` / ``typing.Set``; string
hashing is salted per process, so set order changes between runs); ``json.dumps`` of a
runtime value without ``sort_keys=True`` (key order follows however the dict was built);
a list reordered in place at random (``random.shuffle(x)`` unless on a seeded
``random.Random(seed)``, ``x.sort(key=<random>)``): its text, and which message comes first
where it is a ``messages=`` / ``input=`` list.

Propagation, within a module, sequentially through each function body: assignments (also
tuple targets, ``self.x``, ``d[k] = v``, ``x += ...``, ``.append/.extend/.insert/.update``),
f-strings, ``.format``, ``%``, ``+``, ``str.join``, containers, comprehensions, method calls on
a tainted receiver, calls that take a tainted argument, and calls of module-level functions and
methods whose return value is tainted (summaries, computed on first call and memoised);
``self.<attr>`` set in any method of the class (``__init__``) read in another (not for
``prompt_cache_key=``: one key per instance is the recommended shape); a ``messages=`` /
``input=`` list returned by a module helper, its parameters bound to the call's arguments
(``messages=build(datetime.now())``). ``sorted()`` removes set-order
taint; ``len()`` / ``bool()`` / ``isinstance()`` / ``type()`` (results that cannot hold the
value) remove all taint, while ``int()`` / ``round()`` / ``float()`` / ``abs()`` / ``hash()`` /
``min()`` / ``max()`` keep it. ``.strftime(fmt)`` / ``.date()`` / ``.replace(second=0, ...)`` set
the granularity, as do ``int()`` / ``round()`` / ``math.floor()`` (epoch seconds: second),
``// 3600`` (hour) and a ``:.0f`` format spec (second).

Sinks (the cached prefix): the ``instructions=`` / ``system_prompt=`` /
``system_message=`` arguments of any call (agent frameworks), system / developer message dicts
and ``SystemMessage(...)`` objects, and the ``system=``, ``tools=``, ``instructions=``,
``prompt_cache_key=`` arguments and the first / system / developer elements of ``messages=`` /
``input=`` (list literals, or names built from them) of ``*.messages.create/stream``,
``*.chat.completions.create/parse``, ``*.responses.create/stream/parse``,
``litellm.completion/acompletion`` (also passed as ``**params``, ``params`` a dict literal or
``dict(...)`` call built in the same function), and promptcache's ``PromptBuilder`` stable sections
(``.system()`` unless ``dynamic=``/``dynamic_from=``, ``.tools()``, ``.tool()``,
``.document()``, ``.example()``; values wrapped in ``.volatile()`` are declared and left to
the builder). In an Anthropic ``messages.create`` whose ``system=`` / ``messages=`` blocks are
visible, a block after the request's last ``cache_control`` breakpoint is outside the cached
prefix and not a sink (as in the JSON request path).

It is a heuristic, intraprocedural-plus-summaries analysis (no aliasing, no cross-module
flow); its output is a list of :class:`~promptcache.lint.engine.Flow` objects the rules
report on: one per volatile value and sink line (a ``role=system`` message is one sink, at
its content, whether seen as a dict or as an element of ``messages=``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from promptcache._errors import InputError
from promptcache.lint.engine import Flow, PythonContext, Volatility
from promptcache.lint.sources.base import Document, LoadOptions, parse_suppressions
from promptcache.lint.volatile import granularity_of_strftime

__all__ = ["SOURCE", "PythonSource", "analyze"]


@dataclass(frozen=True, slots=True)
class _Taint:
    vol: Volatility
    line: int
    col: int


Taints = frozenset[_Taint]
_EMPTY: Taints = frozenset()

_SOURCES: dict[str, tuple[str, str | None]] = {
    "datetime.datetime.now": ("timestamp", "microsecond"),
    "datetime.datetime.utcnow": ("timestamp", "microsecond"),
    "datetime.datetime.today": ("timestamp", "microsecond"),
    "datetime.date.today": ("timestamp", "day"),
    "time.time": ("timestamp", "microsecond"),
    "time.time_ns": ("timestamp", "microsecond"),
    "time.localtime": ("timestamp", "second"),
    "time.gmtime": ("timestamp", "second"),
    "time.ctime": ("timestamp", "second"),
    "time.asctime": ("timestamp", "second"),
    "uuid.uuid1": ("id", None),
    "uuid.uuid4": ("id", None),
    "uuid.uuid6": ("id", None),
    "uuid.uuid7": ("id", None),
    "os.getpid": ("random", None),
    "os.urandom": ("random", None),
    "arrow.now": ("timestamp", "second"),
    "arrow.utcnow": ("timestamp", "second"),
    "pendulum.now": ("timestamp", "second"),
    "ulid.new": ("id", None),
    "ulid.ULID": ("id", None),
    "nanoid.generate": ("id", None),
    "shortuuid.uuid": ("id", None),
}
_RANDOM_MODULES = ("random.", "secrets.", "numpy.random.")
_SINK_CALL = re.compile(r"(?:^|\.)(?:messages|completions|responses)"
                        r"(?:\.with_raw_response|\.with_streaming_response)?"
                        r"\.(?:create|stream|parse)$")
_SYSTEM_MESSAGE_CLASSES = ("SystemMessage", "SystemMessageParam", "DeveloperMessage")
#: Keyword arguments that hold the system prompt in agent frameworks (pydantic-ai
#: ``Agent(system_prompt=)``, Semantic Kernel / OpenAI Agents ``instructions=``, autogen
#: ``system_message=``), whatever the callee.
_AGENT_PROMPT_KWARGS = frozenset({"instructions", "system_prompt", "system_message"})
_SINK_FUNCS = frozenset({"litellm.completion", "litellm.acompletion"})
#: promptcache.builder.PromptBuilder methods whose arguments form the stable prefix
#: (``system(..., dynamic=True)`` and ``dynamic_from=`` are the declared-dynamic exceptions;
#: ``turn()`` / ``tail()`` are after the breakpoints by design).
_BUILDER_METHODS = frozenset({"system", "tools", "tool", "document", "example"})
_PREFIX_KWARGS = ("system", "tools", "instructions", "prompt_cache_key")
_LIST_KWARGS = ("messages", "input")
_PASS_THROUGH_METHODS = frozenset({"isoformat", "astimezone", "ctime", "timestamp", "strip",
                                   "lstrip", "rstrip", "upper", "lower", "title", "encode",
                                   "decode", "hex", "format", "join", "replace", "split"})


#: Built-ins whose result cannot carry the value's text (a length, a truth value, a type).
#: ``int()``, ``round()``, ``float()``, ``abs()``, ``hash()``, ``min()``, ``max()`` and
#: ``sum()`` are not among them: their result is still the changing value (coarsened by
#: :data:`_ROUNDING`).
_OPAQUE_BUILTINS = frozenset({"len", "isinstance", "issubclass", "bool", "id", "type",
                              "print", "any", "all", "callable", "hasattr"})
#: Calls that drop the fraction of a number: an epoch in seconds keeps changing every second.
_ROUNDING = frozenset({"int", "round", "math.floor", "math.ceil", "math.trunc"})
#: Keys / keywords of a content block whose value is a string (never a block holding a
#: ``cache_control`` marker).
_TEXT_FIELDS = frozenset({"text", "type", "role", "name", "id", "tool_use_id", "media_type",
                          "title", "thinking", "signature", "data", "url"})
#: Callee names that build one content block or message from their arguments (SDK typed
#: dicts ``TextBlockParam(...)``, ``MessageParam(...)``, framework ``HumanMessage(...)``).
_BLOCK_CONSTRUCTOR_SUFFIXES = ("Param", "Block", "Message")
#: Timestamp granularities, finest first.
_GRANULARITIES = ("microsecond", "millisecond", "second", "minute", "hour", "day", "week",
                  "month", "year")
#: Calls returning a number of seconds since the epoch (or another origin).
_EPOCH_SECONDS = frozenset({"time.time", "time.monotonic", "time.perf_counter",
                            "time.process_time", "time.mktime", "calendar.timegm"})
#: Seconds per unit, for ``time.time() // 3600`` (coarsest first).
_UNIT_SECONDS = (("day", 86400), ("hour", 3600), ("minute", 60))


def _coarsen(taints: Iterable[_Taint], granularity: str, *, exact: bool = False) -> Taints:
    """``taints`` with each timestamp's granularity made at least as coarse as
    ``granularity`` (a value already coarser keeps its own); other kinds unchanged.
    ``exact``: the granularity was computed from the value's own unit (a ``time_ns()``
    value is coarsened too; otherwise it is left alone, its unit being nanoseconds)."""
    rank = _GRANULARITIES.index(granularity)
    out = set()
    for t in taints:
        g = t.vol.granularity
        if (t.vol.kind == "timestamp" and (exact or "_ns(" not in t.vol.origin)
                and (g not in _GRANULARITIES or _GRANULARITIES.index(g) < rank)):
            t = _Taint(Volatility("timestamp", granularity, t.vol.origin), t.line, t.col)
        out.add(t)
    return frozenset(out)


def _number(node: ast.expr) -> float | None:
    """The value of a positive numeric constant (``1000``, ``1e3``), else None."""
    if (isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool) and node.value > 0):
        return float(node.value)
    return None


def _unit_granularity(seconds: float) -> str:
    """The granularity of a whole number counting units of ``seconds`` (``1e-3`` ->
    millisecond, ``60`` -> minute, ``3600`` -> hour)."""
    seconds *= 1 + 1e-9  # 1e-9 * 1e6 is 0.00099999...
    if seconds < 1e-3:
        return "microsecond"
    if seconds < 1:
        return "millisecond"
    if seconds < 60:
        return "second"
    for unit, length in _UNIT_SECONDS:
        if seconds >= length:
            return unit
    return "minute"  # pragma: no cover - seconds >= 60 here


_FLOAT_SPEC = re.compile(r"^[^.]*\.(\d+)[fFeEgG%]?$|^[^.]*[dn]$")


def _spec_granularity(spec: str) -> str | None:
    """Granularity a number format spec shows of a number of seconds: ``".0f"`` / ``"d"``
    -> second, ``".3f"`` -> millisecond, more digits -> microsecond; None otherwise."""
    m = _FLOAT_SPEC.match(spec)
    if m is None:
        return None
    digits = int(m.group(1)) if m.group(1) is not None else 0
    return "second" if digits == 0 else "millisecond" if digits <= 3 else "microsecond"


def _retag(taints: Iterable[_Taint], granularity: str | None) -> Taints:
    out = set()
    for t in taints:
        if t.vol.kind == "timestamp" and granularity is not None:
            out.add(_Taint(Volatility("timestamp", granularity, t.vol.origin), t.line, t.col))
        else:
            out.add(t)
    return frozenset(out)


def _origin(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse of odd trees
        text = type(node).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        inner = _dotted(node.func)
        if inner is None:
            return None
        parts.append(inner + "()")
    else:
        return None
    return ".".join(reversed(parts))


@dataclass
class _Module:
    aliases: dict[str, str] = field(default_factory=dict)
    summaries: dict[str, Taints] = field(default_factory=dict)
    funcs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = field(default_factory=dict)
    in_progress: set[str] = field(default_factory=set)
    builders: set[str] = field(default_factory=set)
    class_attrs: dict[str, Taints] = field(default_factory=dict)
    #: (class name, attribute) -> taint of ``self.<attribute>`` as any method of the class
    #: assigns it (``__init__`` setting ``self.system_prompt`` read in ``step()``)
    self_attrs: dict[tuple[str, str], Taints] = field(default_factory=dict)

    def summary(self, name: str) -> Taints | None:
        """Return taint of the module function / method ``name`` (computed on first use,
        memoised; recursion yields no taint). None when the module defines no such function."""
        if name in self.summaries:
            return self.summaries[name]
        defs = self.funcs.get(name)
        if not defs:
            return None
        if name in self.in_progress:
            return _EMPTY
        self.in_progress.add(name)
        out: set[_Taint] = set()
        for fn in defs:
            scope = _Scope(self, record=False)
            scope.run(fn.body)
            out |= scope.returns
        self.in_progress.discard(name)
        self.summaries[name] = frozenset(out)
        return self.summaries[name]
    globals: dict[str, Taints] = field(default_factory=dict)
    #: (origin line, origin column, kind, sink line, prompt_cache_key sink, line of the API
    #: call it reaches: None for a system message seen on its own)
    flows: dict[tuple[int, int, str, int, bool, int | None], Flow] = field(
        default_factory=dict)
    #: the first five key fields of system messages a call's flow covers from another line
    #: (a helper's returned message, the call reported at its own line)
    covered: set[tuple[int, int, str, int, bool]] = field(default_factory=set)
    lines: list[str] | None = None

    def column(self, node: ast.AST) -> int:
        """1-based character column of ``node`` (ast's ``col_offset`` counts UTF-8 bytes)."""
        offset = getattr(node, "col_offset", 0)
        line = getattr(node, "lineno", 1)
        if self.lines is None or not 1 <= line <= len(self.lines):
            return offset + 1
        return _char_column(self.lines[line - 1], offset)


class _Scope:
    """Walks one function body (or the module body) with its own environment."""

    def __init__(self, mod: _Module, *, record: bool, is_module: bool = False) -> None:
        self.mod = mod
        self.env: dict[str, Taints] = {}
        self.lists: dict[str, list[ast.expr]] = {}
        #: name -> (seconds per unit, seconds between changes) of the clock number it holds
        #: (see :meth:`clock`)
        self.units: dict[str, tuple[float, float]] = {}
        # name -> the (key, value) items of the dict literal / dict(...) call it holds, read
        # as keywords where the name is passed as **name to an API call
        self.dicts: dict[str, list[tuple[str, ast.expr]]] = {}
        # name -> the taint of an in-place random reordering (random.shuffle(name),
        # name.sort(key=<random>)): the list's order, so its first element, changes per run
        self.reordered: dict[str, Taints] = {}
        self.returns: set[_Taint] = set()
        self.record = record
        self.is_module = is_module
        #: the elements of the first list literal this function body returns
        self.returned: list[ast.expr] | None = None
        #: the class whose method this scope walks (``self.x`` reads its :attr:`_Module.self_attrs`)
        self.cls: str | None = None

    # ---------------------------------------------------------------- names
    def resolve(self, func: ast.expr) -> str | None:
        dotted = _dotted(func)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        full = self.mod.aliases.get(head)
        if full is not None:
            return f"{full}.{rest}" if rest else full
        return dotted

    def lookup(self, name: str) -> Taints:
        got = self.env.get(name)
        if got is not None:
            return got
        return self.mod.globals.get(name, _EMPTY)

    # ---------------------------------------------------------------- expressions
    def taint(self, node: ast.expr | None) -> Taints:
        if node is None:
            return _EMPTY
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted is not None and dotted in self.env:
                return self.env[dotted]
            if (self.cls is not None and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                    and (self.cls, node.attr) in self.mod.self_attrs):
                return self.mod.self_attrs[(self.cls, node.attr)]
            if node.attr in self.mod.class_attrs and isinstance(node.value, ast.Name):
                return self.mod.class_attrs[node.attr]
            base = self.taint(node.value)
            if node.attr in ("year", "month"):
                return frozenset(t for t in base if t.vol.kind != "timestamp")
            if node.attr in ("day", "weekday"):
                return _retag(base, "day")
            return base
        if isinstance(node, ast.JoinedStr):
            return self._union(v for v in node.values)
        if isinstance(node, ast.FormattedValue):
            inner = self.taint(node.value)
            spec = node.format_spec
            if inner and isinstance(spec, ast.JoinedStr) and all(
                    isinstance(v, ast.Constant) for v in spec.values):
                fmt = "".join(str(v.value) for v in spec.values)  # type: ignore[attr-defined]
                gran = granularity_of_strftime(fmt)
                if gran is not None:  # f"{now:%Y-%m-%d}"
                    return _retag(inner, gran)
                gran = _spec_granularity(fmt)
                if gran is not None:  # f"{time.time():.0f}": whole seconds
                    return _coarsen(inner, gran)
            return inner
        if isinstance(node, ast.BinOp):
            both = self.taint(node.left) | self.taint(node.right)
            gran, exact = (self._rounded_granularity(node)
                           if isinstance(node.op, ast.FloorDiv) else (None, False))
            # time.time() // 60: minutes; ms // 60000 (ms = int(time.time() * 1000)): minutes
            return _coarsen(both, gran, exact=exact) if gran is not None else both
        if isinstance(node, ast.BoolOp):
            return self._union(node.values)
        if isinstance(node, ast.IfExp):
            return self.taint(node.body) | self.taint(node.orelse)
        if isinstance(node, ast.Dict):
            return self._union([v for v in node.values] + [k for k in node.keys if k is not None])
        if isinstance(node, (ast.List, ast.Tuple)):
            return self._union(node.elts)
        if isinstance(node, ast.Set):
            inner = self._union(node.elts)
            if len(node.elts) > 1 and not all(_hash_stable_const(e) for e in node.elts):
                inner |= {self._new(node, "set-order", None, "a set literal")}
            return inner
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            out = self.taint(node.elt) | self._union(g.iter for g in node.generators)
            if isinstance(node, ast.SetComp):
                out |= {self._new(node, "set-order", None, "a set comprehension")}
            return out
        if isinstance(node, ast.DictComp):
            return (self.taint(node.key) | self.taint(node.value)
                    | self._union(g.iter for g in node.generators))
        if isinstance(node, (ast.Subscript, ast.Starred, ast.Await)):
            return self.taint(node.value)
        if isinstance(node, ast.NamedExpr):
            t = self.taint(node.value)
            self.env[node.target.id] = t
            return t
        return _EMPTY

    def clock(self, node: ast.expr, depth: int = 0) -> tuple[float, float] | None:
        """(seconds per unit, seconds between changes) of a clock number: (1, 0) for
        ``time.time()``, (1e-3, 0) for ``time.time() * 1000``, (1e-3, 1e-3) once made whole
        (``int(...)``), (60, 60) for ``time.time() // 60``, (1e-9, 1e-9) for
        ``time.time_ns()``; a name's when it was assigned one of these in this scope; None
        when not known."""
        if depth > 20:
            return None
        if isinstance(node, ast.Name):
            return self.units.get(node.id)
        if isinstance(node, ast.Call):
            name = self.resolve(node.func) or _dotted(node.func) or ""
            if name in _ROUNDING and node.args:
                if name == "round" and len(node.args) > 1:
                    return None
                got = self.clock(node.args[0], depth + 1)
                return (got[0], max(got)) if got is not None else None
            if name.startswith("time.") and name.endswith("_ns"):
                return 1e-9, 1e-9
            if name in _EPOCH_SECONDS or name.endswith(".timestamp"):
                return 1.0, 0.0
            return None
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Mult):
                for num, other in ((node.right, node.left), (node.left, node.right)):
                    c = _number(num)
                    if c is not None:
                        got = self.clock(other, depth + 1)
                        return (got[0] / c, got[1]) if got is not None else None
            elif isinstance(node.op, (ast.Div, ast.FloorDiv)):
                c = _number(node.right)
                got = self.clock(node.left, depth + 1)
                if c is not None and got is not None:
                    unit = got[0] * c
                    return unit, max(got[1], unit) if isinstance(node.op, ast.FloorDiv) \
                        else got[1]
        return None

    def _rounded_granularity(self, node: ast.expr) -> tuple[str | None, bool]:
        """(granularity, exact) of a clock number made whole (``int(x)``, ``x // c``): from
        the number's unit when known (``int(time.time() * 1000)``: millisecond; a
        millisecond count ``// 60000``: minute); else, for ``x // c`` / ``x / c`` with a
        divisor of a minute or more, ``x`` taken as seconds; else None."""
        got = self.clock(node)
        if got is not None:
            return _unit_granularity(max(got)), True
        if (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv))
                and (c := _number(node.right)) is not None and c >= 60):
            return _unit_granularity(c), False
        return None, False

    def _union(self, nodes: Iterable[ast.expr | None]) -> Taints:
        out: set[_Taint] = set()
        for n in nodes:
            out |= self.taint(n)
        return frozenset(out)

    def _new(self, node: ast.AST, kind: str, gran: str | None, origin: str) -> _Taint:
        return _Taint(Volatility(kind, gran, origin), getattr(node, "lineno", 1),
                      self.mod.column(node))

    def _call(self, node: ast.Call) -> Taints:
        func = node.func
        name = self.resolve(func)
        args_taint = self._union([*node.args, *(k.value for k in node.keywords)])
        if name is not None:
            if name in _SOURCES:
                kind, gran = _SOURCES[name]
                if name == "time.strftime" and node.args:
                    pass
                return args_taint | {self._new(node, kind, gran, _origin(node))}
            if name == "time.strftime":
                fmt = node.args[0] if node.args else None
                gran = (granularity_of_strftime(fmt.value)
                        if isinstance(fmt, ast.Constant) and isinstance(fmt.value, str) else None)
                return args_taint | {self._new(node, "timestamp", gran or "second", _origin(node))}
            if name.startswith(_RANDOM_MODULES) and not name.endswith(("seed", "Random",
                                                                     "SystemRandom")):
                # a random pick from a random value (random.sample(shuffled, 2)) is one
                # random value: the new one stands for its arguments' random taints
                return (frozenset(t for t in args_taint if t.vol.kind != "random")
                        | {self._new(node, "random", None, _origin(node))})
            if (name == "json.loads" and node.args and isinstance(node.args[0], ast.Call)
                    and self.resolve(node.args[0].func) == "json.dumps"):
                # json.loads(json.dumps(x)): a deep copy, its keys in x's order; the round
                # trip adds no key-order change of its own
                inner = node.args[0]
                return self._union([*inner.args, *(k.value for k in inner.keywords)])
            if name == "json.dumps":
                sort = any(k.arg == "sort_keys" and not (isinstance(k.value, ast.Constant)
                                                         and not k.value.value)
                           for k in node.keywords)
                arg0 = node.args[0] if node.args else None
                literal = isinstance(arg0, (ast.Dict, ast.List, ast.Constant, ast.Tuple))
                if not sort and arg0 is not None and not literal:
                    return args_taint | {self._new(node, "key-order", None, _origin(node))}
                return args_taint
            if name == "sorted":
                return frozenset(t for t in args_taint if t.vol.kind != "set-order")
            if name in _OPAQUE_BUILTINS:
                return _EMPTY
            if name in _ROUNDING and node.args:
                # int(time.time()) is epoch seconds: still volatile, at second granularity
                # (int(time.time() // 3600) at hour granularity); round(x, 3) keeps
                # the fraction it rounds to
                if name == "round" and len(node.args) > 1 and not (
                        isinstance(node.args[1], ast.Constant) and node.args[1].value in (0, None)):
                    return args_taint
                # int(time.time() * 1000) counts milliseconds
                gran, exact = self._rounded_granularity(node.args[0])
                return _coarsen(args_taint, gran or "second", exact=exact)
            if name in ("set", "frozenset") and node.args:
                return args_taint | {self._new(node, "set-order", None, _origin(node))}
            summary = self.mod.summary(name)
            if summary is None and name.startswith(("self.", "cls.")):
                summary = self.mod.summary(name.split(".", 1)[1])
            if summary is not None:
                return summary | args_taint
        if isinstance(func, ast.Attribute):
            recv = self.taint(func.value)
            attr = func.attr
            if attr == "strftime" and node.args:
                fmt = node.args[0]
                if isinstance(fmt, ast.Constant) and isinstance(fmt.value, str):
                    return _retag(recv, granularity_of_strftime(fmt.value)) | args_taint
                return recv | args_taint
            if attr == "date" and not node.args:
                return _retag(recv, "day")
            if attr == "replace" and node.keywords:
                zeroed = {k.arg for k in node.keywords
                          if isinstance(k.value, ast.Constant) and k.value.value == 0}
                gran = None
                for unit, coarse in (("microsecond", "second"), ("second", "minute"),
                                     ("minute", "hour"), ("hour", "day")):
                    if unit in zeroed:
                        gran = coarse
                return (_retag(recv, gran) if gran else recv) | args_taint
            if attr in ("keys", "values", "items", "copy", "get", "pop"):
                return recv
            if attr == "volatile":  # PromptBuilder.volatile(): declared, the builder checks it
                return _EMPTY
            return recv | args_taint
        return args_taint

    # ---------------------------------------------------------------- statements
    def run(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def assign(self, target: ast.expr, value: Taints, value_node: ast.expr | None) -> None:
        if isinstance(value_node, ast.Call) and isinstance(target, (ast.Name, ast.Attribute)):
            made = self.resolve(value_node.func) or ""
            if made.endswith("PromptBuilder") or "builder" in (_dotted(value_node.func) or
                                                               "").lower():
                name = _dotted(target)
                if name is not None:
                    self.mod.builders.add(name)
        if isinstance(target, (ast.Name, ast.Attribute)):
            items = self._dict_items(value_node) if value_node is not None else None
            dotted = _dotted(target)
            if dotted is not None:
                self.reordered.pop(dotted, None)  # a new value: its own order
                if items is not None:
                    self.dicts[dotted] = items
                else:
                    self.dicts.pop(dotted, None)
        if isinstance(target, ast.Name):
            self.env[target.id] = value
            clock = self.clock(value_node) if value_node is not None else None
            if clock is not None:
                self.units[target.id] = clock
            else:
                self.units.pop(target.id, None)
            if isinstance(value_node, ast.List):
                self.lists[target.id] = list(value_node.elts)
            else:
                self.lists.pop(target.id, None)
        elif isinstance(target, ast.Attribute):
            dotted = _dotted(target)
            if dotted is not None:
                self.env[dotted] = value
                if isinstance(value_node, ast.List):
                    self.lists[dotted] = list(value_node.elts)
        elif isinstance(target, ast.Subscript):
            base = _dotted(target.value)
            if base is not None:
                self.env[base] = self.lookup(base) | value
                key = target.slice
                if (base in self.dicts and value_node is not None
                        and isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    self.dicts[base].append((key.value, value_node))  # params["system"] = ...
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.assign(elt, value, None)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, value, None)

    def stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.ClassDef):
            # class attributes (SYSTEM_PROMPT = f"...") are read as self.X / cls.X / Class.X
            body = _Scope(self.mod, record=self.record)
            body.env = dict(self.env)
            body.run([s for s in stmt.body
                      if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))])
            for name, taint in body.env.items():
                if taint and name not in self.env:
                    self.mod.class_attrs[name] = self.mod.class_attrs.get(name, _EMPTY) | taint
            return
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return
        self.sinks(stmt)
        if isinstance(stmt, ast.Assign):
            t = self.taint(stmt.value)
            for target in stmt.targets:
                self.assign(target, t, stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.assign(stmt.target, self.taint(stmt.value), stmt.value)
        elif isinstance(stmt, ast.AugAssign):
            t = self.taint(stmt.value)
            base = _dotted(stmt.target) if not isinstance(stmt.target, ast.Subscript) else \
                _dotted(stmt.target.value)
            if base is not None:
                self.env[base] = self.lookup(base) | t
                if isinstance(stmt.value, ast.List) and base in self.lists:
                    self.lists[base].extend(stmt.value.elts)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self._mutating_call(stmt.value)
        elif isinstance(stmt, ast.Return):
            self.returns |= self.taint(stmt.value)
            if stmt.value is not None and self.returned is None:
                elts = self._elements(stmt.value)
                if elts is not None:
                    self.returned = elts
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            t = self.taint(stmt.iter)
            if self._is_set(stmt.iter):
                t = t | {self._new(stmt.iter, "set-order", None, f"iteration over {_origin(stmt.iter)}")}
            self.assign(stmt.target, t, None)
            self.run(stmt.body)
            self.run(stmt.orelse)
        elif isinstance(stmt, ast.While):
            self.run(stmt.body)
            self.run(stmt.orelse)
        elif isinstance(stmt, ast.If):
            self.run(stmt.body)
            self.run(stmt.orelse)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, self.taint(item.context_expr), None)
            self.run(stmt.body)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self.run(stmt.body)  # type: ignore[attr-defined]
            for handler in stmt.handlers:  # type: ignore[attr-defined]
                self.run(handler.body)
            self.run(stmt.orelse)  # type: ignore[attr-defined]
            self.run(stmt.finalbody)  # type: ignore[attr-defined]
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                self.run(case.body)

    def set_parameters(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """Give each parameter annotated as a set (``tags: set[str]``, ``frozenset``,
        ``typing.Set`` / ``AbstractSet``) the set-order taint a set literal has: iterating it
        (``", ".join(tags)``) gives an order that changes between processes."""
        args = fn.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if arg.annotation is not None and _unordered_set_annotation(arg.annotation):
                self.env[arg.arg] = frozenset(
                    {self._new(arg, "set-order", None, f"the set parameter {arg.arg!r}")})

    def _is_set(self, node: ast.expr) -> bool:
        if isinstance(node, (ast.Set, ast.SetComp)):
            return True
        if isinstance(node, ast.Call) and self.resolve(node.func) in ("set", "frozenset"):
            return True
        return any(t.vol.kind == "set-order" for t in self.taint(node))

    def _mutating_call(self, call: ast.Call) -> None:
        if self._reorders(call):
            return
        func = call.func
        if not isinstance(func, ast.Attribute):
            return
        base = _dotted(func.value)
        if base is None:
            return
        attr = func.attr
        if attr in ("append", "extend", "insert", "update", "add", "appendleft", "setdefault"):
            t = self._union([*call.args, *(k.value for k in call.keywords)])
            if t:
                self.env[base] = self.lookup(base) | t
            if attr == "update" and base in self.dicts:  # params.update(system=...)
                self.dicts[base].extend(self._call_items(call))
            if base in self.lists:
                if attr == "append" and call.args:
                    self.lists[base].append(call.args[0])
                elif attr == "insert" and len(call.args) == 2:
                    idx = call.args[0]
                    if isinstance(idx, ast.Constant) and idx.value == 0:
                        self.lists[base].insert(0, call.args[1])
                    else:
                        self.lists[base].append(call.args[1])
                elif attr == "extend" and call.args and isinstance(call.args[0], ast.List):
                    self.lists[base].extend(call.args[0].elts)
            elif attr == "append" and call.args and base not in self.env:
                self.lists[base] = [call.args[0]]

    def _reorders(self, call: ast.Call) -> bool:
        """``random.shuffle(x)`` (any random module's, ``from random import shuffle`` too) and
        ``x.sort(key=<a random value>)`` reorder ``x`` in place: taint ``x`` as a random value
        (its text, and its order where it is a message list). True when ``call`` is one."""
        name = self.resolve(call.func) or ""
        target: ast.expr | None = None
        recv = call.func.value if isinstance(call.func, ast.Attribute) else None
        seeded = (isinstance(recv, ast.Call) and bool(recv.args or recv.keywords)
                  and (self.resolve(recv.func) or "").endswith(".Random"))  # Random(seed)
        if (name.startswith(_RANDOM_MODULES) and name.rsplit(".", 1)[-1] == "shuffle"
                and call.args and not seeded):
            target = call.args[0]
        elif isinstance(call.func, ast.Attribute) and call.func.attr == "sort":
            key = next((k.value for k in call.keywords if k.arg == "key"), None)
            body = key.body if isinstance(key, ast.Lambda) else key
            if body is not None and any(t.vol.kind == "random" for t in self.taint(body)):
                target = call.func.value
        base = _dotted(target) if target is not None else None
        if base is None:
            return False
        t = frozenset({self._new(call, "random", None, _origin(call))})
        self.env[base] = self.lookup(base) | t
        self.reordered[base] = self.reordered.get(base, _EMPTY) | t
        return True

    def _reordered_in(self, node: ast.expr) -> Taints:
        """The in-place reorderings of the list that starts ``node`` (``x`` or ``x + [...]``)."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._reordered_in(node.left)
        dotted = _dotted(node)
        return self.reordered.get(dotted, _EMPTY) if dotted is not None else _EMPTY

    # ---------------------------------------------------------------- sinks
    def _calls_in(self, stmt: ast.stmt) -> Iterator[ast.Call | ast.Dict]:
        todo: list[ast.AST] = [stmt]
        while todo:
            node = todo.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                      ast.Lambda, ast.stmt)):
                    continue
                if isinstance(child, (ast.Call, ast.Dict)):
                    yield child
                todo.append(child)

    def _system_message(self, node: ast.Call | ast.Dict) -> None:
        """A system / developer message under construction is the start of the prefix."""
        role = _role_of(node)
        if role not in ("system", "developer"):
            return
        content: ast.expr | None = None
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=False):
                if isinstance(k, ast.Constant) and k.value in ("content", "text"):
                    content = v
        else:
            for kw in node.keywords:
                if kw.arg in ("content", "text"):
                    content = kw.value
        if content is not None:
            self._emit(self.taint(content), "content", f"a role={role} message", content)

    def sinks(self, stmt: ast.stmt) -> None:
        if not self.record:
            return
        for call in self._calls_in(stmt):
            self._system_message(call)
            if isinstance(call, ast.Dict):
                continue
            dotted = _dotted(call.func) or ""
            if dotted.rsplit(".", 1)[-1] in _SYSTEM_MESSAGE_CLASSES:
                for arg in [*call.args, *(k.value for k in call.keywords
                                          if k.arg in ("content", "text"))]:
                    self._emit(self.taint(arg), "content", dotted + "()", arg, call)
                continue
            resolved = self.resolve(call.func) or dotted
            is_api = bool(_SINK_CALL.search(dotted)) or resolved in _SINK_FUNCS
            keywords = self._keywords(call)
            if not is_api:
                for kwname, kwvalue in keywords:
                    if kwname in _AGENT_PROMPT_KWARGS:
                        self._emit(self.taint(kwvalue), f"{kwname}=", dotted + "()", kwvalue,
                                   call)
            is_builder = (isinstance(call.func, ast.Attribute)
                          and call.func.attr in _BUILDER_METHODS
                          and ("builder" in dotted.lower()
                               or _dotted(call.func.value) in self.mod.builders)
                          and not any(k.arg in ("dynamic", "dynamic_from")
                                      and not (isinstance(k.value, ast.Constant)
                                               and not k.value.value)
                                      for k in call.keywords))
            if not (is_api or is_builder):
                continue
            label = (dotted if len(dotted) <= 60 else "..." + dotted[-57:]) + "()"
            if is_builder:
                method = call.func.attr if isinstance(call.func, ast.Attribute) else "builder"
                for arg in [*call.args, *(k.value for k in call.keywords)]:
                    self._emit(self.taint(arg), f"{method}()", label, arg, call)
                continue
            outside = self._after_last_breakpoint(call, dict(keywords))
            for kwname, kwvalue in keywords:
                if kwname in _PREFIX_KWARGS:
                    if kwname == "system" and outside.get("system"):
                        system_elts = self._elements(kwvalue) or []
                        taint = self._union(e for i, e in enumerate(system_elts)
                                            if i not in outside["system"])
                    elif kwname == "prompt_cache_key":
                        # an attribute another method set (self.session_key = uuid4() in
                        # __init__) is one key per instance, the recommended shape: not a
                        # new key per request
                        cls, self.cls = self.cls, None
                        taint = self.taint(kwvalue)
                        self.cls = cls
                    else:
                        taint = self.taint(kwvalue)
                    self._emit(taint, f"{kwname}=", label, kwvalue, call)
                elif kwname in _LIST_KWARGS:
                    shuffled = self._reordered_in(kwvalue)
                    if shuffled:  # which message comes first changes per request
                        self._emit(shuffled, f"{kwname}[0]", label, kwvalue, call)
                    elts = self._elements(kwvalue)
                    if elts is None and isinstance(kwvalue, ast.Call):
                        # messages=build(datetime.now()): the list the helper returns, its
                        # parameters holding the call's arguments
                        got = self._returned_elements(kwvalue)
                        if got is not None:
                            inner, returned = got
                            for i, elt in enumerate(returned):
                                role = _role_of(elt)
                                if role in ("system", "developer") or (
                                        i == 0 and len(returned) >= 2):
                                    self._emit(inner.taint(elt), f"{kwname}[{i}]", label,
                                               kwvalue, call, covers=inner._anchor(elt))
                    if elts is None:
                        continue
                    for i, elt in enumerate(elts):
                        if i in outside.get(kwname, ()):
                            continue
                        role = _role_of(elt)
                        if role in ("system", "developer") or (i == 0 and len(elts) >= 2):
                            self._emit(self.taint(elt), f"{kwname}[{i}]", label,
                                       self._anchor(elt), call, elt)

    def _returned_elements(self, call: ast.Call) -> tuple[_Scope, list[ast.expr]] | None:
        """The list a module function (or a method called on ``self`` / ``cls``) returns, as
        element nodes with the scope to read their taint in: the function's body walked with
        each parameter holding the taint of the argument this ``call`` passes it. None when
        the callee is not one function of this module or returns no list literal."""
        name = self.resolve(call.func)
        if name is None:
            return None
        method = name.startswith(("self.", "cls."))
        key = name.split(".", 1)[1] if method else name
        defs = self.mod.funcs.get(key)
        if not defs or len(defs) != 1 or ("args:" + key) in self.mod.in_progress:
            return None
        fn = defs[0]
        params = [*fn.args.posonlyargs, *fn.args.args]
        if method and params:
            params = params[1:]
        inner = _Scope(self.mod, record=False)
        inner.cls = self.cls
        for param, arg in zip(params, call.args, strict=False):
            if isinstance(arg, ast.Starred):
                break
            inner.env[param.arg] = self.taint(arg)
        for kw in call.keywords:
            if kw.arg is not None:
                inner.env[kw.arg] = self.taint(kw.value)
        self.mod.in_progress.add("args:" + key)
        try:
            inner.run(fn.body)
        finally:
            self.mod.in_progress.discard("args:" + key)
        return (inner, inner.returned) if inner.returned is not None else None

    def _breakpoints(self, node: ast.expr | None) -> list[bool | None] | None:
        """For each block of a ``tools=`` / ``system=`` / ``messages=`` value: True when it
        carries a ``cache_control`` marker, False when it visibly carries none, None when it
        cannot be told (a name, ``*history``); None for the whole value when its blocks are
        not known. A string (or f-string) is one block with no marker; an absent value, none."""
        if node is None:
            return []
        if isinstance(node, (ast.Constant, ast.JoinedStr)):
            return [False]
        elts = self._elements(node)
        if elts is None:
            return None
        return [self._marked(e) for e in elts]

    def _marked(self, elt: ast.expr) -> bool | None:
        """Whether one block (a dict literal, a call, a string) holds a ``cache_control``
        marker: True when one is visible anywhere in it; False only when the whole block is
        visible literal text and structure with none (string constants, f-strings, dict and
        list literals, a list literal named in this scope, a known block constructor such as
        ``dict(...)`` / ``TextBlockParam(...)``); None (not known: it may carry one) for a
        ``*spread``, a ``{**base}``, and any name, attribute, subscript or other call in it
        (``"content": history_blocks``, ``content=user_blocks(q)``). The string fields of a
        block (``text``, ``type``, ``role``...) cannot hold a marker and are not looked into."""
        unknown = False
        todo: list[ast.AST] = [elt]
        while todo:
            n = todo.pop()
            if isinstance(n, (ast.Constant, ast.JoinedStr)):
                continue  # text: no marker
            if isinstance(n, ast.Dict):
                for k, v in zip(n.keys, n.values, strict=False):
                    if k is None:
                        unknown = True  # {**base}: what it spreads is not known
                        continue
                    if isinstance(k, ast.Constant) and k.value == "cache_control":
                        if not (isinstance(v, ast.Constant) and v.value is None):
                            return True
                        continue
                    if not (isinstance(k, ast.Constant) and k.value in _TEXT_FIELDS):
                        todo.append(v)
            elif isinstance(n, (ast.List, ast.Tuple, ast.Set)):
                todo.extend(n.elts)
            elif isinstance(n, ast.Name) and n.id in self.lists:
                todo.extend(self.lists[n.id])
            elif isinstance(n, ast.Call):
                if any(kw.arg == "cache_control" and not (isinstance(kw.value, ast.Constant)
                                                          and kw.value.value is None)
                       for kw in n.keywords):
                    return True
                dotted = _dotted(n.func) or ""
                last = dotted.rsplit(".", 1)[-1]
                if (isinstance(n.func, ast.Attribute) and n.func.attr in _PASS_THROUGH_METHODS
                        and isinstance(n.func.value, (ast.Constant, ast.JoinedStr))):
                    continue  # "...".format(x): text
                if dotted == "dict" or last.endswith(_BLOCK_CONSTRUCTOR_SUFFIXES):
                    for kw in n.keywords:
                        if kw.arg is None:
                            todo.append(kw.value)
                        elif kw.arg not in _TEXT_FIELDS:
                            todo.append(kw.value)
                    todo.extend(n.args)
                else:
                    unknown = True  # a helper: it may add a marker
            elif isinstance(n, (ast.BinOp, ast.IfExp, ast.BoolOp)):
                todo.extend(c for c in ast.iter_child_nodes(n) if isinstance(c, ast.expr))
            else:
                unknown = True  # a name, attribute, subscript, *spread, comprehension...
        return None if unknown else False

    def _after_last_breakpoint(self, call: ast.Call,
                               keywords: dict[str, ast.expr]) -> dict[str, set[int]]:
        """Anthropic Messages calls: the indexes of the ``system=`` / ``messages=`` blocks
        that certainly sit after the request's last ``cache_control`` breakpoint (outside the
        cached prefix, as the request path reports them). Only when every block after one is
        visible and unmarked, an earlier block is marked and the call has no top-level
        ``cache_control=`` (automatic caching ends at the last block); else nothing is
        excluded (a request with no breakpoint at all is reported as before)."""
        dotted = _dotted(call.func) or ""
        if (not re.search(r"(?:^|\.)messages\.(?:create|stream|parse)$", dotted)
                or "cache_control" in keywords):
            return {}
        order: list[tuple[str, int, bool | None]] = []
        for kw in ("tools", "system", "messages"):
            marks = self._breakpoints(keywords.get(kw))
            if marks is None:
                marks = [None]  # not known: may hold a breakpoint anywhere
                kw = ""
            order.extend((kw, i, m) for i, m in enumerate(marks))
        out: dict[str, set[int]] = {}
        seen_marker = False
        for pos, (kw, i, mark) in enumerate(order):
            if (seen_marker and kw in ("system", "messages") and mark is False
                    and all(m is False for _, _, m in order[pos + 1:])):
                out.setdefault(kw, set()).add(i)
            seen_marker = seen_marker or mark is True
        return out

    def _keywords(self, call: ast.Call) -> list[tuple[str, ast.expr]]:
        """The call's keyword arguments, a ``**params`` resolved to the items of the dict
        literal or ``dict(...)`` call ``params`` was assigned in this scope (the last value of
        a key wins, as in Python); a ``**`` of anything else is skipped."""
        out: dict[str, ast.expr] = {}
        for kw in call.keywords:
            if kw.arg is not None:
                out[kw.arg] = kw.value
            else:
                out.update(self._dict_items(kw.value) or ())
        return list(out.items())

    def _dict_items(self, node: ast.expr | None,
                    depth: int = 0) -> list[tuple[str, ast.expr]] | None:
        """The (string key, value node) items of a dict literal, a ``dict(...)`` call (its
        keywords, and a mapping argument or ``**`` it unpacks) or a name bound to one; None
        when ``node`` is none of these. Keys that are not string constants are skipped."""
        if node is None or depth > 20:
            return None
        if isinstance(node, ast.Dict):
            items: list[tuple[str, ast.expr]] = []
            for k, v in zip(node.keys, node.values, strict=False):
                if k is None:  # {**base, ...}
                    items.extend(self._dict_items(v, depth + 1) or ())
                elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                    items.append((k.value, v))
            return items
        if isinstance(node, ast.Call):
            if self.resolve(node.func) != "dict":
                return None
            return self._call_items(node, depth)
        dotted = _dotted(node)
        if dotted is not None and dotted in self.dicts:
            return list(self.dicts[dotted])
        return None

    def _call_items(self, call: ast.Call, depth: int = 0) -> list[tuple[str, ast.expr]]:
        """The items ``dict(...)`` / ``d.update(...)`` gets: its first argument's (a dict it
        can read), then its keywords."""
        items: list[tuple[str, ast.expr]] = []
        for a in call.args[:1]:
            items.extend(self._dict_items(a, depth + 1) or ())
        for kw in call.keywords:
            if kw.arg is None:
                items.extend(self._dict_items(kw.value, depth + 1) or ())
            else:
                items.append((kw.arg, kw.value))
        return items

    def _elements(self, node: ast.expr) -> list[ast.expr] | None:
        if isinstance(node, (ast.List, ast.Tuple)):
            return list(node.elts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self._elements(node.left)  # [system_msg] + history: the head is known
            if left is None:
                return None
            right = self._elements(node.right)
            return left + (right if right is not None else [])
        dotted = _dotted(node)
        if dotted is not None and dotted in self.lists:
            return self.lists[dotted]
        return None

    def _anchor(self, elt: ast.expr) -> ast.expr:
        """The node whose line a message element's flow is reported at: the content of a
        system / developer message (where :meth:`_system_message` reports the same sink),
        else the element itself."""
        content: ast.expr | None = None
        if isinstance(elt, ast.Dict) and _role_of(elt) in ("system", "developer"):
            for k, v in zip(elt.keys, elt.values, strict=False):
                if isinstance(k, ast.Constant) and k.value in ("content", "text"):
                    content = v
        elif isinstance(elt, (ast.Name, ast.Attribute)):
            # a name bound to a system message dict (system_msg = {"role": "system", ...})
            items = dict(self._dict_items(elt) or ())
            role = items.get("role")
            if isinstance(role, ast.Constant) and role.value in ("system", "developer"):
                content = items.get("content", items.get("text"))
        elif isinstance(elt, ast.Call):
            dotted = _dotted(elt.func) or ""
            if dotted.rsplit(".", 1)[-1] in _SYSTEM_MESSAGE_CLASSES:
                content = next((a for a in [*elt.args, *(k.value for k in elt.keywords
                                                         if k.arg in ("content", "text"))]
                                if self.taint(a)), None)
        return content if content is not None else elt

    def _emit(self, taints: Taints, sink: str, call: str, node: ast.expr,
              call_node: ast.expr | None = None, element: ast.expr | None = None,
              covers: ast.expr | None = None) -> None:
        # One flow per volatile origin, sink line and API call: an inline suppression on one
        # call's line silences that call only, the origin's other sinks are still reported. Besides
        # the argument's own line, a suppression may sit on the first line of the call or of
        # the message element that holds the argument (a call or a dict written over lines).
        sink_line = getattr(node, "lineno", 1)
        also = tuple(sorted({line for line in (getattr(call_node, "lineno", None),
                                               getattr(element, "lineno", None))
                             if isinstance(line, int) and line != sink_line}))
        call_line = getattr(call_node, "lineno", None)
        # the message names the sending call only when the argument was written outside it
        # (a message dict bound to a name, a helper's list): an argument of a call written
        # over several lines is the call's own, "(line 13)" says where it is
        call_end = getattr(call_node, "end_lineno", None) or call_line
        shown_call = (call_line if isinstance(call_line, int) and isinstance(call_end, int)
                      and not call_line <= sink_line <= call_end else None)
        for t in taints:
            key = (t.line, t.col, t.vol.kind, sink_line, sink == "prompt_cache_key=",
                   call_line if isinstance(call_line, int) else None)
            if key not in self.mod.flows:
                self.mod.flows[key] = Flow(t.vol, t.line, t.col, sink, call, sink_line, also,
                                           shown_call)
            if covers is not None:  # the helper's message this call sends
                self.mod.covered.add((t.line, t.col, t.vol.kind, getattr(covers, "lineno", 1),
                                      sink == "prompt_cache_key="))


#: Annotations of a set-valued parameter (its iteration order is not stable).
_SET_TYPES = frozenset({"set", "frozenset", "Set", "FrozenSet", "AbstractSet", "MutableSet"})
#: Element types whose hash is the same in every process (no PYTHONHASHSEED salt): a set of
#: them iterates in the same order on every run, given the same insertions.
_HASH_STABLE_TYPES = frozenset({"int", "float", "bool", "complex"})


def _hash_stable_const(node: ast.expr) -> bool:
    """A number or bool constant, or a tuple of them (``{3, 1, 2}``: a set of these iterates
    in one order in every process; str and bytes hashes are salted per process, and None's
    follows its address before Python 3.12)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float | complex)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return _hash_stable_const(node.operand)  # {-1, 0, 1}
    if isinstance(node, ast.Tuple):
        return all(_hash_stable_const(e) for e in node.elts)
    return False


def _hash_stable_type(node: ast.expr) -> bool:
    """An annotation of hash-stable elements: ``int``, ``float``, ``bool``, ``complex``, or a
    ``tuple[...]`` of them."""
    if isinstance(node, ast.Subscript):
        if (_dotted(node.value) or "").rsplit(".", 1)[-1] not in ("tuple", "Tuple"):
            return False
        sl = node.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        return all((isinstance(e, ast.Constant) and e.value is Ellipsis)
                   or _hash_stable_type(e) for e in elts)
    return (_dotted(node) or "").rsplit(".", 1)[-1] in _HASH_STABLE_TYPES


def _unordered_set_annotation(ann: ast.expr) -> bool:
    """Whether a parameter annotation says a set whose iteration order may change between
    processes: ``set[str]``, bare ``set`` / ``frozenset``, ``typing.Set`` / ``AbstractSet``,
    also inside ``X | None``, ``Optional[X]``, ``Union[...]`` and a quoted annotation; not a
    set of ints, floats, bools or tuples of them (their hashes are not salted)."""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return False
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return _unordered_set_annotation(ann.left) or _unordered_set_annotation(ann.right)
    base = ann.value if isinstance(ann, ast.Subscript) else ann
    name = (_dotted(base) or "").rsplit(".", 1)[-1]
    if isinstance(ann, ast.Subscript) and name in ("Optional", "Union"):
        sl = ann.slice
        return any(_unordered_set_annotation(e)
                   for e in (sl.elts if isinstance(sl, ast.Tuple) else [sl]))
    if name not in _SET_TYPES:
        return False
    return not (isinstance(ann, ast.Subscript) and _hash_stable_type(ann.slice))


def _role_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=False):
            if isinstance(k, ast.Constant) and k.value == "role" and isinstance(v, ast.Constant):
                return str(v.value)
    if isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg == "role" and isinstance(kw.value, ast.Constant):
                return str(kw.value.value)
    return None


_NEWLINE = re.compile(r"\r\n|\r|\n")  # Python's line ends (a form feed is not one)


def _char_column(line: str, byte_offset: int) -> int:
    """1-based character column of the UTF-8 byte offset ``byte_offset`` in ``line``."""
    return len(line.encode("utf-8", "surrogatepass")[:byte_offset]
               .decode("utf-8", "replace")) + 1


def _functions(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node


def _method_owners(tree: ast.AST) -> dict[int, str]:
    """``id(function node)`` -> the name of the class it is a method of (defined directly in
    the class body)."""
    out: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[id(item)] = node.name
    return out


def _aliases(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    out[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def analyze(tree: ast.Module, text: str | None = None) -> list[Flow]:
    """Every flow of a volatile value into a cached-prefix argument in ``tree``.

    ``text`` is the source ``tree`` was parsed from; with it, columns count characters (ast's
    offsets count UTF-8 bytes, which differ past any non-ASCII character on the line);
    without it they are ast's byte offsets plus one.

    Module-level code runs first (its names are the globals every function sees); each
    function's return taint is computed on first call (memoised); then every function body is
    walked once more, recording flows into sinks.
    """
    mod = _Module(aliases=_aliases(tree),
                  lines=_NEWLINE.split(text) if text is not None else None)
    funcs = list(_functions(tree))
    for name, fn in funcs:
        mod.funcs.setdefault(name, []).append(fn)
    module_scope = _Scope(mod, record=True, is_module=True)
    module_scope.run(tree.body)
    mod.globals = dict(module_scope.env)
    owner = _method_owners(tree)
    for _ in range(2):  # self.b = f"{self.a}" in one method, self.a set in another
        for _, fn in funcs:
            cls = owner.get(id(fn))
            if cls is None:
                continue
            scope = _Scope(mod, record=False)
            scope.cls = cls
            scope.run(fn.body)
            for key, taint in scope.env.items():
                if taint and key.startswith("self.") and key.count(".") == 1:
                    slot = (cls, key[5:])
                    mod.self_attrs[slot] = mod.self_attrs.get(slot, _EMPTY) | taint
    for _, fn in funcs:
        scope = _Scope(mod, record=True)
        scope.cls = owner.get(id(fn))
        scope.set_parameters(fn)
        scope.run(fn.body)
    # A system message seen on its own (built before the call, appended to a list) is
    # reported through the API calls that send it when there are any: each such call is a
    # flow of its own, so that a suppression on one call's line silences that call only.
    # The same holds for a message a helper returns into a call's list
    # (messages=[system_message(), ...]): its clock reaches the call, so the call reports it.
    sent = {key[:5] for key in mod.flows if key[5] is not None} | mod.covered
    reached = {(k[0], k[1], k[2], k[4]) for k in mod.flows if k[5] is not None}
    flows = [f for key, f in mod.flows.items() if key[5] is not None or (
        key[:5] not in sent and (key[0], key[1], key[2], key[4]) not in reached)]
    return sorted(flows, key=lambda f: (f.line, f.col, f.sink_line, f.sink))


class PythonSource:
    """``.py`` files."""

    name = "python"
    suffixes: tuple[str, ...] = (".py", ".pyi")

    def load(self, file: str, text: str, options: LoadOptions) -> Document:
        """See :class:`promptcache.lint.sources.base.Source`."""
        try:
            tree = ast.parse(text, filename=file)
        except SyntaxError as exc:
            raise InputError(file, f"Python syntax error at line {exc.lineno}: {exc.msg}") from None
        except (ValueError, RecursionError, MemoryError) as exc:
            raise InputError(file, f"cannot parse Python: {type(exc).__name__}") from None
        doc = Document(file, suppressions=parse_suppressions(text))
        try:
            flows = analyze(tree, text)
        except RecursionError:
            raise InputError(file, "Python source nested too deeply to analyse") from None
        if flows:
            doc.contexts.append(PythonContext(file, flows))
        return doc


SOURCE = PythonSource()
