"""HTTP-level errors of the local backend, rendered in each provider's error JSON shape.

Anthropic (https://platform.claude.com/docs/en/api/errors)::

    {"type": "error", "error": {"type": "invalid_request_error", "message": "..."},
     "request_id": "req_..."}

OpenAI (https://platform.openai.com/docs/guides/error-codes)::

    {"error": {"message": "...", "type": "invalid_request_error", "param": null, "code": null}}

Status codes: 400 malformed request, 404 unknown model, 413 body too large, 429/529 and 503
capacity (Anthropic ``overloaded_error`` is 529; OpenAI answers 503), 500 internal.
"""

from __future__ import annotations

import secrets
from typing import Any, Literal

from promptcache._errors import PromptCacheError

__all__ = [
    "SEED_MAX",
    "SEED_MIN",
    "AnthropicErrorType",
    "BackendAPIError",
    "anthropic_error_body",
    "new_request_id",
    "openai_error_body",
]

SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1
"""Accepted sampling seeds: a 64-bit signed integer (OpenAI's ``seed`` is an int64;
``torch.Generator.manual_seed`` rejects values outside ``[-2**63, 2**64)``)."""

AnthropicErrorType = Literal[
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "overloaded_error",
]

#: Anthropic error type -> the OpenAI error type of the same condition.
_OPENAI_TYPES: dict[str, str] = {
    "invalid_request_error": "invalid_request_error",
    "not_found_error": "invalid_request_error",
    "request_too_large": "invalid_request_error",
    "overloaded_error": "server_error",
    "api_error": "server_error",
    "rate_limit_error": "rate_limit_exceeded",
}


class BackendAPIError(PromptCacheError):
    """A request the backend answers with an error status.

    Attributes:
        status: HTTP status (400, 404, 413, 529, 503, 500).
        error_type: the Anthropic error type (mapped for OpenAI responses).
        message: the human message, in the provider's wording where known.
        param: the offending parameter (OpenAI ``param``), if known.
        code: OpenAI ``code`` (e.g. ``"model_not_found"``), if any.
    """

    def __init__(
        self,
        status: int,
        error_type: AnthropicErrorType,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        self.status = status
        self.error_type = error_type
        self.message = message
        self.param = param
        self.code = code
        super().__init__(f"{status} {error_type}: {message}")


def new_request_id() -> str:
    """A random Anthropic-style request id (``req_`` + 24 base62-ish characters)."""
    return "req_" + secrets.token_urlsafe(18).replace("-", "a").replace("_", "b")


def anthropic_error_body(
    error_type: str, message: str, request_id: str | None = None
) -> dict[str, Any]:
    """The Anthropic error JSON."""
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": request_id or new_request_id(),
    }


def openai_error_body(
    error_type: str, message: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """The OpenAI error JSON (``error_type`` may be an Anthropic type; it is mapped)."""
    return {
        "error": {
            "message": message,
            "type": _OPENAI_TYPES.get(error_type, error_type),
            "param": param,
            "code": code,
        }
    }
