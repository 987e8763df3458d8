"""Small helpers the CLI commands share: one-line input errors and the explicit-model check.

Every command reports bad input the same way: one line ``promptcache: FILE: reason`` on
stderr and exit status 2 (never click's usage block, never a traceback). A model id given
with ``--model`` that the catalog does not know is bad input too: the answer would be silently
wrong (no minimum, no prices), so the command stops and names the closest catalog ids.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from promptcache._errors import InputError, UnknownModelError

__all__ = ["check_model", "fail", "is_blank_file", "read_json_object", "read_text",
           "unknown_model_message"]


def fail(message: str) -> NoReturn:
    """Print ``promptcache: MESSAGE`` on stderr and exit with status 2."""
    click.echo(f"promptcache: {message}", err=True)
    raise SystemExit(2)


def unknown_model_message(exc: UnknownModelError, option: str = "--model") -> str:
    """One line naming the unknown model and up to three close catalog ids."""
    model = exc.model
    if exc.suggestions:
        hint = f"closest catalog ids: {', '.join(exc.suggestions[:3])}"
    else:
        hint = "no close catalog id"
    return f"{option} {model}: unknown model; {hint}"


def check_model(model: str | None, option: str = "--model") -> str | None:
    """None when ``model`` is None or a catalog id (or alias); else the one-line error.

    Raises nothing: a catalog that cannot load is reported as the error line.
    """
    if model is None:
        return None
    from promptcache._errors import CatalogError
    from promptcache.catalog import get_policy

    try:
        get_policy(model)
    except UnknownModelError as exc:
        return unknown_model_message(exc, option)
    except CatalogError as exc:
        return f"{option} {model}: the catalog cannot be read ({exc})"
    return None


def read_text(name: str) -> str:
    """The text of file ``name`` (``"-"``: standard input), as UTF-8.

    Raises:
        InputError: the file cannot be read, or is not UTF-8 text.
    """
    try:
        if name == "-":
            data = sys.stdin.buffer.read()
        else:
            data = Path(name).read_bytes()
    except OSError as exc:
        raise InputError(name, exc.strerror or str(exc)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(name, f"not UTF-8 text (byte {exc.start})") from None


def read_json_object(name: str, *, hint: str = "") -> dict[str, Any]:
    """The JSON object (a request) in file ``name``; on bad input, :func:`fail` (exit 2).

    ``hint`` is appended to the invalid-JSON reason (``"; use --text for text"``).
    """
    import json

    try:
        text = read_text(name)
    except InputError as exc:
        fail(str(exc))
    if not text.strip():
        fail(f"{name}: empty file")
    try:
        obj = json.loads(text)
    except ValueError as exc:
        fail(f"{name}: invalid JSON ({exc}){hint}")
    if not isinstance(obj, dict):
        fail(f"{name}: expected a JSON object (a request), got {type(obj).__name__}")
    return obj


def is_blank_file(name: str) -> bool:
    """Whether file ``name`` holds nothing but whitespace (False for ``"-"`` or unreadable).

    Reads in 64 KiB chunks and stops at the first non-whitespace byte.
    """
    if name == "-":
        return False
    try:
        with open(name, "rb") as fh:
            while chunk := fh.read(65536):
                if chunk.strip():
                    return False
    except OSError:
        return False
    return True
