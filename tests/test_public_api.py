"""The curated public surface: every name in promptcache.__all__ resolves, lazily."""

from __future__ import annotations

import subprocess
import sys

import promptcache


def test_every_public_name_resolves() -> None:
    for name in promptcache.__all__:
        assert getattr(promptcache, name) is not None, name


def test_import_is_light() -> None:
    code = "import sys, promptcache; print('torch' in sys.modules, 'promptcache.local.model' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_unknown_attribute_raises() -> None:
    try:
        promptcache.not_a_name  # noqa: B018
    except AttributeError as exc:
        assert "not_a_name" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")
