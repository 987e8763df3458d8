"""PC403 is reported even when the requests' system prompts also differ in a volatile value
(new-user trial 15, finding 13: a uuid in the system prompt split the prefix groups, so a
per-request prompt_cache_key went unreported until the uuid was fixed)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from promptcache.lint import lint_paths

SYSTEM = "You are the billing assistant of Acme. Answer from the ledger only. " * 120


def _request(key: str, request_id: str | None) -> dict[str, Any]:
    system = SYSTEM if request_id is None else f"Request id: {request_id}\n" + SYSTEM
    return {"model": "gpt-5", "prompt_cache_key": key, "messages": [
        {"role": "system", "content": system},
        {"role": "user", "content": "summarise the invoice"}]}


def _lint(tmp_path: Path, requests: list[dict[str, Any]]) -> list[Any]:
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(json.dumps({"request": r}) for r in requests) + "\n",
                    encoding="utf-8")
    return lint_paths([str(path)]).findings


def test_random_key_reported_beside_a_uuid_in_the_system_prompt(tmp_path: Path) -> None:
    reqs = [_request(str(uuid.UUID(int=i + 1)), str(uuid.UUID(int=100 + i))) for i in range(4)]
    findings = _lint(tmp_path, reqs)
    codes = [f.code for f in findings]
    assert "PC403" in codes and "PC102" in codes  # the uuid itself
    [f] = [f for f in findings if f.code == "PC403"]
    assert f.details["requests"] == 4 and f.details["distinct_keys"] == 4
    assert "apart from timestamps or ids" in f.message


def test_identical_prefixes_keep_the_plain_message(tmp_path: Path) -> None:
    reqs = [_request(f"req-{i}", None) for i in range(3)]
    [f] = [f for f in _lint(tmp_path, reqs) if f.code == "PC403"]
    assert f.message.startswith("prompt_cache_key differs on every one of 3 requests that "
                                "share a prefix: ")


def test_different_templates_are_not_grouped(tmp_path: Path) -> None:
    # three different system prompts (not a volatile value apart): no shared prefix, no PC403
    reqs = [_request(f"req-{i}", None) for i in range(3)]
    for i, r in enumerate(reqs):
        r["messages"][0]["content"] = f"Persona {'ABC'[i]}: " + "x y z " * (400 + 50 * i)
    assert "PC403" not in [f.code for f in _lint(tmp_path, reqs)]


def test_a_stable_key_beside_a_uuid_is_not_reported(tmp_path: Path) -> None:
    reqs = [_request("tenant-42", str(uuid.UUID(int=100 + i))) for i in range(4)]
    assert "PC403" not in [f.code for f in _lint(tmp_path, reqs)]


def test_different_tools_with_a_dated_description_are_not_one_group(tmp_path: Path) -> None:
    # review 18: masking hashed only a tool's description, so three applications with their
    # own tool (name, schema) and their own key were grouped and reported
    def req(n: str) -> dict[str, Any]:
        r = _request(f"app-{n}", None)
        r["tools"] = [{"type": "function", "function": {
            "name": f"search_{n}",
            "description": "Search the index (rebuilt 2025-05-04T10:00:00Z).",
            "parameters": {"type": "object", "properties": {f"q_{n}": {"type": "string"}}}}}]
        return r

    assert "PC403" not in [f.code for f in _lint(tmp_path, [req(n) for n in "abc"])]
