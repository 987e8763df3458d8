"""SARIF 2.1.0 output for code scanning (GitHub, GitLab, Azure DevOps).

``tool.driver.rules`` comes from the rule registry (every rule, with its doc as ``help``);
each finding is a ``result`` with ``ruleId``/``ruleIndex``, ``level``, a physical location
(``startLine``/``startColumn``) and a ``partialFingerprints`` entry (our baseline
fingerprint). Input errors become ``toolExecutionNotifications`` and set
``executionSuccessful`` to false. Spec: https://docs.oasis-open.org/sarif/sarif/v2.1.0/
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import IO, TYPE_CHECKING, Any

from promptcache.lint.formats._meta import tool_version
from promptcache.lint.rules import all_rules

if TYPE_CHECKING:
    from promptcache.lint.api import LintResult

__all__ = ["emit", "to_sarif"]

_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(file: str) -> str:
    if file in ("-", "<request>"):
        return "stdin"
    return PurePath(file).as_posix().lstrip("/") if not file.startswith("/") else \
        "file://" + PurePath(file).as_posix()


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
                    "artifactLocation": {"uri": _uri(f.file)},
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
        "level": "error",
        "message": {"text": e.reason},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(e.file)}}}],
    } for e in result.errors]
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
            "invocations": [{
                "executionSuccessful": not result.errors,
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
        }],
    }


def emit(result: LintResult, stream: IO[str]) -> None:
    """Write the SARIF log as JSON."""
    json.dump(to_sarif(result), stream, indent=2, ensure_ascii=False, default=str)
    stream.write("\n")
