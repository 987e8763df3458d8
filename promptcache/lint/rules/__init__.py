"""The rule registry: one module per rule, named by its code.

``RULE_CODES`` is the registry (grouped by family, in the manner of ruff's ``codes.rs``);
each code's module ``promptcache.lint.rules.<CODE>`` defines ``Rule_<CODE>``. Rules are
imported lazily on first use.

    PC1xx  volatile values in the cached prefix     PC3xx  breakpoints and blocks
    PC2xx  ordering and serialisation               PC4xx  OpenAI routing and minimum
                                                    PC5xx  observed usage (logs)
"""

from __future__ import annotations

import importlib
from functools import cache

from promptcache.lint.engine import Rule

__all__ = ["RULE_CODES", "all_rules", "get_rule"]

RULE_CODES: tuple[str, ...] = (
    # volatile values
    "PC101", "PC102", "PC103", "PC104", "PC105",
    # ordering / serialisation
    "PC201", "PC202", "PC203",
    # breakpoints and blocks
    "PC301", "PC302", "PC303", "PC304", "PC305", "PC306", "PC307", "PC308",
    # OpenAI
    "PC401", "PC402", "PC403", "PC404",
    # usage
    "PC501",
)


@cache
def get_rule(code: str) -> type[Rule]:
    """The rule class for a code (``"PC101"``) or dotted name (``"volatile.timestamp"``).

    Raises:
        KeyError: no such rule.
    """
    key = code.strip()
    if key.upper() in RULE_CODES:
        module = importlib.import_module(f"promptcache.lint.rules.{key.upper()}")
        rule: type[Rule] = getattr(module, f"Rule_{key.upper()}")
        return rule
    for c in RULE_CODES:
        r = get_rule(c)
        if r.name == key:
            return r
    raise KeyError(code)


def all_rules() -> list[type[Rule]]:
    """Every registered rule class, in code order."""
    return [get_rule(c) for c in RULE_CODES]
