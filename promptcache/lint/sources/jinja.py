"""Jinja2 templates (``.j2``, ``.jinja``, ``.jinja2``): parsed with jinja2, never rendered.

The whole file is one template (see :mod:`promptcache.lint.sources.templating`). A syntax
error is an input error naming the line (``Jinja syntax error at line 7: unexpected '}'``).
``{% include %}``, ``{% import %}``, ``{% from ... import %}`` and ``{% extends %}`` are
followed relative to the template's folder (parsed, never rendered): an included file's
volatile value counts at the include site, a macro whose output is volatile counts where it
is called, and an extended layout's text counts where the layout has it (a finding there
names the layout file and its line), with the template's blocks in their places. An include
or layout that cannot be followed (missing file, cycle, symlink loop, syntax error, computed
name) is a warning on the file, never an error. Only files under the project folder (the configuration's
root, else the nearest folder above holding ``pyproject.toml`` / ``.git``, when the template
is under it; else the template's own folder) are read: an absolute name or one that leads
outside is a warning naming the include, and nothing of that file is read.
"""

from __future__ import annotations

from pathlib import Path, PurePath

from promptcache._errors import InputError
from promptcache.lint.sources.base import Document, LoadOptions, parse_suppressions
from promptcache.lint.sources.templating import (
    JinjaSyntaxError,
    LayoutTemplateContext,
    TemplateLoader,
    jinja_pieces,
    line_position,
)

__all__ = ["SOURCE", "JinjaSource", "template_loader"]


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError on 3.11)
        return path.absolute()


def template_loader(file: str, options: LoadOptions) -> TemplateLoader:
    """The include loader of template ``file`` (a ``.j2`` file, or a YAML / TOML / Prompty
    file embedding templates): includes must stay in ``options.root`` (the project folder)
    when the file is in it and it is not the filesystem root (``lint`` run from ``/`` with
    no project marker), else in the file's own folder. Never raises."""
    here = _resolved(Path(file))
    folder = _resolved(Path(file).parent)
    root = _resolved(Path(options.root)) if options.root else folder
    if not here.is_relative_to(root) or root == Path(root.anchor):  # never the whole disk
        root = folder
    return TemplateLoader(Path(file).parent, stack=(here,), root=root, shown=file)


class JinjaSource:
    """Jinja2 template files."""

    name = "jinja"
    suffixes: tuple[str, ...] = (".j2", ".jinja", ".jinja2")

    def load(self, file: str, text: str, options: LoadOptions) -> Document:
        """See :class:`promptcache.lint.sources.base.Source`."""
        loader = template_loader(file, options) if file != "-" else None
        try:
            pieces = jinja_pieces(text, line_position(text), loader)
        except JinjaSyntaxError as exc:
            where = f" at line {exc.lineno}" if exc.lineno else ""
            raise InputError(file, f"Jinja syntax error{where}: {exc}") from None
        doc = Document(file, suppressions=parse_suppressions(text))
        if loader is not None:
            doc.warnings.extend(loader.notes)
        doc.contexts.append(LayoutTemplateContext(file, PurePath(file).name, "jinja", pieces,
                                                  model=options.model))
        return doc


SOURCE = JinjaSource()
