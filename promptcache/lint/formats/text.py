"""Human-readable output: ``file:line:col: CODE [severity] message`` plus a fix hint line, and
a summary line that also counts the findings the severity floor (``--min-severity`` or
``min-severity`` in ``pyproject.toml``) and ``--baseline`` hid
(``All checks passed (8 files; 5 findings below min-severity error).``); when every file read
was skipped (a JSON file that is not a request), ``Nothing linted: 1 file skipped, ...`` and
each file's reason."""

from __future__ import annotations

from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from promptcache.lint.api import LintResult

__all__ = ["emit"]


def _hidden(result: LintResult) -> str:
    """The findings the severity floor and the baseline hid, as one phrase ("" for none):
    ``5 findings below min-severity error, 2 findings in the --baseline`` (the floor may come
    from ``--min-severity`` or from ``pyproject.toml``)."""
    parts = [f"{n} finding{'s' if n != 1 else ''} below min-severity {floor}"
             for floor, n in sorted(result.below_severity.items()) if n]
    if result.in_baseline:
        n = result.in_baseline
        parts.append(f"{n} finding{'s' if n != 1 else ''} in the --baseline")
    return ", ".join(parts)


def emit(result: LintResult, stream: IO[str]) -> None:
    """Write findings (one per line, with an indented ``fix:`` hint) and a summary line."""
    for f in result.findings:
        where = f" ({f.path})" if f.path else ""
        stream.write(f"{f.file}:{f.line}:{f.col}: {f.code} [{f.severity.value}] "
                     f"{f.message}{where}\n")
        if f.fix:
            stream.write(f"    fix: {f.fix}\n")
    n = len(result.findings)
    checked = len(result.files) - len(result.skipped)
    skipped = f", {len(result.skipped)} skipped" if result.skipped else ""
    hidden = _hidden(result)
    if n:
        counts = {s: sum(1 for f in result.findings if f.severity.value == s)
                  for s in ("error", "warning", "info")}
        parts = ", ".join(f"{v} {k}{'s' if v != 1 and k != 'info' else ''}"
                          for k, v in counts.items() if v)
        stream.write(f"Found {n} finding{'s' if n != 1 else ''} ({parts}) in "
                     f"{checked} file{'s' if checked != 1 else ''}{skipped}"
                     f"{f'; not shown: {hidden}' if hidden else ''}.\n")
    elif not result.errors and checked == 0 and result.skipped:
        # a file named on the command line that holds nothing to lint has not "passed"
        k = len(result.skipped)
        stream.write("Nothing linted: 1 file skipped, not a lintable input (reason below).\n"
                     if k == 1 else f"Nothing linted: {k} files skipped, none a lintable "
                     "input (reasons below).\n")
    elif not result.errors:
        stream.write(f"All checks passed ({checked} "
                     f"file{'s' if checked != 1 else ''}{skipped}{f'; {hidden}' if hidden else ''}"
                     ").\n")
    for file, why in sorted(result.skipped.items()):
        stream.write(f"{file}: skipped: {why}\n")
