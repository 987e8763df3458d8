"""Cache-miss forensics: ``diff`` (why request B misses what request A cached) and
``explain`` (every miss of a request log, by cause, count and USD).

Public surface: :func:`diff`, :class:`DiffResult`, :func:`explain`, :class:`ExplainReport`,
the cause table :data:`CAUSES`, and the click commands ``diff_command`` / ``explain_command``
(wired into ``promptcache diff`` / ``promptcache explain``). Code that diffs many requests
(the SDK wrapper's live per-session diff) renders each request once with :func:`prepare` and
compares prepared requests with :func:`compare`.

Example::

    from promptcache.diff import diff

    result = diff(previous_request, request, usage_b=response.usage)
    print(result.cause, result.divergence.path if result.divergence else "-",
          result.lost_tokens, result.miss_cost_usd)
    for cause in result.causes:
        print(cause.code, cause.fix_hint)

Deviation from DESIGN.md: a package instead of one ``diff.py``: the cause table, the result
types, the observed-side readers (usage, diagnostics, prices), the engine, ``explain`` and the
CLI each live in their own module, so a cause or an input kind is added in one place.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from promptcache.diff._causes import CAUSES, CauseInfo
from promptcache.diff._cli import diff_command, explain_command
from promptcache.diff._engine import Prepared, compare, diff, prepare
from promptcache.diff._explain import explain
from promptcache.diff._model import (
    Cause,
    CauseSummary,
    Check,
    DiagnosticsComparison,
    DiffResult,
    Divergence,
    ExplainReport,
    ObservedUsage,
    PredictedUsage,
    RequestExplanation,
)

__all__ = [
    "CAUSES",
    "Cause",
    "CauseInfo",
    "CauseSummary",
    "Check",
    "DiagnosticsComparison",
    "DiffResult",
    "Divergence",
    "ExplainReport",
    "ObservedUsage",
    "PredictedUsage",
    "Prepared",
    "RequestExplanation",
    "compare",
    "diff",
    "diff_command",
    "explain",
    "explain_command",
    "prepare",
]


class _CallableModule(types.ModuleType):
    """The ``promptcache.diff`` package, callable as :func:`diff`.

    ``promptcache.diff`` names both this package and the function the package root exports
    lazily (``from promptcache import diff``). Python's import system sets the package root's
    ``diff`` attribute to this module whenever ``promptcache.diff`` (or any module below it)
    is imported, which the SDK wrapper's live diff does on first use; from then on
    ``from promptcache import diff`` gave the module and ``diff(a, b)`` raised "'module'
    object is not callable" (new-user trial 13). Calling the module calls the function, so
    either object works.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> DiffResult:
        return diff(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
