"""The tool version written into JSON and SARIF output (read once)."""

from __future__ import annotations

from functools import cache

__all__ = ["tool_version"]


@cache
def tool_version() -> str:
    """promptcache's installed version (``"0"`` when running from an uninstalled tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("promptcache")
    except PackageNotFoundError:  # pragma: no cover
        return "0"
