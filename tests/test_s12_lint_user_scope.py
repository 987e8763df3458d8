"""Regression tests for new-user trial 24 (issue 2): a per-user value before stable text in a
template (``{{ user_id }}``, ``{{ user.email }}``) was not reported, though every user then
writes the stable text again; ``{{ session_id }}`` was (PC104, per-conversation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from promptcache.lint.api import lint_paths
from promptcache.lint.volatile import classify_name, id_scope

STABLE = " ".join(f"Rule {i}: answer politely and cite the knowledge base article that "
                  "applies." for i in range(12))


def _lint(tmp_path: Path, name: str, text: str) -> list[Any]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = lint_paths([str(path)])
    assert result.errors == []
    return result.findings


@pytest.mark.parametrize("name,text,col", [
    ("a.j2", "You are helping user {{ user_id }}.\n", 22),
    ("b.j2", "Account: {{ user.email }}\n", 10),
    ("c.hbs", "Customer {{customerId}}\n", 10),
    ("d.md", "User: {user_id}\n", 7),
    ("e.j2", "Hello {{ uid }}\n", 7),
])
def test_per_user_value_before_stable_text(tmp_path: Path, name: str, text: str,
                                           col: int) -> None:
    found = _lint(tmp_path, name, text + STABLE + "\n")
    assert [(f.code, f.line, f.col) for f in found] == [("PC104", 1, col)]
    f = found[0]
    assert f.details["kind"] == "id" and f.details["id_scope"] == "user"
    assert f.severity.value == "warning"
    assert "per-user value" in f.message
    assert "written again for every other user" in f.message


def test_per_user_value_after_stable_text_is_fine(tmp_path: Path) -> None:
    assert _lint(tmp_path, "a.j2", STABLE + "\nUser: {{ user_id }} ({{ user.email }})\n") == []


def test_not_per_user(tmp_path: Path) -> None:
    # a display name, a support address and an account are not ids of the user
    for text in ("Hi {{ user_name }}.\n", "Hi {{ user.name }}.\n",
                 "Write to {{ support_email }}.\n", "AWS account {{ account_id }}.\n"):
        assert _lint(tmp_path, "a.j2", text + STABLE + "\n") == [], text


def test_scope_is_the_shortest_lived_id() -> None:
    assert id_scope("{{ user_id }}") == "user"
    assert id_scope("{{ user_id }}/{{ session_id }}") == "conversation"
    assert id_scope("{{ user.email }} {{ request_id }}") == "request"
    assert id_scope("{{ session_id }}") == "conversation"
    assert classify_name("user.email") == ("id", None)
    assert classify_name("user_name") is None
