"""OpenAI Responses parameters that make the server add stored items to the prompt in the body.

Shared by lint (:mod:`promptcache.lint.rules._common`) and counting (:mod:`promptcache.tokens`),
with no import of either, so neither depends on the other's internals.

Source: https://platform.openai.com/docs/api-reference/responses/create and openai-python
3.57.0 ``types/responses/response_create_params.py`` (``conversation``: "Items from this
conversation are prepended to ``input_items`` for this response request").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["STORED_PROMPT_FIELDS", "STORED_PROMPT_LABELS", "stored_prompt_fields"]

#: OpenAI Responses parameters that make the server add a stored prompt to the one in the body:
#: ``previous_response_id`` prepends the earlier turns (their input and output items),
#: ``conversation`` the conversation's items, ``prompt`` a stored prompt template. The body then
#: holds only part of the prompt, so its size (and what it caches) cannot be told from it.
STORED_PROMPT_FIELDS: tuple[str, ...] = ("previous_response_id", "conversation", "prompt")

#: What the server adds for each field, in the words findings and counts use.
STORED_PROMPT_LABELS: dict[str, str] = {
    "previous_response_id": "the earlier turns previous_response_id adds",
    "conversation": "the stored items conversation adds",
    "prompt": "the stored prompt template prompt adds",
}


def stored_prompt_fields(payload: Mapping[str, Any], provider: str) -> list[str]:
    """The :data:`STORED_PROMPT_FIELDS` a request body sets (non-null), in that order.

    Args:
        payload: the request body.
        provider: the renderer's provider name (``"anthropic"``, ``"openai-chat"``,
            ``"openai-responses"``).

    Returns:
        The fields, for a Responses body only: empty for Anthropic and Chat Completions (which
        have no such parameters: a chat body's ``"prompt"`` key adds nothing) and for a body
        that holds the whole prompt. Never raises.
    """
    if provider != "openai-responses" or not isinstance(payload, Mapping):
        return []
    return [k for k in STORED_PROMPT_FIELDS if payload.get(k) is not None]
