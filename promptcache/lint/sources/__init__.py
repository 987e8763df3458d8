"""Input kinds of the linter, one module each (see :mod:`promptcache.lint.sources.base`).

``SOURCES`` lists them; :func:`source_for` picks one by file suffix, or by content for
standard input.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from promptcache.lint.sources.base import Document, LoadOptions, Source, parse_suppressions
from promptcache.lint.sources.jinja import SOURCE as JINJA
from promptcache.lint.sources.log_jsonl import SOURCE as JSONL
from promptcache.lint.sources.prompt_files import SOURCE as PROMPT_FILES
from promptcache.lint.sources.python_ast import SOURCE as PYTHON
from promptcache.lint.sources.request_json import SOURCE as REQUEST_JSON
from promptcache.lint.sources.text import SOURCE as TEXT

__all__ = ["SOURCES", "Document", "LoadOptions", "Source", "parse_suppressions", "source_for",
           "source_for_content", "suffixes"]

SOURCES: tuple[Source, ...] = (REQUEST_JSON, JSONL, JINJA, PROMPT_FILES, TEXT, PYTHON)
_BY_SUFFIX: dict[str, Source] = {s: src for src in SOURCES for s in src.suffixes}
#: A Handlebars / Mustache section tag (``{{#if x}}``, ``{{/if}}``, ``{{^x}}``): Jinja has none.
_HANDLEBARS_BLOCK = re.compile(r"\{\{~?[#/^]")


def suffixes() -> frozenset[str]:
    """Every suffix some source claims (lower case, with the dot)."""
    return frozenset(_BY_SUFFIX)


def source_for(file: str) -> Source | None:
    """The source for a file name (by suffix, case-insensitive), or None."""
    return _BY_SUFFIX.get(PurePath(file).suffix.lower())


def source_for_content(text: str) -> Source:
    """Guess the input kind of unnamed text (standard input)."""
    stripped = text.lstrip()
    if ("{%" not in text and (stripped.startswith("{{") or not stripped.startswith(("{", "[")))
            and _HANDLEBARS_BLOCK.search(text)):
        return TEXT  # {{#if}} / {{/each}}: Handlebars or Mustache, not Jinja (nor JSON)
    if stripped.startswith("{"):
        lines = [ln for ln in stripped.splitlines() if ln.strip()]
        if len(lines) > 1 and all(ln.lstrip().startswith("{") and ln.rstrip().endswith("}")
                                  for ln in lines):
            return JSONL
        return REQUEST_JSON
    if stripped.startswith("["):
        return REQUEST_JSON
    if stripped.startswith("---"):
        return PROMPT_FILES
    if "{%" in text or "{{" in text:
        return JINJA
    head = stripped[:2000]
    if any(tok in head for tok in ("import ", "def ", "from ", "class ")):
        return PYTHON
    return TEXT
