"""Shared test helpers: load ../shared/cases and expand their ``<N tokens: ...>`` placeholders.

The cases in ``../shared/cases/bug-cases.jsonl`` write long text as placeholders such as
``"<3000 tokens: stable agent instructions>"``. :func:`expand_placeholders` replaces each with
prose of exactly N tokens under both o200k_base and cl100k_base (so Anthropic estimates with
ratio 1.0 and OpenAI counts agree). The text is deterministic per placeholder: the same
placeholder always expands to the same text, different descriptions to different text.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CASES_FILE = SHARED / "cases" / "bug-cases.jsonl"
CORPUS = SHARED / "corpus"

# Each word is one token with a leading space in both o200k_base and cl100k_base (checked in
# tests/test_tokens.py), so N words make exactly N tokens.
WORDS = (
    "cache prefix token model request system message tool result value order stable section "
    "history context breakpoint block write read hit miss price cost user agent server client "
    "time date file code test data state list text line word page note plan step task rule "
    "check build run call send wait store load key name type field path"
).split()

PLACEHOLDER = re.compile(r"<(\d+) tokens(?:[:,][^>]*)?>")


@cache
def filler(n: int, salt: str = "") -> str:
    """Deterministic prose of exactly ``n`` tokens (o200k_base and cl100k_base)."""
    rng = random.Random(hashlib.sha256(f"{n}:{salt}".encode()).digest())
    return "".join(" " + rng.choice(WORDS) for _ in range(n))


def expand_text(text: str) -> str:
    """Replace every ``<N tokens...>`` placeholder in ``text`` with N tokens of filler."""
    return PLACEHOLDER.sub(lambda m: filler(int(m.group(1)), m.group(0)), text)


def expand_placeholders(obj: Any) -> Any:
    """A deep copy of ``obj`` with every string's placeholders expanded."""
    if isinstance(obj, str):
        return expand_text(obj)
    if isinstance(obj, list):
        return [expand_placeholders(v) for v in obj]
    if isinstance(obj, dict):
        return {k: expand_placeholders(v) for k, v in obj.items()}
    return obj


MISSING = f"{CASES_FILE} is not there (the cases live in ../shared beside the checkout)"


@lru_cache(maxsize=1)
def _all_cases() -> tuple[dict[str, Any], ...]:
    if not CASES_FILE.exists():
        return ()
    with CASES_FILE.open(encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())


def require_cases() -> None:
    """Skip the calling test (or module) when ../shared/cases is not beside the checkout."""
    if not CASES_FILE.exists():
        import pytest

        pytest.skip(MISSING, allow_module_level=True)


def load_cases(kind: str | None = None) -> list[dict[str, Any]]:
    """Cases of one kind (``lint``, ``diff``, ``usage``, ``builder``, ``backend``), or all."""
    return [json.loads(json.dumps(c)) for c in _all_cases() if kind is None or c["kind"] == kind]


def case(case_id: str) -> dict[str, Any]:
    """One case by id (``"BR-01"``), as a fresh copy; skips when the cases file is absent."""
    require_cases()
    for c in _all_cases():
        if c["id"] == case_id:
            return json.loads(json.dumps(c))
    raise KeyError(case_id)


_NUM = re.compile(r"(\d+)[ -]tokens?")


def materialize_request(body: Any, previous: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Turn a case's request body into a concrete payload.

    Expands placeholders and turns prose where an array belongs into arrays:

    * ``"tools": "<2000 tokens, no cache_control>"`` -> one tool whose description has 2000 tokens;
    * ``"messages": "<500 tokens: new user turn>"`` -> one user message of 500 tokens
      (``"cache_control on last block"`` in the prose puts a marker on that block);
    * ``"<identical>"`` -> the same field of ``previous``;
    * ``"<same 40000 tokens + 300-token side question, ...>"`` -> ``previous``'s messages plus a
      new user message of 300 tokens.

    Returns None when the whole body is prose (the test must build it).
    """
    if not isinstance(body, dict):
        return None
    out: dict[str, Any] = {}
    for key, value in body.items():
        if isinstance(value, str) and key in ("tools", "messages") and value.startswith("<"):
            out[key] = _materialize_list(key, value, previous)
        else:
            out[key] = expand_placeholders(value)
    return out


def _materialize_list(key: str, prose: str, previous: dict[str, Any] | None) -> list[Any]:
    if prose.startswith("<identical") and previous is not None:
        return json.loads(json.dumps(previous[key]))
    numbers = [int(n) for n in _NUM.findall(prose)]
    marker = "cache_control on last block" in prose or "breakpoint on last block" in prose
    if key == "tools":
        n = numbers[0] if numbers else 500
        return [{"name": "tool_0", "description": filler(n, prose),
                 "input_schema": {"type": "object"}}]
    if prose.startswith("<same") and previous is not None:
        base = json.loads(json.dumps(previous["messages"]))
        for msg in base:  # the old trailing marker moves to the new last block
            if isinstance(msg.get("content"), list):
                for block in msg["content"]:
                    block.pop("cache_control", None)
        extra = numbers[-1] if len(numbers) > 1 else 100
        base += [{"role": "assistant", "content": "Understood."},
                 {"role": "user", "content": [{"type": "text", "text": filler(extra, prose)}]}]
        if marker:
            base[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        return base
    n = numbers[0] if numbers else 100
    block: dict[str, Any] = {"type": "text", "text": filler(n, prose)}
    if marker:
        block["cache_control"] = {"type": "ephemeral"}
    return [{"role": "user", "content": [block]}]
