"""The exception tree of promptcache.

::

    PromptCacheError                 base of every error promptcache raises on purpose
    ├── InvalidRequestError          a payload is malformed (names the path and the reason)
    ├── UnknownModelError            a model id the catalog does not know (names close ids)
    ├── CatalogError                 the catalog or a price override file is broken
    ├── OrderingError                builder: a more stable section after a less stable one
    ├── VolatileValueError           builder: a volatile value inside the cached prefix
    ├── PlanError                    planner: no valid breakpoint plan exists
    ├── PromptCacheLintError         wrapper (lint="error"): findings before sending
    ├── InputError                   linter/CLI: an input file cannot be read or parsed
    └── PoolExhaustedError           local backend: every KV block is pinned

User mistakes raise one of these (or exit with code 2 on the CLI); never a bare traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "CatalogError",
    "InputError",
    "InvalidRequestError",
    "OrderingError",
    "PlanError",
    "PoolExhaustedError",
    "PromptCacheError",
    "PromptCacheLintError",
    "UnknownModelError",
    "VolatileValueError",
]


class PromptCacheError(Exception):
    """Base class of every error promptcache raises on purpose."""


class InvalidRequestError(PromptCacheError, ValueError):
    """A request payload is malformed.

    Attributes:
        path: where in the payload (``"messages[3].content[1]"``; ``""`` for the root).
        reason: what is wrong, in one sentence.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        where = path or "<root>"
        super().__init__(f"{where}: {reason}")


class UnknownModelError(PromptCacheError, KeyError):
    """The catalog has no cache policy for a model id.

    Attributes:
        model: the id asked for.
        suggestions: the closest known ids (best first, possibly empty).
    """

    def __init__(self, model: str, suggestions: Sequence[str] = ()) -> None:
        self.model = model
        self.suggestions = list(suggestions)
        hint = f"; closest known ids: {', '.join(self.suggestions)}" if self.suggestions else ""
        super().__init__(
            f"unknown model {model!r}{hint}. Pass an explicit policy= to use a model "
            "the catalog does not list."
        )

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class CatalogError(PromptCacheError):
    """The shipped catalog data or a user override file is malformed."""


class OrderingError(PromptCacheError, ValueError):
    """A section was added after a less stable one (builder)."""


class VolatileValueError(PromptCacheError, ValueError):
    """A value declared volatile would land inside the cached prefix (builder)."""


class PlanError(PromptCacheError, ValueError):
    """No breakpoint plan satisfies the provider's rules for this request."""


class PromptCacheLintError(PromptCacheError):
    """Raised by the SDK wrapper with ``lint="error"`` when a request has findings.

    Attributes:
        findings: the lint findings that blocked the request.
    """

    def __init__(self, message: str, findings: Sequence[Any] = ()) -> None:
        self.findings = list(findings)
        super().__init__(message)


class InputError(PromptCacheError):
    """An input file cannot be read or parsed (linter, diff, report, explain).

    Attributes:
        file: the file's path (``"-"`` for standard input).
        reason: what is wrong, in one sentence.
    """

    def __init__(self, file: str, reason: str) -> None:
        self.file = file
        self.reason = reason
        super().__init__(f"{file}: {reason}")


class PoolExhaustedError(PromptCacheError):
    """The local backend cannot admit a request: every KV block is pinned."""
