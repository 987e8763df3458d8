"""The Source interface: one module per input kind turns a file's text into lint contexts.

A source module defines one :class:`Source` object named ``SOURCE``::

    SOURCE.name        "request" | "log" | "jinja" | "prompt-file" | "text" | "python"
    SOURCE.suffixes    file suffixes it claims (".json", ".j2", ...)
    SOURCE.load(file, text, options) -> Document      # raises InputError on bad input

:func:`promptcache.lint.sources.source_for` picks the source by suffix (and by content for
stdin). Adding an input kind is one new module plus one line in ``sources/__init__.py``.
A :class:`Document` carries the contexts (see :mod:`promptcache.lint.engine`) and the
inline suppressions (``promptcache: ignore[PC101,PC104]`` on a line; ``promptcache: ignore``
alone silences every rule on that line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from promptcache.lint.engine import Context

__all__ = ["Document", "LoadOptions", "Source", "parse_suppressions"]

_SUPPRESS = re.compile(r"promptcache:\s*ignore(?:\[([^\]]*)\])?", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class LoadOptions:
    """Options every source receives.

    Attributes:
        model: ``--model``: overrides the model a request or template names.
        provider: force a request shape (``"anthropic"``, ``"openai-chat"``,
            ``"openai-responses"``); None detects it.
        root: the project folder (absolute) files a linted file refers to must stay in
            (Jinja ``{% include %}``); None: the linted file's own folder.
    """

    model: str | None = None
    provider: str | None = None
    root: str | None = None


@dataclass
class Document:
    """What a source made of one file.

    Attributes:
        file: the input name.
        contexts: the lint contexts (requests, logs, templates, Python flows).
        suppressions: line -> codes silenced on that line (None: every code).
        skipped: why nothing was linted (a JSON file that is not a request), or None.
        warnings: problems that did not stop the file being linted, one sentence each
            (``line 5: incomplete last line (no newline at end), skipped``).
    """

    file: str
    contexts: list[Context] = field(default_factory=list)
    suppressions: dict[int, frozenset[str] | None] = field(default_factory=dict)
    skipped: str | None = None
    warnings: list[str] = field(default_factory=list)


class Source(Protocol):
    """One input kind (see the module docstring)."""

    name: str
    suffixes: tuple[str, ...]

    def load(self, file: str, text: str, options: LoadOptions) -> Document:
        """Parse ``text`` into a :class:`Document`.

        Raises:
            promptcache._errors.InputError: the text cannot be parsed (names the reason and,
                where known, the line).
        """
        ...


def parse_suppressions(text: str) -> dict[int, frozenset[str] | None]:
    """Inline suppressions: ``{line: codes or None}`` for every ``promptcache: ignore`` marker.

    The marker may sit in any comment syntax (``# ...``, ``{# ... #}``, ``<!-- ... -->``).
    """
    out: dict[int, frozenset[str] | None] = {}
    if "promptcache" not in text:
        return out
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _SUPPRESS.search(line)
        if not m:
            continue
        if m.group(1) is None:
            out[lineno] = None
        else:
            codes = frozenset(c.strip().upper() for c in m.group(1).split(",") if c.strip())
            prev = out.get(lineno, frozenset())
            out[lineno] = None if prev is None else prev | codes
    return out
