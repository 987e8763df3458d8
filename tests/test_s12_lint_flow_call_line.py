"""A Python flow's message names the call that sends it (trial 24): a system message dict
written on one line and sent by a call on a later one said "of create() (line 13)", the
dict's line, as if the call were there."""

from __future__ import annotations

from pathlib import Path

from promptcache.lint import lint_paths

SOURCE = '''from datetime import datetime
import openai

client = openai.OpenAI()
sys_msg = {"role": "system", "content": f"Now: {datetime.now()}"}


def ask(q):
    msgs = [sys_msg, {"role": "user", "content": q}]
    return client.chat.completions.create(model="gpt-4o", messages=msgs)
'''

INLINE = '''from datetime import datetime
import anthropic

c = anthropic.Anthropic()
c.messages.create(model="claude-sonnet-4-6", max_tokens=5, system=f"now {datetime.now()}",
                  messages=[])
'''


def _messages(tmp_path: Path, text: str) -> list[str]:
    f = tmp_path / "app.py"
    f.write_text(text)
    return [x.message for x in lint_paths([f]).findings if x.code == "PC101"]


def test_flow_names_the_sending_call_line(tmp_path: Path) -> None:
    msgs = _messages(tmp_path, SOURCE)
    assert len(msgs) == 1
    assert "sent by the call at line 10" in msgs[0], msgs


def test_flow_on_the_call_line_keeps_one_line(tmp_path: Path) -> None:
    msgs = _messages(tmp_path, INLINE)
    assert len(msgs) == 1
    assert "(line 5)" in msgs[0] and "sent by" not in msgs[0], msgs


def test_lint_paths_takes_path_objects_and_one_name(tmp_path: Path) -> None:
    f = tmp_path / "app.py"
    f.write_text(INLINE)
    for given in ([f], f, str(f)):
        result = lint_paths(given)
        assert not result.errors, result.errors
        assert [x.code for x in result.findings] == ["PC101"]
