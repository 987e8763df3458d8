"""YAML / TOML prompt files and Prompty files.

Which strings are prompts: every string value whose key path names a prompt part — a key (or
an ancestor key) that is ``system``, ``prompt``, ``template``, ``instructions``, ``message``,
``messages`` or ``content``, or ends in ``_template`` / ``_prompt`` / ``_message`` (as agent
frameworks write them: SWE-agent ``system_template``, smolagents ``prompt_templates``,
Gemini CLI ``prompt``). Each is one template (syntax detected; see
:mod:`promptcache.lint.sources.templating`); Jinja syntax errors inside a YAML string fall back
to placeholder recognition, because such strings are often Mustache or Handlebars.

Positions: YAML scalars keep their marks: literal ``|`` scalars map line by line (indented
as the first non-empty line, or by an explicit indicator such as ``|2``); folded ``>``,
plain and quoted scalars map each character of the value back to the source between the
node's marks (undoing line folding and escapes), falling back to the scalar's first content
character where that fails. TOML values are found by their full key path (table headers,
dotted keys, inline tables) in the raw text, and mapped character by character through
escapes and multi-line strings.

Prompty (``.prompty``): YAML front matter between ``---`` lines (its ``model`` is used for
token counts) and a Jinja body with ``system:`` / ``user:`` role markers.

Jinja templates embedded in these files follow ``{% include %}``, ``{% import %}``,
``{% from ... import %}`` and ``{% extends %}`` relative to the embedding file's folder, under
the same rules as ``.j2`` files (:mod:`promptcache.lint.sources.jinja`: project-root
confined; an include that cannot be followed is a warning naming the file's line).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterator
from pathlib import PurePath
from typing import Any

import yaml

from promptcache._errors import InputError
from promptcache.lint.engine import TemplateContext
from promptcache.lint.sources.base import Document, LoadOptions, parse_suppressions
from promptcache.lint.sources.jinja import template_loader
from promptcache.lint.sources.templating import (
    JinjaSyntaxError,
    LayoutTemplateContext,
    Position,
    TemplateLoader,
    jinja_pieces,
    line_position,
    pieces_for,
)

__all__ = ["SOURCE", "PromptFileSource"]

_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it

_PROMPT_KEY = re.compile(
    r"(?i)^(?:system|prompt|prompts|template|templates|instructions?|messages?|content|"
    r"preamble|persona)$|(?:_|^)(?:template|prompt|message|instructions?)s?$"
)


def _is_prompt_path(keys: list[str]) -> bool:
    return any(_PROMPT_KEY.search(k) for k in keys)


# ------------------------------------------------------------------------ YAML
def _yaml_scalars(node: yaml.Node, keys: list[str], text: str, parent: int = -1,
                  inside: set[int] | None = None,
                  ) -> Iterator[tuple[list[str], yaml.ScalarNode, int]]:
    """``(key path, string scalar, parent indentation)`` under ``node``. The parent
    indentation (what a block scalar's explicit indentation indicator adds to) is the
    column of the scalar's key, or of its ``-`` in a block sequence; -1 at the top level.
    Every collection is entered once (``inside``: the ones entered so far), so one reached
    again through an alias or a ``<<`` merge key, or holding itself, is not walked again: its
    strings are linted where it is anchored, and a file of nested aliases (a "billion laughs")
    costs its size, not the size of its expansion."""
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        inside = set() if inside is None else inside
        if id(node) in inside:
            return
        inside.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for knode, vnode in node.value:
                key = str(knode.value) if isinstance(knode, yaml.ScalarNode) else "?"
                yield from _yaml_scalars(vnode, [*keys, key], text, knode.start_mark.column,
                                         inside)
        else:
            for item in node.value:
                yield from _yaml_scalars(item, keys, text,
                                         _yaml_dash_column(text, item, parent), inside)
    elif isinstance(node, yaml.ScalarNode) and node.tag.endswith(":str"):
        yield keys, node, parent


def _yaml_dash_column(buf: str, item: yaml.Node, default: int) -> int:
    """Column of the ``-`` before a block sequence item (``default`` in a flow sequence)."""
    i = min(item.start_mark.index, len(buf)) - 1
    while i >= 0 and buf[i] in " \t\r\n":
        i -= 1
    if i < 0 or buf[i] != "-":
        return default
    return i - (buf.rfind("\n", 0, i) + 1)


_YAML_BLOCK_HEADER = re.compile(r"[|>](?:([1-9])[+-]?|[+-]([1-9])?)?")


def _yaml_position(node: yaml.ScalarNode, text: str, lines: list[str],
                   base_line: int, parent: int = -1) -> Position:
    if node.style == "|":
        got = _yaml_literal(node, text, lines, parent)
        if got is not None:
            first, indent = got
            value: str = node.value

            def block(offset: int) -> tuple[int, int]:
                k = value.count("\n", 0, offset)
                col = offset - (value.rfind("\n", 0, offset) + 1)
                return base_line + first + k, indent + col + 1

            return block
    where = _yaml_offsets(node, text)
    at = line_position(text, base_line)

    def flow(offset: int) -> tuple[int, int]:
        return at(where[min(max(offset, 0), len(where) - 1)])

    return flow


def _yaml_literal(node: yaml.ScalarNode, text: str, lines: list[str],
                  parent: int) -> tuple[int, int] | None:
    """``(first content line (0-based), indentation)`` of a literal block scalar, or None.
    The indentation is the first non-empty line's, or with an explicit indentation
    indicator (``|2``, ``|2-``, ``|-2``) the parent's indentation plus the indicator (as
    libyaml reads it: the indicator alone at the top level); checked against the source."""
    j, stop = node.start_mark.index, node.end_mark.index
    m = _YAML_PROPERTY.match(text, j)
    while m is not None and j < stop:  # an anchor / tag, possibly on the line above
        j = m.end()
        m = _YAML_PROPERTY.match(text, j)
    first = node.start_mark.line + 1
    header = _YAML_BLOCK_HEADER.match(text, j) if text.startswith("|", j) else None
    if header is not None:
        first = node.start_mark.line + text.count("\n", node.start_mark.index, j) + 1
    if first >= len(lines):
        return None
    value: str = node.value
    explicit = (header.group(1) or header.group(2)) if header is not None else None
    if explicit:
        indent = parent + int(explicit) if parent >= 0 else int(explicit)
    else:
        k = first
        while k < len(lines) and not lines[k].strip():
            k += 1
        indent = len(lines[k]) - len(lines[k].lstrip(" ")) if k < len(lines) else 0
    # The first non-empty line of the value sits on its own source line after `indent`
    # spaces; where it does not, the indentation was misread: take it from that line.
    for k, vline in enumerate(value.split("\n")):
        if vline.strip():
            if first + k < len(lines):
                src = lines[first + k].rstrip("\r")
                if src[indent:] != vline and src.endswith(vline) and not src[
                        :len(src) - len(vline)].strip(" "):
                    indent = len(src) - len(vline)
            break
    return first, indent


_YAML_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n",
                 "v": "\v", "f": "\f", "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/",
                 "\\": "\\", "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029"}
_YAML_HEX = {"x": 2, "u": 4, "U": 8}
_YAML_PROPERTY = re.compile(r"[&!][^ \t\r\n]*[ \t\r\n]*")  # &anchor / !tag before a value


def _yaml_offsets(node: yaml.ScalarNode, text: str) -> list[int]:
    """For each character of a (non-literal) scalar's value, and one past its end, its offset
    in ``text``: the value is matched against the source from the node's start to end mark,
    undoing line folding (a line break read as a space, blank lines as line breaks, leading
    and trailing blanks dropped), escapes (double-quoted), ``''`` (single-quoted) and an
    escaped line break. Where the match fails, the rest of the value maps to the first
    content character (the line after a ``>`` indicator, not the key's line)."""
    value: str = node.value
    style = node.style or ""
    start, stop = node.start_mark.index, node.end_mark.index
    j = start
    if style in (">",):
        nl = text.find("\n", start, stop)  # content starts on the line after the indicator
        j = stop if nl == -1 else nl + 1
    else:
        m = _YAML_PROPERTY.match(text, j)
        while m is not None and j < stop:
            j = m.end()
            m = _YAML_PROPERTY.match(text, j)
        if style in ('"', "'"):
            q = text.find(style, j, stop)
            j = start if q == -1 else q + 1
            stop -= 1  # the closing quote
    first = j
    while first < stop and text[first] in " \t\r\n":
        first += 1
    if first >= stop:
        first = j
    dq, sq = style == '"', style == "'"
    out: list[int] = []
    for v in value:
        got: int | None = None
        while j < stop:
            c = text[j]
            if dq and c == "\\":
                nxt = text[j + 1] if j + 1 < stop else ""
                if nxt in ("\r", "\n"):  # escaped line break: nothing, nor the next indent;
                    j += 3 if text.startswith("\r\n", j + 1) else 2  # empty lines after it
                    while j < stop and text[j] in " \t":  # are each a kept line break
                        j += 1
                    continue
                if nxt in _YAML_HEX:
                    width = _YAML_HEX[nxt]
                    try:
                        ch = chr(int(text[j + 2:j + 2 + width], 16))
                    except ValueError:
                        break
                    step = 2 + width
                elif nxt in _YAML_ESCAPES:
                    ch, step = _YAML_ESCAPES[nxt], 2
                else:
                    break
                if ch == v:
                    got, j = j, j + step
                break
            if sq and c == "'":
                if v == "'" and text.startswith("''", j):
                    got, j = j, j + 2
                break
            if c == v:
                got, j = j, j + 1
                break
            if c in "\r\n" and v in " \n":  # a folded line break, or one kept
                got = j
                j += 2 if text.startswith("\r\n", j) else 1
                break
            if c in " \t\r\n":  # blanks that folding drops
                j += 1
                continue
            break
        if got is None:
            break
        out.append(got)
    if len(out) < len(value):
        out.extend([first] * (len(value) - len(out)))
        out.append(first)
    else:
        out.append(j)
    return out


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's reason on one line (a ReaderError has no ``problem`` and a multi-line str)."""
    problem = getattr(exc, "problem", None) or str(exc)
    return " ".join(str(problem).split())


def _context(file: str, name: str, syntax: str, pieces: list[Any],
             model: str | None) -> TemplateContext:
    """A template's context; a Jinja one may hold a layout's pieces from another file."""
    if syntax == "jinja":
        return LayoutTemplateContext(file, name, syntax, pieces, model=model)
    return TemplateContext(file, name, syntax, pieces, model=model)


def _yaml_templates(file: str, text: str, base_line: int = 1,
                    model: str | None = None,
                    loader: TemplateLoader | None = None) -> list[TemplateContext]:
    try:
        docs = list(yaml.compose_all(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + base_line}" if mark is not None else ""
        raise InputError(file, f"invalid YAML{where}: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise InputError(file, "YAML nested too deeply") from None
    lines = text.split("\n")
    out: list[TemplateContext] = []
    seen: set[int] = set()  # scalar nodes already linted: one finding per place in the file
    for root in docs:
        if root is None:
            continue
        for keys, node, parent in _yaml_scalars(root, [], text):
            value = node.value
            if not isinstance(value, str) or not value.strip() or not _is_prompt_path(keys):
                continue
            if id(node) in seen:  # reached again through an alias or a ``<<`` merge key
                continue
            seen.add(id(node))
            syntax, pieces = pieces_for(value, _yaml_position(node, text, lines, base_line,
                                                              parent), loader=loader)
            if any(p.kind == "hole" for p in pieces):
                out.append(_context(file, ".".join(keys) or "<root>", syntax, pieces, model))
    return out


# ------------------------------------------------------------------------ TOML
def _toml_strings(obj: Any, keys: list[str]) -> Iterator[tuple[list[str], str]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _toml_strings(v, [*keys, str(k)])
    elif isinstance(obj, list):
        for v in obj:
            yield from _toml_strings(v, keys)
    elif isinstance(obj, str):
        yield keys, obj


_TOML_BARE = re.compile(r"[A-Za-z0-9_-]+")
_TOML_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", "e": "\x1b",
                 '"': '"', "\\": "\\"}
_TOML_HEX = {"x": 2, "u": 4, "U": 8}
_TOML_SCALAR = re.compile(r"[^,\]}#\r\n]+")


class _TomlScan:
    """Where each string value of an already valid TOML document sits: ``(key path, start,
    end)`` of its token, in document order. Tracks ``[table]`` / ``[[array]]`` headers,
    dotted and quoted keys, inline tables and arrays (array items keep the array's key path,
    as :func:`_toml_strings` yields them)."""

    def __init__(self, text: str) -> None:
        self.t = text
        self.i = 0
        self.strings: list[tuple[tuple[str, ...], int, int]] = []

    def scan(self) -> list[tuple[tuple[str, ...], int, int]]:
        t = self.t
        table: tuple[str, ...] = ()
        try:
            while True:
                self._skip(newlines=True)
                if self.i >= len(t):
                    break
                before = self.i
                if t.startswith("[[", self.i):
                    self.i += 2
                    table = self._key()
                    self._skip()
                    self.i += 2  # ]]
                elif t[self.i] == "[":
                    self.i += 1
                    table = self._key()
                    self._skip()
                    self.i += 1  # ]
                else:
                    key = self._key()
                    self._skip()
                    self.i += 1  # =
                    self._value((*table, *key))
                if self.i <= before:  # no progress: not TOML this scanner understands
                    break
        except (IndexError, ValueError, AttributeError, tomllib.TOMLDecodeError):
            pass  # what was found so far stays usable
        return self.strings

    def _skip(self, *, newlines: bool = False) -> None:
        t, n = self.t, len(self.t)
        while self.i < n:
            c = t[self.i]
            if c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            elif c == "#":
                nl = t.find("\n", self.i)
                self.i = n if nl == -1 else nl
            else:
                break

    def _string_end(self) -> int:
        """End offset of the string token starting at ``self.i``."""
        t, i = self.t, self.i
        q = t[i]
        if t.startswith(q * 3, i):
            j = i + 3
            while True:
                if q == '"' and t[j] == "\\":
                    j += 2
                elif t.startswith(q * 3, j):
                    run = 3
                    while run < 5 and j + run < len(t) and t[j + run] == q:
                        run += 1
                    return j + run
                else:
                    j += 1
        j = i + 1
        while t[j] != q:
            j += 2 if q == '"' and t[j] == "\\" else 1
        return j + 1

    def _key(self) -> tuple[str, ...]:
        parts: list[str] = []
        while True:
            self._skip()
            if self.t[self.i] in "\"'":
                end = self._string_end()
                parts.append(str(tomllib.loads("k = " + self.t[self.i:end])["k"]))
                self.i = end
            else:
                m = _TOML_BARE.match(self.t, self.i)
                if m is None:
                    raise ValueError("no key")
                parts.append(m.group())
                self.i = m.end()
            self._skip()
            if self.t[self.i] != ".":
                return tuple(parts)
            self.i += 1

    def _value(self, path: tuple[str, ...]) -> None:
        t = self.t
        self._skip()
        c = t[self.i]
        if c in "\"'":
            end = self._string_end()
            self.strings.append((path, self.i, end))
            self.i = end
        elif c == "[":
            self.i += 1
            while True:
                self._skip(newlines=True)
                if t[self.i] == "]":
                    self.i += 1
                    return
                self._value(path)
                self._skip(newlines=True)
                if t[self.i] == ",":
                    self.i += 1
        elif c == "{":
            self.i += 1
            while True:
                self._skip(newlines=True)
                if t[self.i] == "}":
                    self.i += 1
                    return
                key = self._key()
                self._skip()
                self.i += 1  # =
                self._value((*path, *key))
                self._skip(newlines=True)
                if t[self.i] == ",":
                    self.i += 1
        else:  # number, bool, date-time (which may hold a space)
            m = _TOML_SCALAR.match(t, self.i)
            if m is None:
                raise ValueError("no value")
            self.i = m.end()


def _toml_string_map(text: str, start: int, end: int) -> tuple[str, list[int]]:
    """Decode the string token ``text[start:end]``; also return, for each character of the
    value (and one past its end), its offset in ``text``."""
    q = 3 if text.startswith(('"""', "'''"), start) else 1
    basic = text[start] == '"'
    i, stop = start + q, end - q
    if q == 3:
        if text.startswith("\r\n", i):
            i += 2
        elif text.startswith("\n", i):
            i += 1
    chars: list[str] = []
    where: list[int] = []
    while i < stop:
        c = text[i]
        if basic and c == "\\":
            nxt = text[i + 1]
            if nxt in _TOML_ESCAPES:
                chars.append(_TOML_ESCAPES[nxt])
                where.append(i)
                i += 2
            elif nxt in _TOML_HEX:
                width = _TOML_HEX[nxt]
                chars.append(chr(int(text[i + 2:i + 2 + width], 16)))
                where.append(i)
                i += 2 + width
            else:  # line-ending backslash: trims the line end and following whitespace
                i += 1
                while i < stop and text[i] in " \t\r\n":
                    i += 1
        elif c == "\r" and q == 3 and text.startswith("\r\n", i):
            chars.append("\n")  # tomllib normalises CRLF inside multi-line strings
            where.append(i)
            i += 2
        else:
            chars.append(c)
            where.append(i)
            i += 1
    where.append(stop)
    return "".join(chars), where


def _toml_locator(text: str) -> Callable[[list[str], str], Position]:
    """``(keys, value) -> Position`` for the string values of ``text`` (a valid TOML
    document): each value is found by its full key path (table headers, dotted keys, inline
    tables); of several values at one path (arrays), the first not yet used whose text
    matches."""
    by_path: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    for path, start, end in _TomlScan(text).scan():
        by_path.setdefault(path, []).append((start, end))
    used: set[int] = set()
    first_unused: dict[tuple[str, ...], int] = {}
    base = line_position(text)

    def locate(keys: list[str], value: str) -> Position:
        path = tuple(keys)
        spans = by_path.get(path, [])
        k = first_unused.get(path, 0)
        while k < len(spans) and spans[k][0] in used:
            k += 1
        first_unused[path] = k
        if k == len(spans):
            return _toml_position(text, keys[-1], value)
        chosen: tuple[str, list[int]] | None = None
        for start, end in spans[k:]:
            if start in used:
                continue
            try:
                got = _toml_string_map(text, start, end)
            except (IndexError, ValueError):
                continue
            if got[0] == value:
                used.add(start)
                chosen = got
                break
        if chosen is None:  # not decoded alike: the first unused value at this path
            start = spans[k][0]
            used.add(start)
            at = base(start + (3 if text.startswith(('"""', "'''"), start) else 1))
            return lambda offset: at
        where = chosen[1]

        def pos(offset: int) -> tuple[int, int]:
            return base(where[min(max(offset, 0), len(where) - 1)])

        return pos

    return locate


def _toml_position(text: str, key: str, value: str) -> Position:
    """Fallback when the scanner did not find the value: the first ``key =`` line."""
    m = re.search(rf"""(?m)^[ \t]*["']?{re.escape(key)}["']?[ \t]*=[ \t]*""", text)
    if m is None:
        return lambda offset: (1, 1)
    at = m.end()
    opener = text[at:at + 3]
    if opener in ('"""', "'''"):
        at += 3
        if text[at:at + 1] == "\n":
            at += 1
        elif text[at:at + 2] == "\r\n":
            at += 2
    else:
        at += 1
    base = line_position(text)
    base_line, base_col = base(at)

    def pos(offset: int) -> tuple[int, int]:
        k = value.count("\n", 0, offset)
        if k == 0:
            return base_line, base_col + offset
        return base_line + k, offset - value.rfind("\n", 0, offset)

    return pos


def _toml_templates(file: str, text: str, model: str | None,
                    loader: TemplateLoader | None = None) -> list[TemplateContext]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(file, f"invalid TOML: {exc}") from None
    except RecursionError:
        raise InputError(file, "TOML nested too deeply") from None
    out: list[TemplateContext] = []
    locate = _toml_locator(text)
    for keys, value in _toml_strings(data, []):
        if not _is_prompt_path(keys):
            continue
        position = locate(keys, value)  # every value at the path, so that arrays stay in step
        if not value.strip():
            continue
        syntax, pieces = pieces_for(value, position, loader=loader)
        if any(p.kind == "hole" for p in pieces):
            out.append(_context(file, ".".join(keys), syntax, pieces, model))
    return out


# ------------------------------------------------------------------------ prompty
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*\r?\n", re.DOTALL)


def _prompty(file: str, text: str, options: LoadOptions,
            loader: TemplateLoader | None = None) -> list[TemplateContext]:
    m = _FRONT.match(text)
    model = options.model
    body_start = 0
    if m is not None:
        try:
            meta = yaml.safe_load(m.group(1))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 2}" if mark is not None else ""
            raise InputError(file, f"invalid front matter YAML{where}: "
                                   f"{_yaml_problem(exc)}") from None
        except RecursionError:
            raise InputError(file, "front matter nested too deeply") from None
        if model is None and isinstance(meta, dict):
            cfg = meta.get("model")
            if isinstance(cfg, dict):
                conf = cfg.get("configuration")
                for cand in (cfg.get("id"), cfg.get("name"),
                             conf.get("name") if isinstance(conf, dict) else None,
                             conf.get("azure_deployment") if isinstance(conf, dict) else None):
                    if isinstance(cand, str) and cand:
                        model = cand
                        break
        body_start = m.end()
    body = text[body_start:]
    base_line = text.count("\n", 0, body_start) + 1
    try:
        pieces = jinja_pieces(body, line_position(body, base_line), loader)
    except JinjaSyntaxError as exc:
        where = f" at line {exc.lineno + base_line - 1}" if exc.lineno else ""
        raise InputError(file, f"Jinja syntax error{where}: {exc}") from None
    if not any(p.kind == "hole" for p in pieces):
        return []
    return [LayoutTemplateContext(file, PurePath(file).name, "jinja", pieces, model=model)]


class PromptFileSource:
    """YAML / TOML prompt files and ``.prompty`` files."""

    name = "prompt-file"
    suffixes: tuple[str, ...] = (".yaml", ".yml", ".toml", ".prompty")

    def load(self, file: str, text: str, options: LoadOptions) -> Document:
        """See :class:`promptcache.lint.sources.base.Source`."""
        suffix = PurePath(file).suffix.lower()
        if not text.strip():
            raise InputError(file, "empty file")
        doc = Document(file, suppressions=parse_suppressions(text))
        loader = template_loader(file, options) if file != "-" else None
        if suffix == ".prompty" or (suffix not in (".yaml", ".yml", ".toml")
                                    and _FRONT.match(text) is not None):
            doc.contexts.extend(_prompty(file, text, options, loader))
        elif suffix == ".toml":
            doc.contexts.extend(_toml_templates(file, text, options.model, loader))
        else:
            doc.contexts.extend(_yaml_templates(file, text, model=options.model, loader=loader))
        if loader is not None:
            doc.warnings.extend(loader.notes)
        return doc


SOURCE = PromptFileSource()
