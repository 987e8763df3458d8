"""Output formats, one emitter module each: ``text``, ``json``, ``sarif``, ``github``.

An emitter is ``emit(result: LintResult, stream: IO[str]) -> None``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from promptcache.lint.api import LintResult
from promptcache.lint.formats import github, json_format, sarif, text

__all__ = ["FORMATS", "Emitter"]

Emitter = Callable[[LintResult, IO[str]], None]

FORMATS: dict[str, Emitter] = {
    "text": text.emit,
    "json": json_format.emit,
    "sarif": sarif.emit,
    "github": github.emit,
}
