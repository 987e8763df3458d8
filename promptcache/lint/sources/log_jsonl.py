"""JSONL request logs: one request per line, for the cross-request rules.

Each non-blank line is a JSON object holding a request: the request body itself, or a record
with it under ``request`` / ``body`` / ``payload`` (see
:func:`promptcache.lint.sources.request_json.find_request`), optionally with the response
``usage`` (``usage``, ``response.usage``, ``response.body.usage``) and a send time
(``timestamp``, ``ts``, ``created_at``: epoch seconds or ms, or ISO 8601). Lines without a
request (metadata records) are ignored. Each request is linked (``previous``) to the latest
earlier request of the same provider, model and tool set, so rules compare what changed
between samples of one agent even when several agents share the log.

A line that is not JSON is an input error (``line 5, column 101: invalid JSON (...)``), except
a last line without a terminating newline after complete ones: that is an append-only log
still being written (or whose writer stopped mid-line), so it is skipped with a warning
(:attr:`~promptcache.lint.sources.base.Document.warnings`) and the complete lines are linted.
"""

from __future__ import annotations

from promptcache._errors import InputError
from promptcache.lint.sources.base import Document, LoadOptions, parse_suppressions
from promptcache.lint.sources.request_json import InvalidJsonError, exchanges_to_log, load_json

__all__ = ["SOURCE", "JsonlSource"]


class JsonlSource:
    """``.jsonl`` / ``.ndjson`` request logs."""

    name = "log"
    suffixes: tuple[str, ...] = (".jsonl", ".ndjson")

    def load(self, file: str, text: str, options: LoadOptions) -> Document:
        """See :class:`promptcache.lint.sources.base.Source`."""
        if not text.strip():
            raise InputError(file, "empty file")
        records = []
        offsets: list[int] = []
        warnings: list[str] = []
        pos = 0
        lines = text.split("\n")
        for lineno, line in enumerate(lines, 1):
            start = pos
            pos += len(line) + 1
            if not line.strip():
                continue
            try:
                records.append(load_json(file, line, lineno))
            except InvalidJsonError:  # not one nested too deeply: that line is complete
                if lineno == len(lines) and records:
                    # no newline after it: a log being appended to, or cut mid-line
                    warnings.append(f"line {lineno}: incomplete last line (no newline at "
                                    "end), skipped")
                    break
                raise
            offsets.append(start)
        doc = Document(file, suppressions=parse_suppressions(text), warnings=warnings)
        log = exchanges_to_log(file, text, records, options, offsets)
        if log is None:
            doc.skipped = "no line holds a request"
        else:
            doc.contexts.append(log)
        return doc


SOURCE = JsonlSource()
