"""Lint findings: what a rule reports, where, and how bad it is.

A :class:`Finding` is a flat, frozen record (like flake8's ``Violation``) that every output
format reads. Location is always ``file:line:col`` (1-based); for request payloads ``path``
also names the node inside the payload (``"system[0].text"``), and ``details`` carries the
rule-specific facts (``granularity``, ``json_key``, ``tokens_invalidated``,
``inside_cached_prefix``, ``breakpoint_path``, ``count``/``limit``, ...).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

__all__ = ["Baseline", "Finding", "Severity"]


class Severity(StrEnum):
    """How bad a finding is. ``error``: the API rejects the request (HTTP 400) or caching is
    certainly broken; ``warning``: a likely cache miss on every request; ``info``: worth knowing,
    often intended (a date in the system prompt, no routing key)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """2 for error, 1 for warning, 0 for info (for ``--min-severity``)."""
        return {"error": 2, "warning": 1, "info": 0}[self.value]

    @classmethod
    def parse(cls, value: str) -> Severity:
        """``"error"`` / ``"warning"`` / ``"info"`` (case-insensitive).

        Raises:
            ValueError: any other string.
        """
        try:
            return cls(value.strip().lower())
        except ValueError:
            raise ValueError(f"unknown severity {value!r}; use error, warning or info") from None


_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found by one rule.

    Attributes:
        code: the rule code (``"PC101"``).
        name: the rule's dotted name (``"volatile.timestamp"``).
        severity: :class:`Severity`.
        message: one sentence; says how many tokens lose caching where that is known.
        file: the input file (``"-"`` for stdin, ``"<request>"`` for :func:`lint_request`).
        line: 1-based line of the offending text.
        col: 1-based column (characters).
        path: the node inside a request payload (``"messages[0].content[1]"``), or None for
            templates and Python source.
        fix: a one-line fix hint (the rule's ``fix_title`` or a more specific one).
        details: rule-specific facts, JSON-serialisable (see each rule's doc).
        project_path: the file's path relative to the project root (POSIX), the identity
            :attr:`fingerprint` hashes so that ``src/a.json``, ``./src/a.json``, an absolute
            path or a run from another folder name the same finding;
            :func:`~promptcache.lint.api.lint_paths` sets it. None: :attr:`file` as given
            (``"-"``, ``"<request>"``). Not compared, not shown.
    """

    code: str
    name: str
    severity: Severity
    message: str
    file: str = "<request>"
    line: int = 1
    col: int = 1
    path: str | None = None
    fix: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    project_path: str | None = field(default=None, compare=False, repr=False)

    @property
    def rule(self) -> str:
        """Alias of :attr:`name` (the bug cases call it ``rule``)."""
        return self.name

    @property
    def fingerprint(self) -> str:
        """A line-independent identity for baselines (``--baseline``) and SARIF
        ``partialFingerprints``: sha256 hex over code, :attr:`project_path` (the path relative
        to the project root, however the file was named; :attr:`file` when unset), payload
        path, the matched text and the message with numbers removed (so token counts and line
        moves do not make an old finding look new)."""
        return self._digest(self.project_path if self.project_path is not None else self.file)

    @property
    def legacy_fingerprint(self) -> str:
        """The identity earlier versions wrote (over :attr:`file` exactly as displayed): a
        baseline they wrote still hides the finding when linted with the same spelling."""
        return self._digest(self.file)

    @property
    def layout_fingerprint(self) -> str | None:
        """For a finding in a layout or included template found through another template
        (``details["template"]``, named in the message as ``in child.j2``): the
        :attr:`fingerprint` the same problem has when the layout itself is linted (``in
        base.j2``), which a folder run keeps in its baseline (one finding per problem); None
        for any other finding."""
        template = self.details.get("template")
        own = self.file.replace("\\", "/").rsplit("/", 1)[-1]
        if not isinstance(template, str) or not template or template == own or \
                f" in {template}" not in self.message:
            return None
        return self._digest(self.project_path if self.project_path is not None else self.file,
                            self.message.replace(f" in {template}", f" in {own}"))

    def _digest(self, file: str, message: str | None = None) -> str:
        key = "\x00".join((
            self.code, file, self.path or "", str(self.details.get("match", "")),
            _DIGITS.sub("#", self.message if message is None else message),
        ))
        return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()

    def with_location(self, file: str, line: int, col: int) -> Finding:
        """A copy at another location (another file drops :attr:`project_path`)."""
        if file != self.file:
            return replace(self, file=file, line=line, col=col, project_path=None)
        return replace(self, file=file, line=line, col=col)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the ``--format json`` record)."""
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "path": self.path,
            "fix": self.fix,
            "details": dict(self.details),
            "fingerprint": self.fingerprint,
        }


class Baseline(frozenset[str]):
    """The findings of a ``--baseline`` file, with multiplicity: a frozenset of
    :attr:`Finding.fingerprint` values (so it stands wherever
    :attr:`~promptcache.lint.config.LintConfig.baseline` takes one) that also counts how
    many findings of the file carry each fingerprint (:attr:`counts`).

    Each entry hides one finding: a file whose baseline holds one ``datetime.now()`` ->
    ``system=`` flow and that now has two identical flows (same rule, file, payload path,
    match and message up to numbers) reports the second. A plain ``frozenset`` counts each
    fingerprint once.
    """

    counts: Mapping[str, int]

    def __new__(cls, fingerprints: Iterable[str] = ()) -> Baseline:
        items = list(fingerprints)
        self = super().__new__(cls, items)
        self.counts = Counter(items)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Baseline, ([f for f, n in self.counts.items() for _ in range(n)],))
