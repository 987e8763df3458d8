"""SARIF 2.1.0 output for code scanning (GitHub, GitLab, Azure DevOps).

``tool.driver.rules`` comes from the rule registry (every rule, with its doc as ``help``);
each finding is a ``result`` with ``ruleId``/``ruleIndex``, ``level``, a physical location
(``startLine``/``startColumn``) and a ``partialFingerprints`` entry (our baseline
fingerprint, over the project-relative path: the same however the file was named). Relative locations carry ``uriBaseId`` ``%SRCROOT%``, which the run's
``originalUriBaseIds`` sets to the current folder's ``file://`` URI. Input errors become
``toolExecutionNotifications`` and set ``executionSuccessful`` to false; columns are
counted in characters (``columnKind`` ``unicodeCodePoints``); input warnings (a
JSONL log's incomplete last line, skipped) are notifications of level ``warning``.
Spec: https://docs.oasis-open.org/sarif/sarif/v2.1.0/
"""

from __future__ import annotations

import json
from pathlib import Path, PurePath
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import quote

from promptcache.lint.formats._meta import tool_version
from promptcache.lint.rules import all_rules

if TYPE_CHECKING:
    from promptcache.lint.api import LintResult

__all__ = ["emit", "to_sarif"]

_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


#: The ``uriBaseId`` of relative artifact locations: the folder promptcache ran in, declared
#: in the run's ``originalUriBaseIds`` (SARIF 2.1.0 §3.14.14, §3.4.4), so that a consumer
#: (GitHub code scanning) resolves them wherever the run started, a subfolder too.
SRCROOT = "%SRCROOT%"


def _location(file: str) -> dict[str, str]:
    """The ``artifactLocation`` of ``file``: a relative URI reference (percent-encoded) with
    ``uriBaseId`` :data:`SRCROOT`, an absolute ``file://`` URI, or ``stdin``."""
    if file in ("-", "<request>"):
        return {"uri": "stdin"}
    path = PurePath(file)
    if path.is_absolute():
        return {"uri": Path(file).as_uri()}
    # surrogateescape: a file name that is not UTF-8 (a byte kept as a lone surrogate by
    # os.fsdecode) is percent-encoded as its own byte, as Path.as_uri does, not an error
    return {"uri": quote(path.as_posix(), safe="/", errors="surrogateescape"),
            "uriBaseId": SRCROOT}


def _srcroot() -> str:
    """The current working directory as a ``file://`` URI ending in ``/`` (§3.14.14)."""
    uri = Path.cwd().as_uri()
    return uri if uri.endswith("/") else uri + "/"


def to_sarif(result: LintResult) -> dict[str, Any]:
    """The SARIF 2.1.0 log for a result (a JSON-ready dict)."""
    rules = all_rules()
    index = {r.code: i for i, r in enumerate(rules)}
    driver_rules = [{
        "id": r.code,
        "name": r.name,
        "shortDescription": {"text": r.summary},
        "fullDescription": {"text": r.doc_sections().get("What it does", r.summary)},
        "help": {"text": r.doc(), "markdown": r.doc()},
        "defaultConfiguration": {"level": _LEVEL[r.severity.value],
                                 "enabled": r.status == "stable"},
        "properties": {"tags": list(r.groups), "status": r.status, "since": r.since},
    } for r in rules]
    results = []
    for f in result.findings:
        res: dict[str, Any] = {
            "ruleId": f.code,
            "ruleIndex": index.get(f.code, 0),
            "level": _LEVEL[f.severity.value],
            "message": {"text": f.message + (f" Fix: {f.fix}" if f.fix else "")},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": _location(f.file),
                    "region": {"startLine": max(1, f.line), "startColumn": max(1, f.col)},
                },
            }],
            "partialFingerprints": {"promptcache/v1": f.fingerprint},
            "properties": {k: v for k, v in f.details.items()
                           if isinstance(v, (str, int, float, bool, list)) or v is None},
        }
        if f.path:
            res["locations"][0]["logicalLocations"] = [{"fullyQualifiedName": f.path,
                                                        "kind": "member"}]
        results.append(res)
    notifications = [{
        "level": level,
        "message": {"text": e.reason},
        "locations": [{"physicalLocation": {"artifactLocation": _location(e.file)}}],
    } for level, items in (("warning", result.warnings), ("error", result.errors))
        for e in items]
    ver = tool_version()
    return {
        "$schema": _SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "promptcache",
                "informationUri": "https://github.com/promptcache/promptcache",
                "version": ver,
                "rules": driver_rules,
            }},
            "originalUriBaseIds": {SRCROOT: {"uri": _srcroot()}},
            # Finding.col counts characters (code points); SARIF's default unit is UTF-16
            # code units (§3.14.17), which differ after an emoji or other astral character
            "columnKind": "unicodeCodePoints",
            "invocations": [{
                "executionSuccessful": not result.errors,
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
        }],
    }


def emit(result: LintResult, stream: IO[str]) -> None:
    """Write the SARIF log as JSON, ASCII only (non-ASCII text as ``\\uXXXX`` escapes), so
    that the file is valid UTF-8 (SARIF §3.1) whatever the stream's encoding (a Windows
    console redirected to a file writes cp1252)."""
    json.dump(to_sarif(result), stream, indent=2, ensure_ascii=True, default=str)
    stream.write("\n")
