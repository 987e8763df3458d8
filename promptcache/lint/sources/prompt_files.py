"""YAML / TOML prompt files and Prompty files.

Which strings are prompts: every string value whose key path names a prompt part — a key (or
an ancestor key) that is ``system``, ``prompt``, ``template``, ``instructions``, ``message``,
``messages`` or ``content``, or ends in ``_template`` / ``_prompt`` / ``_message`` (as agent
frameworks write them: SWE-agent ``system_template``, smolagents ``prompt_templates``,
Gemini CLI ``prompt``). Each is one template (syntax detected; see
:mod:`promptcache.lint.sources.templating`); Jinja syntax errors inside a YAML string fall back
to placeholder recognition, because such strings are often Mustache or Handlebars.

Positions: YAML scalars keep their marks (block scalars map line by line; folded ``>``
scalars point at their first line); TOML values are found by their key in the raw text.

Prompty (``.prompty``): YAML front matter between ``---`` lines (its ``model`` is used for
token counts) and a Jinja body with ``system:`` / ``user:`` role markers.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import PurePath
from typing import Any

import yaml

from promptcache._errors import InputError
from promptcache.lint.engine import TemplateContext
from promptcache.lint.sources.base import Document, LoadOptions, parse_suppressions
from promptcache.lint.sources.templating import (
    JinjaSyntaxError,
    Position,
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
def _yaml_scalars(node: yaml.Node, keys: list[str]) -> Iterator[tuple[list[str], yaml.ScalarNode]]:
    if isinstance(node, yaml.MappingNode):
        for knode, vnode in node.value:
            key = str(knode.value) if isinstance(knode, yaml.ScalarNode) else "?"
            yield from _yaml_scalars(vnode, [*keys, key])
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _yaml_scalars(item, keys)
    elif isinstance(node, yaml.ScalarNode) and node.tag.endswith(":str"):
        yield keys, node


def _yaml_position(node: yaml.ScalarNode, lines: list[str], base_line: int) -> Position:
    start_line = node.start_mark.line  # 0-based
    start_col = node.start_mark.column
    if node.style in ("|",) and start_line + 1 < len(lines):
        first = start_line + 1
        while first < len(lines) and not lines[first].strip():
            first += 1
        indent = len(lines[first]) - len(lines[first].lstrip(" ")) if first < len(lines) else 0
        value: str = node.value

        def block(offset: int) -> tuple[int, int]:
            k = value.count("\n", 0, offset)
            col = offset - (value.rfind("\n", 0, offset) + 1)
            return base_line + start_line + 1 + k, indent + col + 1

        return block
    quote = 1 if node.style in ('"', "'") else 0

    def inline(offset: int) -> tuple[int, int]:
        if node.style in (">",) or "\n" in node.value[:offset]:
            return base_line + start_line, start_col + 1
        return base_line + start_line, start_col + quote + offset + 1

    return inline


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's reason on one line (a ReaderError has no ``problem`` and a multi-line str)."""
    problem = getattr(exc, "problem", None) or str(exc)
    return " ".join(str(problem).split())


def _yaml_templates(file: str, text: str, base_line: int = 1,
                    model: str | None = None) -> list[TemplateContext]:
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
    for root in docs:
        if root is None:
            continue
        for keys, node in _yaml_scalars(root, []):
            value = node.value
            if not isinstance(value, str) or not value.strip() or not _is_prompt_path(keys):
                continue
            syntax, pieces = pieces_for(value, _yaml_position(node, lines, base_line))
            if any(p.kind == "hole" for p in pieces):
                out.append(TemplateContext(file, ".".join(keys) or "<root>", syntax, pieces,
                                           model=model))
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


def _toml_position(text: str, key: str, value: str) -> Position:
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


def _toml_templates(file: str, text: str, model: str | None) -> list[TemplateContext]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(file, f"invalid TOML: {exc}") from None
    except RecursionError:
        raise InputError(file, "TOML nested too deeply") from None
    out: list[TemplateContext] = []
    for keys, value in _toml_strings(data, []):
        if not value.strip() or not _is_prompt_path(keys):
            continue
        syntax, pieces = pieces_for(value, _toml_position(text, keys[-1], value))
        if any(p.kind == "hole" for p in pieces):
            out.append(TemplateContext(file, ".".join(keys), syntax, pieces, model=model))
    return out


# ------------------------------------------------------------------------ prompty
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*\r?\n", re.DOTALL)


def _prompty(file: str, text: str, options: LoadOptions) -> list[TemplateContext]:
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
        pieces = jinja_pieces(body, line_position(body, base_line))
    except JinjaSyntaxError as exc:
        where = f" at line {exc.lineno + base_line - 1}" if exc.lineno else ""
        raise InputError(file, f"Jinja syntax error{where}: {exc}") from None
    if not any(p.kind == "hole" for p in pieces):
        return []
    return [TemplateContext(file, PurePath(file).name, "jinja", pieces, model=model)]


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
        if suffix == ".prompty" or (suffix not in (".yaml", ".yml", ".toml")
                                    and _FRONT.match(text) is not None):
            doc.contexts.extend(_prompty(file, text, options))
        elif suffix == ".toml":
            doc.contexts.extend(_toml_templates(file, text, options.model))
        else:
            doc.contexts.extend(_yaml_templates(file, text, model=options.model))
        return doc


SOURCE = PromptFileSource()
