"""JSONL request logs: one request per line, for the cross-request rules.

Each non-blank line is a JSON object holding a request: the request body itself, or a record
with it under ``request`` / ``body`` / ``payload`` (see
:func:`promptcache.lint.sources.request_json.find_request`), optionally with the response
``usage`` (``usage``, ``response.usage``, ``response.body.usage``) and a send time
(``timestamp``, ``ts``, ``created_at``: epoch seconds or ms, or ISO 8601). Lines without a
request (metadata records) are ignored. Each request is linked (``previous``) to the latest
earlier request of the same provider, model and tool set, so rules compare what changed
between samples of one agent even when several agents share the log.
"""

from __future__ import annotations

from promptcache._errors import InputError
from promptcache.lint.sources.base import Document, LoadOptions, parse_suppressions
from promptcache.lint.sources.request_json import exchanges_to_log, load_json

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
        pos = 0
        for lineno, line in enumerate(text.split("\n"), 1):
            start = pos
            pos += len(line) + 1
            if not line.strip():
                continue
            try:
                records.append(load_json(file, line))
            except InputError as exc:
                raise InputError(file, f"line {lineno}: {exc.reason}") from None
            offsets.append(start)
        doc = Document(file, suppressions=parse_suppressions(text))
        log = exchanges_to_log(file, text, records, options, offsets)
        if log is None:
            doc.skipped = "no line holds a request"
        else:
            doc.contexts.append(log)
        return doc


SOURCE = JsonlSource()
