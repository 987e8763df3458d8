"""JSON output: ``{"version", "findings": [...], "errors": [{"file", "reason"}], "warnings":
[{"file", "reason"}], "files",
"skipped": [{"file", "reason"}], "empty_folders": [...], "hidden": {"below_severity": {floor:
count}, "in_baseline": count}, "unknown_models": [{"file", "models", "skipped_rules",
"provider_wide_rules"}]}``. ``files`` lists every file read; ``skipped`` the ones among them
that held nothing to lint (a JSON file that is not a request); ``empty_folders`` the folders
named on the command line with no file to lint; ``warnings`` the problems that did not stop a
file being linted (a JSONL log's incomplete last line); ``hidden`` the findings left out by
``--min-severity`` and ``--baseline``.

The same document is accepted back as a ``--baseline`` file.
"""

from __future__ import annotations

import json
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from promptcache.lint.api import LintResult

from promptcache.lint.formats._meta import tool_version

__all__ = ["emit"]


def emit(result: LintResult, stream: IO[str]) -> None:
    """Write the result as one JSON document, ASCII only (non-ASCII text as ``\\uXXXX``
    escapes): valid UTF-8 whatever the stream's encoding (a Windows console redirected to a
    file writes cp1252, which ``--baseline`` would refuse as not UTF-8)."""
    doc = {
        "version": tool_version(),
        "findings": [f.to_dict() for f in result.findings],
        "errors": [{"file": e.file, "reason": e.reason} for e in result.errors],
        "warnings": [{"file": w.file, "reason": w.reason} for w in result.warnings],
        "files": result.files,
        "skipped": [{"file": file, "reason": why} for file, why in sorted(result.skipped.items())],
        "empty_folders": list(result.empty_folders),
        "hidden": {"below_severity": dict(result.below_severity),
                   "in_baseline": result.in_baseline},
        "unknown_models": [{"file": file, **note.to_dict()}
                           for file, note in result.unknown_models.items()],
    }
    json.dump(doc, stream, indent=2, ensure_ascii=True, default=str)
    stream.write("\n")
