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


def test_the_types_builder_errors_name_are_public() -> None:
    """New-user trial 13 (F10): the builder's errors say "start the next user message with
    ToolResult(...)", and its docstrings name Image / Message; ``from promptcache import
    ToolResult`` failed."""
    from promptcache import PromptBuilder, ToolResult

    b = PromptBuilder("claude-sonnet-4-6").history(
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "a",
                                           "input": {}}]}).turn("y")
    try:
        b.to_anthropic(max_tokens=5)
    except promptcache.InvalidRequestError as exc:
        assert "ToolResult(" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected InvalidRequestError")
    for name in ("Image", "Message", "Thinking", "ToolCall", "ToolResult"):
        assert name in promptcache.__all__ and getattr(promptcache, name) is not None
    assert ToolResult.__module__ == "promptcache.builder"


def test_from_promptcache_import_diff_is_callable_after_the_subpackage_is_imported() -> None:
    """New-user trial 13 (found by its test): ``import promptcache.diff`` (the wrapper's live
    diff does it on first use) made ``from promptcache import diff`` the package, and
    ``diff(a, b)`` raised "'module' object is not callable"."""
    code = ("import promptcache.diff\n"
            "from promptcache import diff\n"
            "a = {'model': 'claude-sonnet-4-6', 'max_tokens': 5,\n"
            "     'messages': [{'role': 'user', 'content': 'hi'}]}\n"
            "print(diff(a, a).verdict, callable(diff.explain))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["no_miss", "True"]
