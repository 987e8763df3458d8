"""Markdown API documentation is not a prompt template where its braces sit in code, HTML tags
or URL paths (new-user trial 14, F8): ``/v1/sessions/{session_id}/messages`` in a docs table
was a PC104 "per-conversation id" warning (exit 1, also through the pre-commit hook)."""

from __future__ import annotations

from pathlib import Path

from promptcache.lint import lint_paths

STABLE = "Answer from the care sheets, cite them, and never invent a species or a price. " * 8


def _codes(tmp_path: Path, name: str, text: str) -> list[str]:
    path = tmp_path / name
    path.write_text(text)
    return [f.code for f in lint_paths([str(path)]).findings]


def test_braces_in_code_html_and_url_paths_are_not_holes(tmp_path: Path) -> None:
    doc = ("# Sessions API\n\n| method | path |\n|---|---|\n"
           "| GET | `/v1/sessions/{session_id}/messages` |\n"
           "| POST | /v1/requests/{request_id}/cancel |\n\n"
           '<code title="post /conversations/{conversation_id}/items">create</code>\n\n'
           "```python\nclient.get(f\"/v1/sessions/{session_id}\")\n```\n\n" + STABLE + "\n")
    assert _codes(tmp_path, "api.md", doc) == []


def test_a_markdown_prompt_with_a_volatile_field_still_reports(tmp_path: Path) -> None:
    prompt = "Session {session_id} started.\n\n" + STABLE + "\n"
    assert "PC104" in _codes(tmp_path, "system.md", prompt)
    # a .txt prompt keeps every field, code-like or not
    assert "PC104" in _codes(tmp_path, "system.txt", "`{session_id}` " + STABLE)
    # {{ }} placeholders are holes inside code spans too (Jinja renders them there)
    assert "PC104" in _codes(tmp_path, "j.md", "Session `{{ session_id }}`.\n\n" + STABLE)
