"""Jinja2 templates (``.j2``, ``.jinja``, ``.jinja2``): parsed with jinja2, never rendered.

The whole file is one template (see :mod:`promptcache.lint.sources.templating`). A syntax
error is an input error naming the line (``Jinja syntax error at line 7: unexpected '}'``).
"""

from __future__ import annotations

from pathlib import PurePath

from promptcache._errors import InputError
from promptcache.lint.engine import TemplateContext
from promptcache.lint.sources.base import Document, LoadOptions, parse_suppressions
from promptcache.lint.sources.templating import JinjaSyntaxError, jinja_pieces, line_position

__all__ = ["SOURCE", "JinjaSource"]


class JinjaSource:
    """Jinja2 template files."""

    name = "jinja"
    suffixes: tuple[str, ...] = (".j2", ".jinja", ".jinja2")

    def load(self, file: str, text: str, options: LoadOptions) -> Document:
        """See :class:`promptcache.lint.sources.base.Source`."""
        try:
            pieces = jinja_pieces(text, line_position(text))
        except JinjaSyntaxError as exc:
            where = f" at line {exc.lineno}" if exc.lineno else ""
            raise InputError(file, f"Jinja syntax error{where}: {exc}") from None
        doc = Document(file, suppressions=parse_suppressions(text))
        doc.contexts.append(TemplateContext(file, PurePath(file).name, "jinja", pieces,
                                            model=options.model))
        return doc


SOURCE = JinjaSource()
