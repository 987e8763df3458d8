"""Turn template text into :class:`~promptcache.lint.engine.Piece` runs (static text + holes).

Three syntaxes:

* Jinja2 — parsed with jinja2's own lexer and parser (``Environment.lex`` / ``parse``), never
  rendered or executed. Each ``{{ ... }}`` hole's expression is parsed into a jinja2 AST and
  classified: names and attributes by :func:`~promptcache.lint.volatile.classify_name`
  (``current_date``, ``request_id``), calls of ``now()`` / ``utcnow()`` / ``today()``, the
  ``random`` / ``shuffle`` filters, ``strftime``-style formats (granularity from the format),
  and names bound by ``{% set x = now() %}``; ``request.id`` is read as ``request_id`` and
  ``"now"|strftime(...)`` as the clock. With a :class:`TemplateLoader` (Jinja files),
  ``{% include %}`` / ``{% import %}`` / ``{% from ... import %}`` are followed (parsed, never
  rendered): an included template's first volatile value is a hole at the include site, a
  macro whose output is volatile makes the holes calling it volatile. A macro's own body is
  not output where it is defined. ``{% extends %}`` is followed too: the pieces are the
  layout's, at the layout file's lines (:class:`FilePiece`), with each ``{% block %}``
  replaced by the extending template's definition, in rendered order. A hole holding an
  includer's ``{% set %}`` value names that ``{% set %}``'s file and line.
* Placeholder syntaxes that are not Jinja (Go templates ``{{ .Date }}``, Semantic Kernel
  ``{{$time}}``, Handlebars/Mustache ``{{name}}``), recognised by regex.
* ``str.format`` templates (``{current_date}``), recognised by regex.

Positions come from a caller-supplied ``position(offset) -> (line, col)`` so templates embedded
in YAML / TOML strings still report file coordinates.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePath, PureWindowsPath
from typing import Any

from jinja2 import Environment, nodes
from jinja2.exceptions import TemplateSyntaxError

from promptcache.lint.engine import Piece, Rule, TemplateContext, Volatility
from promptcache.lint.finding import Finding, Severity
from promptcache.lint.volatile import classify_name, granularity_of_strftime

__all__ = ["FORMAT_FIELD", "FilePiece", "JinjaSyntaxError", "LayoutTemplateContext",
           "TemplateLoader", "jinja_pieces", "pieces_for", "regex_pieces"]

Position = Callable[[int], tuple[int, int]]

_ENV = Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols", "jinja2.ext.i18n"])
_CLOCK_CALLS = {"now": "second", "utcnow": "second", "today": "day", "time": "second",
                "timestamp": "second", "uuid4": None, "uuid1": None, "uuid": None,
                "random": None, "randint": None, "choice": None, "token_hex": None}
_RANDOM_FILTERS = frozenset({"random", "shuffle"})
#: String constants a date filter reads as the current time (``{{ "now"|strftime(...) }}``).
_CLOCK_WORDS = frozenset({"now", "today", "utcnow"})
_FORMAT_FILTERS = frozenset({"strftime", "date", "datetimeformat", "format_datetime", "dateformat",
                             "format_date"})
_PLACEHOLDER = re.compile(r"\{\{\s*[.$]?\s*([A-Za-z_][\w.]*)\s*\}\}")
FORMAT_FIELD = re.compile(r"(?<!\{)\{([A-Za-z_]\w*(?:\.\w+|\[\w+\])*)(?:![rsa])?(?::[^{}]*)?\}(?!\})")


class JinjaSyntaxError(ValueError):
    """A Jinja template does not parse. ``lineno`` is 1-based within the template text."""

    def __init__(self, message: str, lineno: int | None) -> None:
        self.lineno = lineno
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class FilePiece(Piece):
    """A :class:`~promptcache.lint.engine.Piece` from another file than the linted one: the
    text of a layout the template ``{% extends %}``. ``line`` / ``col`` are in ``file``
    (the layout's path as the template names it, joined to the linted file's folder)."""

    file: str = ""


@dataclass(eq=False)
class LayoutTemplateContext(TemplateContext):
    """A :class:`~promptcache.lint.engine.TemplateContext` whose pieces may come from other
    files (:class:`FilePiece`, a layout's own text): a finding at such a piece names that
    file and its line. The piece is the first one at or after the previous finding's piece
    (rules report pieces in order) at ``line:col`` whose text is the finding's
    ``variable`` detail (when given)."""

    _cursor: int = field(default=0, init=False, repr=False)

    def finding(self, rule: type[Rule] | Rule, message: str | None = None, *, line: int,
                col: int, severity: Severity | None = None, fix: str | None = None,
                **details: Any) -> Finding:
        """A finding of ``rule`` at ``line:col`` of the file the piece there comes from."""
        variable = details.get("variable")
        found = super().finding(rule, message, line=line, col=col, severity=severity, fix=fix,
                                **details)
        n = len(self.pieces)
        for i in [*range(self._cursor, n), *range(0, min(self._cursor, n))]:
            piece = self.pieces[i]
            if piece.line == line and piece.col == col and (
                    variable is None or piece.text.strip() == variable):
                self._cursor = i + 1
                if isinstance(piece, FilePiece) and piece.file and piece.file != self.file:
                    return found.with_location(piece.file, line, col)
                break
        return found


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


def _vol_from_part(part: str, origin: str) -> Volatility | None:
    """:func:`_vol_from_name` for one part of a dotted name read alone (``request.id`` ->
    ``id``...), except a ``uid`` of an owner the whole name did not call a user (``card.uid``
    is the card's id, not a per-user value; review 25)."""
    if part.lower() == "uid":
        return None
    return _vol_from_name(part, origin)


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
            dotted = _dotted(node)
            if dotted is not None and dotted in bound:  # m.stamp: an imported macro
                vol = bound[dotted]
            elif node.attr in ("strftime", "isoformat", "date", "time", "format"):
                vol = None
            else:
                # request.id reads as request_id, user.email as user_email (classify_name)
                vol = ((_vol_from_name(dotted, origin) if dotted is not None else None)
                       or _vol_from_part(node.attr, origin))
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
            elif node.name in _FORMAT_FILTERS:
                if node.args:
                    fmt = _const_str(node.args[0])
                    if fmt is not None:
                        fmt_gran = granularity_of_strftime(fmt)
                if _const_str(node.node) in _CLOCK_WORDS:  # {{ "now"|strftime("%H:%M") }}
                    vol = Volatility("timestamp", "second", origin)
        if vol is not None and found is None:
            found = vol
    if found is not None and found.kind == "timestamp" and fmt_gran is not None:
        found = Volatility("timestamp", fmt_gran, origin)
    return found


def _dotted(node: nodes.Node) -> str | None:
    """``"request.id"`` for ``request.id`` (a chain of attributes on a name), else None."""
    parts: list[str] = []
    while isinstance(node, nodes.Getattr):
        parts.append(node.attr)
        node = node.node
    if not isinstance(node, nodes.Name):
        return None
    parts.append(node.name)
    return ".".join(reversed(parts))


# ------------------------------------------------------------------------ includes
#: Largest template file read through ``{% include %}`` / ``{% import %}``.
_MAX_INCLUDED_BYTES = 2_000_000
#: Deepest chain of includes / imports followed.
_MAX_INCLUDE_DEPTH = 16
#: Most includes / imports followed for one linted template (all levels together).
_MAX_INCLUDE_VISITS = 500


class _Run:
    """What the loaders of one linted template share: parsed files, per-file results (an
    included file is analysed once per set of inherited names it reads, not once per include
    site) and the include visit budget."""

    __slots__ = ("cache", "first", "macros", "visits")

    def __init__(self, cache: dict[Path, tuple[str, nodes.Template] | None] | None) -> None:
        self.cache: dict[Path, tuple[str, nodes.Template] | None] = (
            cache if cache is not None else {})
        #: (path, inherited volatile names) -> its first volatile value (no origin prefix)
        self.first: dict[tuple[Path, frozenset[tuple[str, Volatility]]], Volatility | None] = {}
        #: path -> its volatile macros
        self.macros: dict[Path, dict[str, Volatility]] = {}
        self.visits = 0


class TemplateLoader:
    """Reads the templates a Jinja template includes or imports, for the linter only (parsed,
    never rendered). Names resolve relative to the including template's folder.

    Only files under ``root`` are read: an absolute name (``/etc/passwd``) or a name that
    resolves outside ``root`` (``../../x``, a symlink out of it) is not followed, with a note
    naming the include (never the file's content). Problems (a missing file, an include
    cycle, a symlink loop, a name that is not a string literal, a syntax error in the included
    file, more than 500 includes followed) never raise: each adds one sentence to ``notes``
    and the include is not followed.

    Args:
        folder: the folder of the template being linted.
        notes: where the notes go (shared by the loaders of nested includes).
        stack: resolved paths of the templates being read, outermost (the linted template
            itself) first: the cycle guard.
        cache: resolved path -> (text, parse tree), or None when it could not be read.
        root: the folder includes must stay in (the project root, resolved); None: the
            resolved ``folder``.
    """

    def __init__(self, folder: Path, notes: list[str] | None = None,
                 stack: tuple[Path, ...] = (),
                 cache: dict[Path, tuple[str, nodes.Template] | None] | None = None,
                 root: Path | None = None, *, shown: str | None = None,
                 _run: _Run | None = None) -> None:
        self.folder = folder
        #: the template's path as findings name it (the linted file as given; an included
        #: or extended one as its includer's ``shown`` folder joined to the name it uses)
        self.shown = shown if shown is not None else (
            str(stack[-1]) if stack else os.path.join(str(folder), ""))
        #: template line -> file line for this loader's own notes (templates embedded in
        #: YAML / TOML strings; set by :func:`jinja_pieces`)
        self.line_of: Callable[[int], int] | None = None
        self.notes: list[str] = notes if notes is not None else []
        self.stack = stack
        self.run = _run if _run is not None else _Run(cache)
        self._cache = self.run.cache
        if root is None:
            try:
                root = folder.resolve()
            except (OSError, RuntimeError):
                root = folder.absolute()
        self.root = root

    def _note(self, lineno: int | None, what: str, reason: str) -> None:
        if lineno and self.line_of is not None and len(self.stack) <= 1:
            lineno = self.line_of(lineno)
        where = f"line {lineno}: " if lineno else ""
        if len(self.stack) > 1:  # in an included file
            where = f"{self.stack[-1].name}: {where}"
        note = f"{where}{what} not followed: {reason}"
        if note not in self.notes:
            self.notes.append(note)

    def locate(self, name: str, lineno: int | None, what: str) -> Path | None:
        """The resolved path of template ``name`` when it may be read (relative, inside
        ``root``), else None with a note."""
        if PurePath(name).is_absolute() or PureWindowsPath(name).is_absolute() \
                or name.startswith(("/", "\\")):
            self._note(lineno, what, "an absolute template name (only files under the "
                                     "project folder are read)")
            return None
        try:
            path = (self.folder / name).resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError on 3.11)
            reason = "a symlink loop" if isinstance(exc, RuntimeError) else (
                exc.strerror or type(exc).__name__)
            self._note(lineno, what, f"cannot resolve {name} ({reason})")
            return None
        if not path.is_relative_to(self.root):
            self._note(lineno, what, f"{name} is outside the project folder {self.root}")
            return None
        return path

    def open(self, name: str, lineno: int | None, what: str, *,
             missing_ok: bool = False) -> tuple[str, nodes.Template, TemplateLoader] | None:
        """The text, parse tree and loader (for its own includes) of template ``name``, or
        None (with a note; none for a missing file when ``missing_ok``) when it cannot or
        may not be read."""
        path = self.locate(name, lineno, what)
        if path is None:
            return None
        if missing_ok:
            try:
                if not path.is_file():
                    return None
            except OSError:
                return None
        if path in self.stack or len(self.stack) >= _MAX_INCLUDE_DEPTH:
            chain = " -> ".join(p.name for p in (*self.stack, path))
            self._note(lineno, what, f"include cycle ({chain})" if path in self.stack
                       else f"more than {_MAX_INCLUDE_DEPTH} nested includes")
            return None
        self.run.visits += 1
        if self.run.visits > _MAX_INCLUDE_VISITS:
            self._note(None, "{% include %} / {% import %}",
                       f"more than {_MAX_INCLUDE_VISITS} includes and imports in all")
            return None
        if path not in self._cache:
            self._cache[path] = self._read(path, name, lineno, what)
        got = self._cache[path]
        if got is None:
            return None
        text, tree = got
        shown = os.path.normpath(os.path.join(os.path.dirname(self.shown), name))
        if self.shown.startswith("./") and not shown.startswith(("../", "/")):
            shown = "./" + shown  # as a folder walk from "." names the file
        child = TemplateLoader(path.parent, self.notes, (*self.stack, path), root=self.root,
                               shown=shown, _run=self.run)
        return text, tree, child

    def _read(self, path: Path, name: str, lineno: int | None,
              what: str) -> tuple[str, nodes.Template] | None:
        try:
            if not path.is_file():
                self._note(lineno, what, f"{name} not found in {self.folder}")
                return None
            if path.stat().st_size > _MAX_INCLUDED_BYTES:
                self._note(lineno, what, f"{name} is larger than {_MAX_INCLUDED_BYTES} bytes")
                return None
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else (
                exc.strerror or type(exc).__name__)
            self._note(lineno, what, f"cannot read {name} ({reason})")
            return None
        try:
            return text, _ENV.parse(text)
        except TemplateSyntaxError as exc:
            self._note(lineno, what, f"Jinja syntax error in {name} at line {exc.lineno}: "
                                     f"{exc.message or 'syntax error'}")
        except RecursionError:
            self._note(lineno, what, f"{name} nested too deeply")
        return None


def _template_name(node: nodes.Node, loader: TemplateLoader, what: str) -> str | None:
    """The template an include / import names (a string literal), else None with a note."""
    name = _const_str(getattr(node, "template", None))
    if name is None:
        loader._note(getattr(node, "lineno", None), what,
                     "the template name is not a string literal")
    return name


def _first_volatile(text: str, tree: nodes.Template, loader: TemplateLoader,
                    origin_prefix: str,
                    inherited: dict[str, Volatility] | None = None) -> Volatility | None:
    """The first volatile hole of an included template (its own includes and its
    ``{% extends %}`` layout followed); ``inherited``: the volatile names of the includer's
    context it sees. A hole whose value is one of those names says where the includer set
    it. Computed once per file and set of inherited names (memoised in the loader's run)."""
    seen = dict(inherited or {})  # passed on to its own includes too, as in Jinja
    key = (loader.stack[-1], frozenset(seen.items())) if loader.stack else None
    if key is not None and key in loader.run.first:
        v = loader.run.first[key]
    else:
        v = None
        for piece in _layout_pieces(text, line_position(text), tree, loader, seen):
            if piece.kind == "hole" and piece.volatility is not None:
                v = piece.volatility
                if isinstance(piece, FilePiece):  # in the layout it extends
                    v = Volatility(v.kind, v.granularity,
                                   f"{PurePath(piece.file).name}: {v.origin}")
                elif seen and v in seen.values() and v.origin.startswith("{% set "):
                    v = Volatility(v.kind, v.granularity,  # the includer's {% set %}
                                   f"{piece.text.strip()}, set by {v.origin}")
                break
        if key is not None:
            loader.run.first[key] = v
    if v is None:
        return None
    return Volatility(v.kind, v.granularity, f"{origin_prefix}: {v.origin}")


def _include_volatility(node: nodes.Include, loader: TemplateLoader,
                        context: dict[str, Volatility] | None = None) -> Volatility | None:
    """The first volatile value of the template ``node`` includes; ``context``: the
    includer's volatile names (an include sees them unless ``without context``)."""
    what = "{% include %}"
    name = _template_name(node, loader, what)
    if name is None:
        return None
    what = f'{{% include "{name}" %}}'
    got = loader.open(name, node.lineno, what, missing_ok=node.ignore_missing)
    if got is None:
        return None
    text, tree, child = got
    return _first_volatile(text, tree, child, name,
                           context if node.with_context else None)


def _macro_volatility(tree: nodes.Template, bound: dict[str, Volatility],
                      loader: TemplateLoader | None, where: str) -> dict[str, Volatility]:
    """Macros of ``tree`` whose output holds a volatile value (a hole, an include, a call of
    another such macro): name -> that value."""
    macros = list(tree.find_all(nodes.Macro))
    out: dict[str, Volatility] = {}
    for _ in range(len(macros) + 1):  # until no macro changes (macros calling macros)
        changed = False
        for macro in macros:
            if macro.name in out:
                continue
            scope = {**bound, **out}
            for arg in macro.args:  # a parameter is whatever the caller passes
                scope.pop(arg.name, None)
            vol = _body_volatility(macro, scope, loader,
                                   f"macro {macro.name}" + (f" in {where}" if where else ""))
            if vol is not None:
                out[macro.name] = vol
                changed = True
        if not changed:
            break
    return out


def _body_volatility(macro: nodes.Macro, scope: dict[str, Volatility],
                     loader: TemplateLoader | None, where: str) -> Volatility | None:
    for node in macro.find_all((nodes.Output, nodes.Include)):
        if isinstance(node, nodes.Include):
            vol = (_include_volatility(node, loader, scope) if loader is not None
                   else None)
            if vol is not None:
                return Volatility(vol.kind, vol.granularity, f"{where}: {vol.origin}")
            continue
        if not isinstance(node, nodes.Output):
            continue
        for expr in node.nodes:
            if isinstance(expr, nodes.TemplateData):
                continue
            vol = classify_expr(expr, f"{where}: {{{{ {_source_of(expr)} }}}}", scope)
            if vol is not None:
                return vol
    return None


def _source_of(expr: nodes.Node) -> str:
    """Short readable text for a Jinja expression (the call or name it is)."""
    if isinstance(expr, nodes.Call):
        inner = _source_of(expr.node)
        return f"{inner}()"
    if isinstance(expr, nodes.Filter):
        return f"{_source_of(expr.node) if expr.node is not None else ''}|{expr.name}"
    dotted = _dotted(expr)
    if dotted is not None:
        return dotted
    const = _const_str(expr)
    return repr(const) if const is not None else type(expr).__name__.lower()


def _imported(tree: nodes.Template, loader: TemplateLoader) -> dict[str, Volatility]:
    """Volatile macros brought in by ``{% import "f" as m %}`` (as ``m.name``) and
    ``{% from "f" import name as alias %}`` (as ``alias``)."""
    out: dict[str, Volatility] = {}
    for node in tree.find_all((nodes.Import, nodes.FromImport)):
        kind = "import" if isinstance(node, nodes.Import) else "from ... import"
        name = _template_name(node, loader, f"{{% {kind} %}}")
        if name is None:
            continue
        got = loader.open(name, node.lineno, f'{{% {kind} "{name}" %}}')
        if got is None:
            continue
        _text, sub, child = got
        path = child.stack[-1]
        macros = loader.run.macros.get(path)
        if macros is None:  # a file imported from many templates is analysed once
            macros = _macro_volatility(sub, _bound_names(sub, child), child, name)
            loader.run.macros[path] = macros
        if isinstance(node, nodes.Import):
            out.update({f"{node.target}.{m}": v for m, v in macros.items()})
        elif isinstance(node, nodes.FromImport):
            for item in node.names:
                src, alias = item if isinstance(item, tuple) else (item, item)
                if src in macros:
                    out[alias] = macros[src]
    return out


# ------------------------------------------------------------------------ jinja
def _bound_names(tree: nodes.Template, loader: TemplateLoader | None = None,
                 inherited: dict[str, Volatility] | None = None,
                 where: Callable[[int], str] | None = None) -> dict[str, Volatility]:
    """Names whose value is volatile: ``{% set x = now() %}``, and the template's own and
    imported macros whose output is (a macro is volatile where it is called); ``inherited``:
    the volatile names of an including template's context (its own names override them).
    ``where``: template line -> where a ``{% set %}`` is, for its origin (``" at a.j2 line
    3"``)."""
    bound: dict[str, Volatility] = dict(inherited or {})
    if loader is not None:
        bound.update(_imported(tree, loader))
    bound.update(_macro_volatility(tree, bound, loader, ""))
    for assign in tree.find_all(nodes.Assign):
        target = assign.target
        if isinstance(target, nodes.Name):
            at = where(assign.lineno) if where is not None else ""
            vol = classify_expr(assign.node, f"{{% set {target.name} %}}{at}", bound)
            if vol is not None:
                bound[target.name] = vol
    return bound


def _line_offsets(source: str) -> list[int]:
    starts = [0]
    i = source.find("\n")
    while i != -1:
        starts.append(i + 1)
        i = source.find("\n", i + 1)
    return starts


def jinja_pieces(source: str, position: Position,
                 loader: TemplateLoader | None = None) -> list[Piece]:
    """Pieces of a Jinja template (static ``data`` runs and ``{{ }}`` holes), in the order
    the rendered text has them.

    With a ``loader``, ``{% include "f" %}`` is a hole at the include site holding the
    included template's first volatile value (if any), and macros imported with
    ``{% import %}`` / ``{% from ... import %}`` (or defined in the template) whose output is
    volatile make the holes that call them volatile. ``{% extends "base" %}`` is followed
    too: the pieces are the layout's (as :class:`FilePiece`, at their own file's lines) with
    each ``{% block %}`` replaced by its most derived definition (``{{ super() }}`` is the
    parent's), and the template's text outside its blocks is not rendered. Without a
    loader, includes and extends are not followed.

    Raises:
        JinjaSyntaxError: the template does not parse (jinja2's message and line).
    """
    try:
        tree = _ENV.parse(source)
    except TemplateSyntaxError as exc:
        raise JinjaSyntaxError(exc.message or "syntax error", exc.lineno) from None
    except RecursionError:
        raise JinjaSyntaxError("template nested too deeply", None) from None
    starts = _line_offsets(source)

    def file_line(lineno: int) -> int:
        return position(starts[min(max(lineno, 1), len(starts)) - 1])[0]

    if loader is not None:
        loader.line_of = file_line
    try:
        return _layout_pieces(source, position, tree, loader, None, file_line)
    except TemplateSyntaxError as exc:
        raise JinjaSyntaxError(exc.message or "syntax error", exc.lineno) from None
    except RecursionError:
        raise JinjaSyntaxError("template nested too deeply", None) from None


@dataclass(frozen=True, slots=True)
class _Mark:
    """A place in a template's piece list: ``block`` (``name``; ``end``: the index of its
    ``endblock`` mark), ``endblock``, ``super`` (``{{ super() }}``) or ``extends``."""

    kind: str
    name: str = ""
    end: int = -1


_Item = Piece | _Mark
#: Most pieces a layout with its blocks substituted may have (``{{ super() }}`` repeated at
#: each level of a deep chain multiplies them).
_MAX_LAYOUT_PIECES = 10_000
#: Most items (pieces and block / ``{{ super() }}`` marks) substituting a layout's blocks may
#: visit: ``{{ super() }}`` repeated at each level of a chain multiplies the visits (K**depth)
#: even when the blocks hold no text, so no piece counts them.
_MAX_LAYOUT_STEPS = 100_000


def _extends_name(tree: nodes.Template, loader: TemplateLoader) -> tuple[str, int] | None:
    """The layout ``tree`` extends (its first ``{% extends %}``) and its line, or None (with
    a note when the name is not a string literal)."""
    node = tree.find(nodes.Extends)
    if node is None:
        return None
    name = _template_name(node, loader, "{% extends %}")
    return None if name is None else (name, node.lineno)


def _layout_pieces(source: str, position: Position, tree: nodes.Template,
                   loader: TemplateLoader | None, inherited: dict[str, Volatility] | None,
                   file_line: Callable[[int], int] | None = None) -> list[Piece]:
    """The pieces of a template with its ``{% extends %}`` chain followed (see
    :func:`jinja_pieces`); ``inherited``: an includer's volatile names."""
    # the chain: this template, the layout it extends, that layout's, ...
    levels: list[tuple[str, Position, nodes.Template, TemplateLoader | None, str | None]] = [
        (source, position, tree, loader, None)]
    while True:
        _text, _pos, level_tree, level_loader, _shown = levels[-1]
        ext = _extends_name(level_tree, level_loader) if level_loader is not None else None
        if ext is None or level_loader is None:
            break
        name, lineno = ext
        got = level_loader.open(name, lineno, f'{{% extends "{name}" %}}')
        if got is None:
            break
        ptext, ptree, ploader = got
        levels.append((ptext, line_position(ptext), ptree, ploader, ploader.shown))
    # names a {% set %} binds at the top level of any template of the chain are in the one
    # context they all render with; each template's own names come first for itself
    owns: list[dict[str, Volatility]] = []
    for k, (_text, _pos, level_tree, level_loader, shown) in enumerate(levels):
        label = PurePath(shown or (level_loader.shown if level_loader is not None else "")).name
        lines = file_line if k == 0 and file_line is not None else (lambda n: n)

        def where(n: int, label: str = label, lines: Callable[[int], int] = lines) -> str:
            return f" at {label} line {lines(n)}" if label else f" at line {lines(n)}"

        owns.append(_bound_names(level_tree, level_loader, inherited, where))
    merged: dict[str, Volatility] = {}
    for own in reversed(owns):  # the layout's first, a template's names override its layout's
        merged.update(own)
    items: list[list[_Item]] = []
    for (text, pos, level_tree, level_loader, shown), own in zip(levels, owns, strict=True):
        got_items = _pieces(text, pos, level_tree, {**merged, **own}, level_loader)
        if shown is not None:
            got_items = [FilePiece(p.kind, p.text, p.line, p.col, p.volatility, file=shown)
                         if isinstance(p, Piece) and not isinstance(p, FilePiece) else p
                         for p in got_items]
        items.append(got_items)
    if len(levels) == 1:
        return _render(items[0], [], loader)
    out: list[Piece] = []
    for level_items in items[:-1]:  # a template's text before its {% extends %} is output
        for item in level_items:
            if isinstance(item, _Mark) and item.kind == "extends":
                break
            if isinstance(item, Piece):
                out.append(item)
    chain = [_blocks(level_items) for level_items in items]
    return out + _render(items[-1], chain, loader)


def _blocks(items: list[_Item]) -> dict[str, tuple[list[_Item], int]]:
    """A template's blocks: name -> (its items, the index of its ``block`` mark)."""
    return {item.name: (items, i) for i, item in enumerate(items)
            if isinstance(item, _Mark) and item.kind == "block"}


def _render(root: list[_Item], chain: list[dict[str, tuple[list[_Item], int]]],
            loader: TemplateLoader | None) -> list[Piece]:
    """The pieces of ``root`` (the root layout's items) with each block replaced by its most
    derived definition in ``chain`` (most derived template first)."""
    out: list[Piece] = []
    full = [False]
    steps = [0]  # items visited, against _MAX_LAYOUT_STEPS
    shown: set[int] = set()  # holes already output: a block rendered again (super()) has
    # its text again, but its holes' values are reported once, where first rendered

    def emit(items: list[_Item], lo: int, hi: int, name: str, depth: int,
             active: tuple[str, ...]) -> None:
        i = lo
        while i < hi:
            steps[0] += 1
            if full[0] or len(out) >= _MAX_LAYOUT_PIECES or steps[0] > _MAX_LAYOUT_STEPS:
                if not full[0] and loader is not None:
                    loader._note(None, "{% extends %}", (
                        f"more than {_MAX_LAYOUT_PIECES} pieces with its blocks substituted"
                        if len(out) >= _MAX_LAYOUT_PIECES else
                        f"more than {_MAX_LAYOUT_STEPS} steps substituting its blocks "
                        "({{ super() }} repeated down the chain)"))
                full[0] = True
                return
            item = items[i]
            if isinstance(item, Piece):
                if item.kind == "hole" and item.volatility is not None:
                    if id(item) in shown:
                        item = (FilePiece(item.kind, item.text, item.line, item.col,
                                          file=item.file) if isinstance(item, FilePiece)
                                else Piece(item.kind, item.text, item.line, item.col))
                    shown.add(id(item))
                out.append(item)
            elif item.kind == "block":
                block(item.name, active)
                i = item.end if item.end >= 0 else hi
            elif item.kind == "super" and name:
                defs = [c[name] for c in chain if name in c]
                if depth + 1 < len(defs):
                    sub, at = defs[depth + 1]
                    emit(sub, at + 1, _end(sub, at), name, depth + 1, active)
            i += 1

    def block(name: str, active: tuple[str, ...]) -> None:
        if name in active:  # a block holding itself through another template's blocks
            return
        defs = [c[name] for c in chain if name in c]
        if not defs:
            return
        sub, at = defs[0]
        emit(sub, at + 1, _end(sub, at), name, 0, (*active, name))

    if not chain:  # no layout: every piece in source order
        return [item for item in root if isinstance(item, Piece)]
    emit(root, 0, len(root), "", 0, ())
    return out


def _end(items: list[_Item], at: int) -> int:
    mark = items[at]
    return mark.end if isinstance(mark, _Mark) and mark.end >= 0 else len(items)


def _is_super(hole_src: str) -> bool:
    return re.fullmatch(r"\{\{-?\s*super\s*\(\s*\)\s*-?\}\}", hole_src) is not None


def _pieces(source: str, position: Position, tree: nodes.Template,
            bound: dict[str, Volatility], loader: TemplateLoader | None) -> list[_Item]:
    """Pieces of one template in source order, with :class:`_Mark` items where a
    ``{% block %}`` starts and ends, at ``{{ super() }}`` and at ``{% extends %}``."""
    try:
        tokens = list(_ENV.lex(source))
    except TemplateSyntaxError as exc:
        raise JinjaSyntaxError(exc.message or "syntax error", exc.lineno) from None
    includes: dict[int, list[nodes.Include]] = {}
    if loader is not None:
        for node in tree.find_all(nodes.Include):
            includes.setdefault(node.lineno, []).append(node)
    pieces: list[_Item] = []
    open_blocks: list[int] = []  # indexes of the block marks not yet ended
    pos = 0
    hole_start: int | None = None
    block_start: int | None = None
    block_tag: str | None = None
    block_name: str | None = None
    tag_line = 0
    in_macro = 0  # depth of {% macro %} definitions around the current token
    for lineno, ttype, value in tokens:
        at = source.find(value, pos) if value else pos
        if at < 0:
            at = pos
        if in_macro:  # a macro's body is output where the macro is called, not here
            if ttype == "name" and block_start is not None and block_tag is None:
                block_tag = value
                in_macro += {"macro": 1, "endmacro": -1}.get(value, 0)
            elif ttype == "block_begin":
                block_start, block_tag = at, None
            elif ttype == "block_end":
                block_start = None
        elif ttype == "data":
            if value:
                line, col = position(at)
                pieces.append(Piece("text", value, line, col))
        elif ttype == "variable_begin":
            hole_start = at
        elif ttype == "variable_end" and hole_start is not None:
            hole_src = source[hole_start:at + len(value)]
            if _is_super(hole_src):  # the parent's block content
                pieces.append(_Mark("super"))
                hole_start = None
                pos = at + len(value)
                continue
            vol: Volatility | None = None
            try:
                expr_tree = _ENV.parse(hole_src)
                outs = list(expr_tree.find_all(nodes.Output))
                if outs and outs[0].nodes:
                    vol = classify_expr(outs[0].nodes[0], hole_src.strip(), bound)
            except (TemplateSyntaxError, RecursionError):
                vol = None
            line, col = position(hole_start)
            if vol is not None and vol.origin.startswith("macro "):  # say what it renders
                hole_src = f"{hole_src} ({vol.origin})"
            pieces.append(Piece("hole", hole_src, line, col, vol))
            hole_start = None
        elif ttype == "block_begin":
            block_start, block_tag, block_name = at, None, None
        elif ttype == "name" and block_start is not None and block_tag is None:
            block_tag, tag_line = value, lineno
            if value == "macro":
                in_macro = 1
        elif ttype == "name" and block_tag == "block" and block_name is None:
            block_name = value
        elif ttype == "block_end" and block_start is not None:
            waiting = includes.get(tag_line) if block_tag == "include" else None
            include = waiting.pop(0) if waiting else None
            if include is not None and loader is not None:
                vol = _include_volatility(include, loader, bound)
                if vol is not None:  # the included text sits here
                    line, col = position(block_start)
                    tag = source[block_start:at + len(value)]
                    pieces.append(Piece("hole", f"{tag} ({vol.origin})", line, col, vol))
            elif block_tag == "block" and block_name is not None:
                open_blocks.append(len(pieces))
                pieces.append(_Mark("block", block_name))
            elif block_tag == "endblock" and open_blocks:
                start = open_blocks.pop()
                mark = pieces[start]
                assert isinstance(mark, _Mark)
                pieces[start] = _Mark("block", mark.name, len(pieces))
                pieces.append(_Mark("endblock"))
            elif block_tag == "extends":
                pieces.append(_Mark("extends"))
            block_start = None
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
        # the whole name first (user.email reads as user_email, as in Jinja), then its parts
        vol = _vol_from_name(".".join(tail), m.group(0)) if len(tail) > 1 else None
        for part in reversed(tail):
            if vol is not None:
                break
            vol = (_vol_from_part(part, m.group(0)) if len(tail) > 1
                   else _vol_from_name(part, m.group(0)))
        line, col = position(m.start())
        pieces.append(Piece("hole", m.group(0), line, col, vol))
        last = m.end()
    if last < len(source):
        line, col = position(last)
        pieces.append(Piece("text", source[last:], line, col))
    return pieces


def pieces_for(source: str, position: Position, *, prefer: str = "auto",
               strict_jinja: bool = False,
               loader: TemplateLoader | None = None) -> tuple[str, list[Piece]]:
    """Detect the template syntax of ``source`` and split it into pieces.

    Args:
        prefer: ``"jinja"`` to try Jinja first whatever the text looks like; ``"auto"``.
        strict_jinja: re-raise Jinja syntax errors instead of falling back to placeholders.
        loader: follows a Jinja template's includes, imports and ``{% extends %}`` (see
            :func:`jinja_pieces`); None: they are not followed.

    Returns:
        ``(syntax, pieces)`` with syntax ``"jinja"``, ``"placeholder"``, ``"format"`` or
        ``"text"``.

    Raises:
        JinjaSyntaxError: only with ``strict_jinja``.
    """
    if prefer == "jinja" or "{{" in source or "{%" in source:
        try:
            return "jinja", jinja_pieces(source, position, loader)
        except JinjaSyntaxError:
            if strict_jinja:
                raise
        if "{{" in source:
            return "placeholder", regex_pieces(source, position, _PLACEHOLDER)
    if "{" in source and FORMAT_FIELD.search(source):
        return "format", regex_pieces(source, position, FORMAT_FIELD)
    line, col = position(0)
    return "text", [Piece("text", source, line, col)] if source else []
