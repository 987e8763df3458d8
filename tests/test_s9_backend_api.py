"""Review 14 of the local backend: request validation, stop sequences, small pools.

Tiny random model (hidden 32, 1 layer); raw JSON through the in-process ``TestClient`` so the
exact status and error body are visible.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from promptcache.local.testing import LocalBackend

TINY: dict[str, Any] = {"hidden_size": 32, "layers": 1, "heads": 2, "kv_heads": 1}
AH = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
OH = {"authorization": "Bearer k"}
CLAUDE = "claude-sonnet-4-5"


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(**TINY) as b:
        yield b


def _anthropic(b: LocalBackend, **extra: Any) -> Any:
    body = {"model": CLAUDE, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    return b.http_client().post("/v1/messages", json={**body, **extra}, headers=AH)


def _chat(b: LocalBackend, model: str = "gpt-5", **extra: Any) -> Any:
    body = {"model": model, "max_completion_tokens": 2,
            "messages": [{"role": "user", "content": "hi"}]}
    return b.http_client().post("/v1/chat/completions", json={**body, **extra}, headers=OH)


def _responses(b: LocalBackend, **extra: Any) -> Any:
    body = {"model": "gpt-5", "max_output_tokens": 2, "input": "hi"}
    return b.http_client().post("/v1/responses", json={**body, **extra}, headers=OH)


# ------------------------------------------------------------------------------ F1: seed range
@pytest.mark.parametrize("seed", [10**30, 2**63, -(2**63) - 1, 2**64])
def test_out_of_range_seed_is_a_400_naming_seed_on_every_route(
    backend: LocalBackend, seed: int
) -> None:
    r = _anthropic(backend, seed=seed)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["message"].startswith("seed: ")
    for r in (_chat(backend, seed=seed), _responses(backend, seed=seed)):
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and err["param"] == "seed"
        assert "seed" in err["message"]


@pytest.mark.parametrize("seed", [2**63 - 1, -(2**63), 0])
def test_int64_seeds_still_sample(backend: LocalBackend, seed: int) -> None:
    assert _anthropic(backend, seed=seed).status_code == 200
    assert _chat(backend, seed=seed).status_code == 200
    assert _responses(backend, seed=seed).status_code == 200
