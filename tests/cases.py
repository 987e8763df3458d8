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
# tests/test_cases_helper.py), so N words make exactly N tokens.
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


@lru_cache(maxsize=1)
def _all_cases() -> tuple[dict[str, Any], ...]:
    with CASES_FILE.open(encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())


def load_cases(kind: str | None = None) -> list[dict[str, Any]]:
    """Cases of one kind (``lint``, ``diff``, ``usage``, ``builder``, ``backend``), or all."""
    return [json.loads(json.dumps(c)) for c in _all_cases() if kind is None or c["kind"] == kind]


def case(case_id: str) -> dict[str, Any]:
    """One case by id (``"BR-01"``), as a fresh copy."""
    for c in _all_cases():
        if c["id"] == case_id:
            return json.loads(json.dumps(c))
    raise KeyError(case_id)
