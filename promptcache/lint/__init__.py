"""promptcache lint: one rule set over request payloads, request logs, prompt templates and
Python source (see :mod:`promptcache.lint.engine` for the architecture).

Public API::

    lint_request(payload, *, model=None, provider=None, previous=None) -> list[Finding]
    lint_paths(paths, config=None) -> LintResult
"""

from __future__ import annotations

from promptcache.lint.api import LintResult as LintResult
from promptcache.lint.api import lint_paths as lint_paths
from promptcache.lint.api import lint_request as lint_request
from promptcache.lint.api import lint_text as lint_text
from promptcache.lint.config import LintConfig as LintConfig
from promptcache.lint.engine import Rule as Rule
from promptcache.lint.finding import Finding as Finding
from promptcache.lint.finding import Severity as Severity
from promptcache.lint.rules import all_rules as all_rules
from promptcache.lint.rules import get_rule as get_rule

__all__ = ["Finding", "LintConfig", "LintResult", "Rule", "Severity", "all_rules", "get_rule",
           "lint_paths", "lint_request", "lint_text"]
