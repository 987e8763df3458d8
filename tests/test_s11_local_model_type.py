"""A ``model`` of the wrong JSON type is a type error naming the field, not "Field required".

Trial 18, finding 9: POST /v1/messages with ``"model": 5`` (or a list) answered 400
"model: Field required"; ``max_tokens`` of the wrong type already says "Input should be a valid
integer". The OpenAI routes said "Missing required parameter: 'model'." for the same bodies.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from promptcache.local.testing import SMALL_MODEL, LocalBackend

pytestmark = pytest.mark.local

USER = [{"role": "user", "content": "hi"}]
WRONG = [5, 1.5, True, ["claude-sonnet-4-6"], {"id": "x"}]
JSON_TYPE = {int: "an integer", float: "a decimal", bool: "a boolean", list: "an array",
             dict: "an object"}


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=8.0, **SMALL_MODEL) as b:
        yield b


def _post(backend: LocalBackend, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    headers = {"x-api-key": "k", "authorization": "Bearer k"}
    if path.startswith("/v1/messages"):
        headers["anthropic-version"] = "2023-06-01"
    response = backend.http_client().post(path, json=body, headers=headers)
    return response.status_code, response.json()


@pytest.mark.parametrize("model", WRONG, ids=repr)
@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_anthropic_wrong_model_type(backend: LocalBackend, path: str, model: Any) -> None:
    status, body = _post(backend, path, {"model": model, "max_tokens": 2, "messages": USER})
    assert status == 400
    assert body["type"] == "error"
    assert body["error"] == {"type": "invalid_request_error",
                             "message": "model: Input should be a valid string"}


@pytest.mark.parametrize("body", [{}, {"model": None}, {"model": ""}], ids=repr)
def test_anthropic_missing_model_still_field_required(
    backend: LocalBackend, body: dict[str, Any]
) -> None:
    status, answer = _post(backend, "/v1/messages", {"max_tokens": 2, "messages": USER, **body})
    assert status == 400
    assert answer["error"]["message"] == "model: Field required"


@pytest.mark.parametrize("model", WRONG, ids=repr)
@pytest.mark.parametrize(
    ("path", "extra"),
    [("/v1/chat/completions", {"messages": USER}), ("/v1/responses", {"input": "hi"})],
)
def test_openai_wrong_model_type(
    backend: LocalBackend, path: str, extra: dict[str, Any], model: Any
) -> None:
    status, body = _post(backend, path, {"model": model, **extra})
    assert status == 400
    assert body["error"] == {
        "message": f"Invalid type for 'model': expected a string, but got "
                   f"{JSON_TYPE[type(model)]} instead.",
        "type": "invalid_request_error",
        "param": "model",
        "code": "invalid_type",
    }


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
def test_openai_missing_model_still_missing_parameter(backend: LocalBackend, path: str) -> None:
    status, body = _post(backend, path, {"messages": USER, "input": "hi"})
    assert status == 400
    assert body["error"]["message"] == "Missing required parameter: 'model'."
    assert body["error"]["param"] == "model"
