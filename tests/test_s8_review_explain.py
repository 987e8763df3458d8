"""Review 12 of session 8: ``explain`` on chained Responses logs, ``diff``'s CLI input checks.

F6: a log that starts mid-conversation (a ``previous_response_id`` chain whose first link is
not logged) still explains its later turns against the earlier lines; F14: the light scan reads
only the ids; F16: ``"response"`` given as a string is bad input, not a traceback; F1: a
``conversation=`` turn is not a history edit.
"""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from promptcache.diff._cli import diff_command

LONG = " ".join(f"Rule {i}: answer about plants, briefly and precisely." for i in range(160))


def _req(text: str, prev: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-5.6", "instructions": LONG,
                            "input": [{"role": "user", "content": text}], **extra}
    if prev is not None:
        body["previous_response_id"] = prev
    return body


def test_diff_cli_response_as_string_is_bad_input(tmp_path: Any) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"request": _req("hi"),
                                                 "response": "resp_1"}))
    (tmp_path / "b.json").write_text(json.dumps({"request": _req("and?", "resp_1")}))
    out = CliRunner().invoke(diff_command, [str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert out.exit_code == 2, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit)
    assert '"response" must be an object' in out.output
    assert "a.json" in out.output and "a string" in out.output
