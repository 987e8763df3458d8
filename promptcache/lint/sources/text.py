"""Plain-text and Markdown prompts (``.txt``, ``.md``, ``.markdown``, ``.prompt``).

The whole file is one template; its placeholder syntax is detected (Jinja, Go / Handlebars /
Semantic Kernel ``{{ }}`` placeholders, ``str.format`` fields) so volatile holes such as
``{{$time}}`` or ``{current_date}`` are found. A file without placeholders has nothing that
varies and yields no findings.
"""

from __future__ import annotations

from pathlib import PurePath

from promptcache.lint.engine import TemplateContext
from promptcache.lint.sources.base import Document, LoadOptions, parse_suppressions
from promptcache.lint.sources.templating import line_position, pieces_for

__all__ = ["SOURCE", "TextSource"]


class TextSource:
    """Plain-text / Markdown prompt files."""

    name = "text"
    suffixes: tuple[str, ...] = (".txt", ".md", ".markdown", ".prompt")

    def load(self, file: str, text: str, options: LoadOptions) -> Document:
        """See :class:`promptcache.lint.sources.base.Source`."""
        syntax, pieces = pieces_for(text, line_position(text))
        doc = Document(file, suppressions=parse_suppressions(text))
        if any(p.kind == "hole" for p in pieces):
            doc.contexts.append(TemplateContext(file, PurePath(file).name, syntax, pieces,
                                                model=options.model))
        return doc


SOURCE = TextSource()
