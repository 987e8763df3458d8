"""Turn template text into :class:`~promptcache.lint.engine.Piece` runs (static text + holes).

Three syntaxes:

* Jinja2 — parsed with jinja2's own lexer and parser (``Environment.lex`` / ``parse``), never
  rendered or executed. Each ``{{ ... }}`` hole's expression is parsed into a jinja2 AST and
  classified: names and attributes by :func:`~promptcache.lint.volatile.classify_name`
  (``current_date``, ``request_id``), calls of ``now()`` / ``utcnow()`` / ``today()``, the
  ``random`` / ``shuffle`` filters, ``strftime``-style formats (granularity from the format),
  and names bound by ``{% set x = now() %}``.
* Placeholder syntaxes that are not Jinja (Go templates ``{{ .Date }}``, Semantic Kernel
  ``{{$time}}``, Handlebars/Mustache ``{{name}}``), recognised by regex.
* ``str.format`` templates (``{current_date}``), recognised by regex.

Positions come from a caller-supplied ``position(offset) -> (line, col)`` so templates embedded
in YAML / TOML strings still report file coordinates.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from jinja2 import Environment, nodes
from jinja2.exceptions import TemplateSyntaxError

from promptcache.lint.engine import Piece, Volatility
from promptcache.lint.volatile import classify_name, granularity_of_strftime

__all__ = ["FORMAT_FIELD", "JinjaSyntaxError", "jinja_pieces", "pieces_for", "regex_pieces"]

Position = Callable[[int], tuple[int, int]]

_ENV = Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols", "jinja2.ext.i18n"])
_CLOCK_CALLS = {"now": "second", "utcnow": "second", "today": "day", "time": "second",
                "timestamp": "second", "uuid4": None, "uuid1": None, "uuid": None,
                "random": None, "randint": None, "choice": None, "token_hex": None}
_RANDOM_FILTERS = frozenset({"random", "shuffle"})
_FORMAT_FILTERS = frozenset({"strftime", "date", "datetimeformat", "format_datetime", "dateformat",
                             "format_date"})
_PLACEHOLDER = re.compile(r"\{\{\s*[.$]?\s*([A-Za-z_][\w.]*)\s*\}\}")
FORMAT_FIELD = re.compile(r"(?<!\{)\{([A-Za-z_]\w*(?:\.\w+|\[\w+\])*)(?:![rsa])?(?::[^{}]*)?\}(?!\})")


class JinjaSyntaxError(ValueError):
    """A Jinja template does not parse. ``lineno`` is 1-based within the template text."""

    def __init__(self, message: str, lineno: int | None) -> None:
        self.lineno = lineno
        super().__init__(message)


def line_position(text: str, base_line: int = 1) -> Position:
    """``offset -> (line, col)`` over ``text`` (1-based; ``base_line`` is the first line)."""
    starts = [0]
    i = text.find("\n")
    while i != -1:
        starts.append(i + 1)
        i = text.find("\n", i + 1)

    def pos(offset: int) -> tuple[int, int]:
        import bisect

        k = bisect.bisect_right(starts, offset) - 1
        return base_line + k, offset - starts[k] + 1

    return pos


# ------------------------------------------------------------------------ classification
def _vol_from_name(name: str, origin: str) -> Volatility | None:
    got = classify_name(name)
    if got is None:
        return None
    return Volatility(got[0], got[1], origin)


def _const_str(node: Any) -> str | None:
    if isinstance(node, nodes.Const) and isinstance(node.value, str):
        return node.value
    return None


def classify_expr(expr: nodes.Node, origin: str,
                  bound: dict[str, Volatility]) -> Volatility | None:
    """What makes a Jinja expression vary between renders (None if nothing known)."""
    found: Volatility | None = None
    fmt_gran: str | None = None
    for node in [expr, *expr.find_all(nodes.Node)]:
        vol: Volatility | None = None
        if isinstance(node, nodes.Name):
            vol = bound.get(node.name) or _vol_from_name(node.name, origin)
        elif isinstance(node, nodes.Getattr):
            if node.attr in ("strftime", "isoformat", "date", "time", "format"):
                vol = None
            else:
                vol = _vol_from_name(node.attr, origin)
        elif isinstance(node, nodes.Call):
            fn = node.node
            fname = fn.name if isinstance(fn, nodes.Name) else (
                fn.attr if isinstance(fn, nodes.Getattr) else None)
            if fname in _CLOCK_CALLS:
                gran = _CLOCK_CALLS[fname]
                if fname.startswith("uuid") or fname == "token_hex":
                    vol = Volatility("id", None, origin)
                elif fname in ("random", "randint", "choice"):
                    vol = Volatility("random", None, origin)
                else:
                    vol = Volatility("timestamp", gran, origin)
            if fname == "strftime" and node.args:
                fmt = _const_str(node.args[0])
                if fmt is not None:
                    fmt_gran = granularity_of_strftime(fmt)
        elif isinstance(node, nodes.Filter):
            if node.name in _RANDOM_FILTERS:
                vol = Volatility("random", None, origin)
            elif node.name in _FORMAT_FILTERS and node.args:
                fmt = _const_str(node.args[0])
                if fmt is not None:
                    fmt_gran = granularity_of_strftime(fmt)
        if vol is not None and found is None:
            found = vol
    if found is not None and found.kind == "timestamp" and fmt_gran is not None:
        found = Volatility("timestamp", fmt_gran, origin)
    return found


# ------------------------------------------------------------------------ jinja
def _bound_names(tree: nodes.Template) -> dict[str, Volatility]:
    bound: dict[str, Volatility] = {}
    for assign in tree.find_all(nodes.Assign):
        target = assign.target
        if isinstance(target, nodes.Name):
            vol = classify_expr(assign.node, f"{{% set {target.name} %}}", bound)
            if vol is not None:
                bound[target.name] = vol
    return bound


def jinja_pieces(source: str, position: Position) -> list[Piece]:
    """Pieces of a Jinja template (static ``data`` runs and ``{{ }}`` holes).

    Raises:
        JinjaSyntaxError: the template does not parse (jinja2's message and line).
    """
    try:
        tree = _ENV.parse(source)
        tokens = list(_ENV.lex(source))
    except TemplateSyntaxError as exc:
        raise JinjaSyntaxError(exc.message or "syntax error", exc.lineno) from None
    except RecursionError:
        raise JinjaSyntaxError("template nested too deeply", None) from None
    bound = _bound_names(tree)
    pieces: list[Piece] = []
    pos = 0
    hole_start: int | None = None
    for _lineno, ttype, value in tokens:
        at = source.find(value, pos) if value else pos
        if at < 0:
            at = pos
        if ttype == "data":
            if value:
                line, col = position(at)
                pieces.append(Piece("text", value, line, col))
        elif ttype == "variable_begin":
            hole_start = at
        elif ttype == "variable_end" and hole_start is not None:
            hole_src = source[hole_start:at + len(value)]
            vol: Volatility | None = None
            try:
                expr_tree = _ENV.parse(hole_src)
                outs = list(expr_tree.find_all(nodes.Output))
                if outs and outs[0].nodes:
                    vol = classify_expr(outs[0].nodes[0], hole_src.strip(), bound)
            except (TemplateSyntaxError, RecursionError):
                vol = None
            line, col = position(hole_start)
            pieces.append(Piece("hole", hole_src, line, col, vol))
            hole_start = None
        pos = at + len(value)
    return pieces


# ------------------------------------------------------------------------ regexes
def regex_pieces(source: str, position: Position, pattern: re.Pattern[str],
                 skip: Callable[[int], bool] | None = None) -> list[Piece]:
    """Pieces of a placeholder template whose holes match ``pattern`` (group 1 = the name);
    a match whose start offset ``skip`` accepts stays text (not a hole)."""
    pieces: list[Piece] = []
    last = 0
    for m in pattern.finditer(source):
        if skip is not None and skip(m.start()):
            continue
        if m.start() > last:
            line, col = position(last)
            pieces.append(Piece("text", source[last:m.start()], line, col))
        name = m.group(1)
        tail = name.replace("[", ".").replace("]", "").split(".")
        vol = None
        for part in reversed(tail):
            vol = _vol_from_name(part, m.group(0))
            if vol is not None:
                break
        line, col = position(m.start())
        pieces.append(Piece("hole", m.group(0), line, col, vol))
        last = m.end()
    if last < len(source):
        line, col = position(last)
        pieces.append(Piece("text", source[last:], line, col))
    return pieces


def pieces_for(source: str, position: Position, *, prefer: str = "auto",
               strict_jinja: bool = False) -> tuple[str, list[Piece]]:
    """Detect the template syntax of ``source`` and split it into pieces.

    Args:
        prefer: ``"jinja"`` to try Jinja first whatever the text looks like; ``"auto"``.
        strict_jinja: re-raise Jinja syntax errors instead of falling back to placeholders.

    Returns:
        ``(syntax, pieces)`` with syntax ``"jinja"``, ``"placeholder"``, ``"format"`` or
        ``"text"``.

    Raises:
        JinjaSyntaxError: only with ``strict_jinja``.
    """
    if prefer == "jinja" or "{{" in source or "{%" in source:
        try:
            return "jinja", jinja_pieces(source, position)
        except JinjaSyntaxError:
            if strict_jinja:
                raise
        if "{{" in source:
            return "placeholder", regex_pieces(source, position, _PLACEHOLDER)
    if "{" in source and FORMAT_FIELD.search(source):
        return "format", regex_pieces(source, position, FORMAT_FIELD)
    line, col = position(0)
    return "text", [Piece("text", source, line, col)] if source else []
