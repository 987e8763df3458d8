"""GitHub Actions workflow commands: one ``::error`` / ``::warning`` / ``::notice`` per finding
(shown as annotations on the pull request), one ``::error`` per input error and one
``::warning`` per input warning (a JSONL log's incomplete last line, skipped).

Format: https://docs.github.com/en/actions/reference/workflow-commands-for-github-actions
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from promptcache.lint.api import LintResult

__all__ = ["emit"]

_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(value: str) -> str:
    return _data(value).replace(":", "%3A").replace(",", "%2C")


def emit(result: LintResult, stream: IO[str]) -> None:
    """Write one workflow command per finding, per input error and per input warning."""
    for f in result.findings:
        title = _prop(f"{f.code} {f.name}")
        stream.write(f"::{_LEVEL[f.severity.value]} file={_prop(f.file)},line={f.line},"
                     f"col={f.col},title={title}::{_data(f.message)}\n")
    for w in result.warnings:
        stream.write(f"::warning file={_prop(w.file)},title=promptcache input warning::"
                     f"{_data(w.reason)}\n")
    for e in result.errors:
        stream.write(f"::error file={_prop(e.file)},title=promptcache input error::"
                     f"{_data(e.reason)}\n")
