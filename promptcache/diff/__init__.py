"""Cache-miss forensics: ``diff`` (why request B misses what request A cached) and
``explain`` (every miss of a request log, by cause, count and USD).

Public surface: :func:`diff`, :class:`DiffResult`, :func:`explain`, :class:`ExplainReport`,
the cause table :data:`CAUSES`, and the click commands ``diff_command`` / ``explain_command``
(wired into ``promptcache diff`` / ``promptcache explain``).
"""

from __future__ import annotations

from promptcache.diff._causes import CAUSES, CauseInfo
from promptcache.diff._cli import diff_command, explain_command
from promptcache.diff._engine import diff
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
    "RequestExplanation",
    "diff",
    "diff_command",
    "explain",
    "explain_command",
]
