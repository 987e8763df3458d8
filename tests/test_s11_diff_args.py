"""diff() refuses a request that is not a mapping with a named error (new-user trial 18: a JSON
string or None raised AttributeError deep inside)."""

from __future__ import annotations

import json

import pytest

from promptcache import InvalidRequestError
from promptcache.diff import diff

REQ = {"model": "claude-sonnet-4-6", "max_tokens": 10,
       "messages": [{"role": "user", "content": "hi"}]}


def test_json_text_is_named() -> None:
    with pytest.raises(InvalidRequestError, match=r"request a must be a JSON object.*json\.loads"):
        diff(json.dumps(REQ), REQ)  # type: ignore[arg-type]


def test_none_is_named() -> None:
    with pytest.raises(InvalidRequestError, match="request b must be a JSON object"):
        diff(REQ, None)  # type: ignore[arg-type]


def test_mappings_still_work() -> None:
    assert diff(REQ, REQ).verdict == "no_miss"
