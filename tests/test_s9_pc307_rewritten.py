"""PC307 counted the tokens written again only up to the changed block's own breakpoint; every
later breakpoint's entry holds the block too and is written again (new-user trial 14, F11):
"about 4237 tokens" where explain and PC101 said 5,119."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from promptcache.lint import lint_paths
from promptcache.prefix import render
from tests.cases import filler


def _request(ticket: int) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": 64,
            "system": [{"type": "text", "cache_control": {"type": "ephemeral"},
                        "text": f"Handling ticket {ticket}. " + filler(3000)}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": filler(1500, "m"),
                 "cache_control": {"type": "ephemeral"}}]}]}


def test_the_later_breakpoints_are_counted(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    log.write_text("".join(json.dumps({"request": _request(n)}) + "\n" for n in (1, 2)))
    [f] = [f for f in lint_paths([str(log)]).findings if f.code == "PC307"]
    last = render(_request(2)).breakpoints()[-1]
    assert f.details["tokens_rewritten"] == last.end_token  # no earlier readable entry
    assert f"about {last.end_token} tokens" in f.message
