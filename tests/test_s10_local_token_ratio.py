"""The local backend counts Claude 4.7+ tokens like 4.6, while the catalog's ``token_ratio`` is
1.3 for those models (hosted-api-rules.md 1.10) and ``promptcache count`` applies it (new-user
trial 15, F8). Scaling the backend's counts would break its exact contract (every reported count
is a position of its own KV cache, lined up with ``apply_template`` spans): the difference is
documented instead. These tests pin the documented behaviour, so a change to it must update the
documentation."""

from __future__ import annotations

from typing import Any

import pytest

import promptcache.local.api_anthropic as api_anthropic
from promptcache.catalog import get_policy
from promptcache.local.testing import SMALL_MODEL, LocalBackend


@pytest.fixture(scope="module")
def backend() -> Any:
    with LocalBackend(**SMALL_MODEL) as b:
        yield b


def test_backend_counts_local_tokens_for_every_claude_model_as_documented(
        backend: LocalBackend) -> None:
    client = backend.anthropic()
    msgs = [{"role": "user", "content": "hello world " * 100}]
    old = client.messages.count_tokens(model="claude-opus-4-6", messages=msgs).input_tokens
    new = client.messages.count_tokens(model="claude-opus-4-7", messages=msgs).input_tokens
    assert get_policy("claude-opus-4-7").token_ratio == 1.3
    assert new == old  # the ratio is not applied ...
    doc = api_anthropic.__doc__ or ""
    assert "token_ratio" in doc and "**not** applied" in doc  # ... and the docs say so
