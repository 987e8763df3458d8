"""Plain-text, Markdown and Handlebars / Mustache prompts (``.txt``, ``.md``, ``.markdown``,
``.prompt``, ``.hbs``, ``.handlebars``, ``.mustache``).

The whole file is one template; its placeholder syntax is detected (Jinja, Go / Handlebars /
Semantic Kernel ``{{ }}`` placeholders, ``str.format`` fields) so volatile holes such as
``{{$time}}`` or ``{current_date}`` are found. A file without placeholders has nothing that
varies and yields no findings.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from pathlib import PurePath

from promptcache.lint.engine import TemplateContext
from promptcache.lint.sources.base import Document, LoadOptions, parse_suppressions
from promptcache.lint.sources.templating import (
    FORMAT_FIELD,
    line_position,
    pieces_for,
    regex_pieces,
)

__all__ = ["SOURCE", "TextSource"]


class TextSource:
    """Plain-text / Markdown prompt files."""

    name = "text"
    suffixes: tuple[str, ...] = (".txt", ".md", ".markdown", ".prompt", ".hbs", ".handlebars",
                                 ".mustache")

    def load(self, file: str, text: str, options: LoadOptions) -> Document:
        """See :class:`promptcache.lint.sources.base.Source`.

        In Markdown, single-brace ``str.format`` fields inside code (fenced blocks, inline
        code spans), HTML tags and URL paths are not holes: API documentation writes
        ``/v1/sessions/{session_id}/messages`` there (new-user trial 14). ``{{ }}`` placeholders
        are holes wherever they are (Jinja renders them inside code spans too)."""
        position = line_position(text)
        syntax, pieces = pieces_for(text, position)
        if syntax == "format" and PurePath(file).suffix.lower() in (".md", ".markdown"):
            skip = _markdown_code_regions(text)
            pieces = regex_pieces(text, position, FORMAT_FIELD, skip=skip)
        doc = Document(file, suppressions=parse_suppressions(text))
        if any(p.kind == "hole" for p in pieces):
            doc.contexts.append(TemplateContext(file, PurePath(file).name, syntax, pieces,
                                                model=options.model))
        return doc


#: Markdown regions whose braces are not template fields: fenced code blocks, inline code
#: spans, HTML tags, and URL or path tokens holding a ``/{...}`` segment.
_MD_REGIONS = re.compile(
    r"^(?P<fence>```|~~~)[^\n]*\n.*?^(?P=fence)[^\n]*$"   # fenced code block
    r"|`[^`\n]+`"                                          # inline code span
    r"|<[A-Za-z/!][^<>\n]*>"                               # HTML tag (attributes included)
    r"|(?:[A-Za-z][\w+.-]*://|/)[^\s`<>()\[\]\"']*/\{[^\s`<>()\[\]\"']*",  # URL path
    re.MULTILINE | re.DOTALL)


def _markdown_code_regions(text: str) -> Callable[[int], bool]:
    """Whether an offset of ``text`` lies inside one of :data:`_MD_REGIONS`."""
    starts: list[int] = []
    ends: list[int] = []
    for m in _MD_REGIONS.finditer(text):
        starts.append(m.start())
        ends.append(m.end())

    def inside(offset: int) -> bool:
        i = bisect.bisect_right(starts, offset) - 1
        return i >= 0 and offset < ends[i]

    return inside


SOURCE = TextSource()
