"""OpenAI API emulation: ``POST /v1/chat/completions`` and ``POST /v1/responses``.

Responses parse with ``openai.types.chat.ChatCompletion`` / ``ChatCompletionChunk`` and
``openai.types.responses.Response`` / ``ResponseStreamEvent``.

Usage (hosted-api-rules.md 2.1-2.4; https://developers.openai.com/api/docs/guides/prompt-caching):

* Models before GPT-5.6: caching is automatic; ``cached_tokens`` is the engine's physically
  reused prefix rounded down to ``1024 + 128k`` (0 below 1,024), no write is reported (Chat:
  ``cache_write_tokens`` absent; Responses: its required ``cache_write_tokens`` is 0, there is
  no write fee). ``prompt_cache_options`` / ``prompt_cache_breakpoint`` -> 400.
* ``prompt_cache_options`` (GPT-5.6+): not an object, a ``mode`` other than ``"implicit"`` /
  ``"explicit"`` or a ``ttl`` other than the catalog's (``"30m"``; on Responses also
  ``"12h"``, which openai-python 3.57.0 documents there and the reference does not confirm:
  catalog ``[sdk_ttls]``) -> 400 naming the field (:func:`check_cache_options`). A 12h write
  keeps its entries 12 h and is reported as ``cache_write_tokens_details.ttl_12h_tokens``.
* GPT-5.6+ (catalog ``explicit_breakpoints``): entries at the implicit breakpoint (newest
  message) and the latest explicit ``prompt_cache_breakpoint`` s, no lookback limit, TTL 30m;
  ``cache_write_tokens`` reports what was written.
* ``prompt_tokens`` / ``input_tokens`` include cached and written tokens.
* Chat streaming with ``stream_options.include_usage``: every chunk carries ``usage: null`` and
  one last chunk with ``choices: []`` carries the usage, before ``data: [DONE]``. Responses
  streaming ends with ``response.completed`` whose ``response.usage`` is filled, or, when the
  output reached ``max_output_tokens``, ``response.incomplete``
  (``incomplete_details.reason: "max_output_tokens"``), as the API does. The random model
  never stops on its own, so its streams always end that way, and the SDK's
  ``stream.get_final_response()`` raises "Didn't receive a response.completed event": read
  the ``response.incomplete`` event's ``response`` (its ``usage`` is filled) instead.
* Responses ``previous_response_id``: every Responses response is stored (unless
  ``store: false``) in memory, visible only to the API key that made it, the last
  :data:`RESPONSE_STORE_SIZE` (256) of them across all keys (LRU; gone on restart): its input
  items (a string input as one user message) plus its output
  (one assistant message). A request naming one gets that conversation prepended to its
  ``input``, so its tokens count and are cached and read as the API's are; ``instructions`` are
  not carried over (as in the API). An unknown, evicted or ``store: false`` id is a 400
  ``invalid_request_error`` with ``param: "previous_response_id"`` and ``code:
  "previous_response_not_found"`` ("Previous response with id '...' not found."), the API's
  answer as quoted in https://github.com/maximhq/bifrost/issues/2441 and
  https://github.com/bigduu/Bamboo-agent/pull/513.
* ``stop`` strings are matched on the decoded output text
  (:class:`~promptcache.local.app.StopText`): ``finish_reason: "stop"`` (Responses:
  ``status: "completed"``) with the text cut before the match; streamed deltas hold back text
  that may begin a stop sequence.
* ``ServerOptions.openai_prompt_tokens_details=False`` leaves ``prompt_tokens_details`` out of
  Chat usage, like vLLM without ``--enable-prompt-tokens-details``
  (https://github.com/vllm-project/vllm/issues/16162): clients must read that as "unknown".
"""

from __future__ import annotations

import copy
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from promptcache._errors import InvalidRequestError
from promptcache.catalog import CachePolicy
from promptcache.lint.facts import sdk_ttls
from promptcache.local.accounting import (
    CachePlan,
    automatic_live_prefix,
    automatic_prefix_keys,
    openai_automatic_cached_tokens,
    openai_breakpoints,
    plan_reads_and_writes,
)
from promptcache.local.app import (
    BackendService,
    GenerationOutcome,
    GenerationResponse,
    GenerationStream,
    StopText,
    api_key_of,
    first_event,
    generate_until_disconnect,
    next_event,
    read_json,
    sse,
)
from promptcache.local.errors import SEED_MAX, SEED_MIN, BackendAPIError
from promptcache.local.template import (
    TemplatedPrompt,
    apply_template,
)

__all__ = [
    "RESPONSE_STORE_SIZE",
    "OpenAIRequest",
    "OpenAIUsageCounts",
    "ResponseStore",
    "model_info",
    "router",
]

Shape = Literal["openai-chat", "openai-responses"]


def _bad(message: str, param: str | None = None, code: str | None = None) -> BackendAPIError:
    return BackendAPIError(400, "invalid_request_error", message, param=param, code=code)


_CHAT_ROLES = ("system", "assistant", "user", "function", "tool", "developer")
"""Chat Completions message roles (the API's "Supported values")."""


def _invalid_type(param: str, expected: str, value: Any) -> BackendAPIError:
    """The 400 OpenAI answers for a parameter of the wrong JSON type (``expected``: "a string",
    "an array", "a boolean")."""
    return _bad(f"Invalid type for '{param}': expected {expected}, but got {_json_type(value)} "
                "instead.", param, "invalid_type")


def _json_type(value: Any) -> str:
    """The JSON type name OpenAI's ``invalid_type`` messages use."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else "a string"


@dataclass(frozen=True, slots=True)
class OpenAIRequest:
    """Validated generation parameters of a Chat Completions or Responses request."""

    model: str
    max_tokens: int
    stream: bool
    include_usage: bool
    stop: tuple[str, ...]
    temperature: float
    seed: int | None
    service_tier: str = "default"
    """The tier the response reports (:func:`served_tier`)."""


SERVICE_TIERS = ("auto", "default", "flex", "scale", "priority", "fast")
"""Chat Completions ``service_tier`` request values (openai-python 3.x
``completion_create_params.service_tier`` Literal)."""

RESPONSES_SERVICE_TIERS = (*SERVICE_TIERS, "ultrafast")
"""Responses ``service_tier`` request values: :data:`SERVICE_TIERS` and ``ultrafast``
(openai-python 3.x ``types/responses/service_tier.py``, ``ServiceTier``: "processed with the
access-controlled Ultrafast Processing service tier ... a response served through it will show
service_tier=ultrafast"). The backend does not check which models or organisations have it,
as for Flex and Priority (review 24: it was refused as an invalid_value)."""


def served_tier(requested: str | None) -> str:
    """The ``service_tier`` an OpenAI response reports for the requested one.

    openai-python (``types/chat/chat_completion.py``, ``ChatCompletion.service_tier``): "the
    response body will include the service_tier value based on the processing mode actually
    used"; ``auto`` (and no value) runs on the project's tier, "unless otherwise configured
    ... 'default'"; ``fast`` is reported as ``priority``. The local backend serves every tier
    alike and reports the one requested, so usage trackers price a Flex request as the hosted
    API bills it (the catalog's 50 % Flex multiplier keys on this field). It does not check
    which models offer Flex or Priority (the catalog records no such list).
    """
    if requested in (None, "auto", "default"):
        return "default"
    return "priority" if requested == "fast" else str(requested)


@dataclass(frozen=True, slots=True)
class OpenAIUsageCounts:
    """Input-side usage of one OpenAI request (tokens).

    Attributes:
        prompt_tokens: the whole prompt (includes cached and written tokens).
        cached_tokens: cache reads.
        cache_write_tokens: tokens written (GPT-5.6+); None where the model has no writes.
        cache_write_12h_tokens: of those, the tokens written with ``ttl: "12h"`` (Responses
            ``prompt_cache_options``); the rest are 30m writes.
    """

    prompt_tokens: int
    cached_tokens: int
    cache_write_tokens: int | None
    cache_write_12h_tokens: int = 0


def _int(
    body: dict[str, Any], key: str, *, minimum: int, maximum: int | None = None
) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid_type(key, "an integer", value)
    if value < minimum:
        raise _bad(
            f"Invalid '{key}': integer below minimum value. Expected a value >= {minimum}, "
            f"but got {value} instead.",
            key,
            "integer_below_min_value",
        )
    if maximum is not None and value > maximum:
        raise _bad(
            f"Invalid '{key}': integer above maximum value. Expected a value <= {maximum}, "
            f"but got {value} instead.",
            key,
            "integer_above_max_value",
        )
    return value


def parse_request(body: dict[str, Any], shape: Shape, default_max_tokens: int) -> OpenAIRequest:
    """Validate the non-segment fields.

    Raises:
        BackendAPIError: 400 (``param`` names the field).
    """
    model = body.get("model")
    if model is None or model == "":
        raise _bad("Missing required parameter: 'model'.", "model")
    if not isinstance(model, str):  # 5, ["gpt-5"]: a type error, not a missing parameter
        raise _invalid_type("model", "a string", model)
    if shape == "openai-chat":
        messages = body.get("messages")
        if messages is None:
            raise _bad("Missing required parameter: 'messages'.", "messages")
        if not isinstance(messages, list):
            raise _invalid_type("messages", "an array", messages)
        if not messages:
            raise _bad(
                "Invalid 'messages': empty array. Expected an array with minimum length 1, "
                "but got an empty array instead.",
                "messages",
                "empty_array",
            )
        for i, message in enumerate(messages):
            role = message.get("role") if isinstance(message, dict) else None
            if isinstance(message, dict) and role is None:
                raise _bad(
                    f"Missing required parameter: 'messages[{i}].role'.", f"messages[{i}].role"
                )
            if isinstance(message, dict) and role not in _CHAT_ROLES:
                supported = ", ".join(f"'{r}'" for r in _CHAT_ROLES[:-1])
                raise _bad(
                    f"Invalid value: {role!r}. Supported values are: {supported}, and "
                    f"'{_CHAT_ROLES[-1]}'.",
                    f"messages[{i}].role",
                    "invalid_value",
                )
        max_tokens = _int(body, "max_completion_tokens", minimum=1)
        if max_tokens is None:
            max_tokens = _int(body, "max_tokens", minimum=1)
        n = body.get("n", 1)
        if n not in (1, None):
            raise _bad("Invalid 'n': the local backend generates one choice.", "n")
    else:
        _refuse_unstored(body)
        if body.get("input") is None and body.get("instructions") is None:
            raise _bad("Missing required parameter: 'input'.", "input")
        if body.get("previous_response_id") is not None and body.get("conversation") is not None:
            # openai-python 3.57.0 response_create_params.py, previous_response_id: "Cannot be
            # used in conjunction with `conversation`" (the wording below is the local one)
            raise _bad(
                "Mutually exclusive parameters: Ensure you are only providing one of: "
                "'previous_response_id' or 'conversation'.",
                "previous_response_id",
                "mutually_exclusive_parameters",
            )
        max_tokens = _int(body, "max_output_tokens", minimum=1)
    cache_key = body.get("prompt_cache_key")
    if cache_key is not None and not isinstance(cache_key, str):
        raise _invalid_type("prompt_cache_key", "a string", cache_key)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("Invalid 'stream': expected a boolean.", "stream")
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not isinstance(options, dict):
            raise _bad("Invalid 'stream_options': expected an object.", "stream_options")
        if not stream:
            raise _bad(
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                "stream_options",
            )
        include_usage = bool(options.get("include_usage", False))
    stop_raw = body.get("stop")
    stops: list[str]
    if stop_raw is None:
        stops = []
    elif isinstance(stop_raw, str):
        stops = [stop_raw]
    elif isinstance(stop_raw, list) and all(isinstance(s, str) and s for s in stop_raw):
        stops = list(stop_raw)
    else:
        raise _bad("Invalid 'stop': expected a string or an array of strings.", "stop")
    if len(stops) > 4:
        raise _bad("Invalid 'stop': at most 4 stop sequences.", "stop")
    temperature = body.get("temperature", 1.0)
    if temperature is None:
        temperature = 1.0
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not (0.0 <= float(temperature) <= 2.0)
    ):
        raise _bad("Invalid 'temperature': expected a number between 0 and 2.", "temperature")
    seed = _int(body, "seed", minimum=SEED_MIN, maximum=SEED_MAX)
    tier = body.get("service_tier")
    if tier is not None:
        if not isinstance(tier, str):
            raise _invalid_type("service_tier", "a string", tier)
        tiers = RESPONSES_SERVICE_TIERS if shape == "openai-responses" else SERVICE_TIERS
        if tier not in tiers:
            raise _invalid_value("service_tier", tier, tiers)
    return OpenAIRequest(
        model,
        max_tokens or default_max_tokens,
        stream,
        include_usage,
        tuple(stops),
        float(temperature),
        seed,
        served_tier(tier),
    )


def _refuse_unstored(body: dict[str, Any]) -> None:
    """A Responses request naming server-side state the local backend does not keep: a
    ``conversation`` (the API prepends its items) or a stored ``prompt`` template (the API
    renders it before the input). Answered 404, naming the limit, rather than generating from
    a prompt without them (its cached tokens would not be the API's; new-user trial 28).
    ``previous_response_id`` with ``conversation`` is refused as the API refuses it (400)
    first."""
    if body.get("previous_response_id") is not None and body.get("conversation") is not None:
        return
    for field, what, advice in _UNSTORED:
        value = body.get(field)
        if value is not None:
            if not isinstance(value, str | dict):
                raise _invalid_type(field, "a string or an object", value)
            ident = value.get("id") if isinstance(value, dict) else value
            raise BackendAPIError(
                404, "not_found_error",
                f"{what.capitalize()} with id '{ident}' not found. (The local backend keeps no "
                f"{what}s: {advice}.)", param=field)


#: (field, what it names, what to do instead) for :func:`_refuse_unstored`.
_UNSTORED = (
    ("conversation", "conversation", "chain turns with previous_response_id"),
    ("prompt", "stored prompt", "send the prompt's text as instructions or input"),
)


IMAGE_DETAILS = ("low", "high", "auto", "original")
"""``detail`` values of a Responses ``input_image`` part (openai-python ``ImageDetail``)."""


def _invalid_value(param: str, value: Any, supported: tuple[str, ...]) -> BackendAPIError:
    """The 400 OpenAI answers for a value outside a parameter's enum."""
    names = [f"'{v}'" for v in supported]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return _bad(f"Invalid value: {value!r}. Supported values are: {listed}.", param,
                "invalid_value")


_CACHE_MODES = ("implicit", "explicit")
"""``prompt_cache_options.mode`` values (hosted-api-rules.md 2.3)."""


def check_cache_options(body: dict[str, Any], policy: CachePolicy,
                        shape: Shape = "openai-chat") -> None:
    """Validate ``prompt_cache_options`` as the API does, before the prompt is read.

    The model must take it (GPT-5.6+, catalog ``prompt_cache_options``); it must be an object;
    ``mode`` one of ``"implicit"`` / ``"explicit"``; ``ttl`` one of the model's catalog TTLs
    (``"30m"``: hosted-api-rules.md 2.3,
    https://developers.openai.com/api/docs/guides/prompt-caching) or, for ``shape``
    ``"openai-responses"``, one an official SDK documents for that API (``"12h"``:
    openai-python 3.57.0 ``types/responses/response_create_params.py``; catalog
    ``[sdk_ttls]``, :func:`promptcache.lint.facts.sdk_ttls`; Chat Completions takes
    ``"30m"`` only). A null field counts as absent; other keys are passed over.

    Raises:
        BackendAPIError: 400 ``invalid_request_error`` whose ``param`` names the field.
    """
    opts = body.get("prompt_cache_options")
    if opts is None:
        return
    if not policy.prompt_cache_options:
        raise _bad(
            f"Unsupported parameter: 'prompt_cache_options' is not supported with "
            f"this model ({policy.model_id}).",
            "prompt_cache_options",
        )
    if not isinstance(opts, dict):
        raise _invalid_type("prompt_cache_options", "an object", opts)
    ttls = tuple(policy.ttls)
    sdk = sdk_ttls(policy.model_id, shape)
    if sdk is not None:
        ttls += tuple(t for t in sdk.ttls if t not in ttls)
    for field, supported in (("mode", _CACHE_MODES), ("ttl", ttls)):
        value = opts.get(field)
        param = f"prompt_cache_options.{field}"
        if value is None:
            continue
        if not isinstance(value, str):
            raise _invalid_type(param, "a string", value)
        if value not in supported:
            raise _invalid_value(param, value, supported)


def _missing(param: str) -> BackendAPIError:
    return _bad(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")


BREAKPOINT_MODES = ("explicit",)
"""``prompt_cache_breakpoint.mode`` values (hosted-api-rules.md 2.3: ``{"mode": "explicit"}``)."""


def check_schema(body: dict[str, Any], shape: Shape,
                 breakpoint_ttls: tuple[str, ...] | None = None) -> None:
    """The API's 400s for request shapes its schema rejects and the renderer passes over.

    Chat Completions: a ``tool`` message without a string ``tool_call_id``; an ``image_url``
    part whose ``image_url`` is not an object with a string ``url``; a ``function`` tool
    without a ``function`` object with a string ``name``. Responses: a ``function`` tool
    without a string ``name``; a ``function_call_output`` whose ``call_id`` matches no earlier
    ``function_call`` of the input ("No tool call found for function call output with call_id
    ..."; items of a ``previous_response_id`` conversation count); a ``message`` item's part of
    a Chat Completions type (``text``, ``image_url``: :data:`CHAT_ONLY_PART_TYPES`,
    ``invalid_value``); a ``prompt_cache_breakpoint`` on an ``output_text`` part (assistant
    output: openai-python 3.57.0 ``ResponseOutputTextParam`` has no such field, and the API
    answers ``Unknown parameter`` to a field its schema lacks, as quoted in
    openai/openai-python#3008; hosted-api-rules.md 2.3: "Assistant output blocks cannot carry
    one"). Both (on message content and, for Responses, on a ``function_call_output``'s list
    of parts): a ``prompt_cache_breakpoint`` without ``mode`` (``missing_required_parameter``:
    openai-python ``PromptCacheBreakpoint.mode`` is ``Required``), a ``mode`` other than
    ``"explicit"`` (``invalid_value``), a ``ttl`` that is not a string or, when
    ``breakpoint_ttls`` is given, not one of them (``invalid_value``; openai-python 3.57.0
    ``PromptCacheBreakpoint.ttl: Literal["30m", "12h"]`` on both APIs). Call after
    the renderer accepted the body (its messages keep priority) and, for Responses, on the
    body with the stored conversation prepended.

    Raises:
        BackendAPIError: 400 ``invalid_request_error`` whose ``param`` names the field
            (``missing_required_parameter``, ``invalid_type`` or ``invalid_value``).
    """
    items_key = "messages" if shape == "openai-chat" else "input"
    items = body.get(items_key)
    items = items if isinstance(items, list) else []
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue
        if shape == "openai-chat":
            function = tool.get("function")
            if function is None:
                raise _missing(f"tools[{i}].function")
            if not isinstance(function, dict):
                raise _invalid_type(f"tools[{i}].function", "an object", function)
            name, where = function.get("name"), f"tools[{i}].function.name"
        else:
            name, where = tool.get("name"), f"tools[{i}].name"
        if name is None:
            raise _missing(where)
        if not isinstance(name, str):
            raise _invalid_type(where, "a string", name)
    calls: set[Any] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        where = f"{items_key}[{i}]"
        if shape == "openai-chat" and item.get("role") == "tool":
            call_id = item.get("tool_call_id")
            if call_id is None:
                raise _missing(f"{where}.tool_call_id")
            if not isinstance(call_id, str):
                raise _invalid_type(f"{where}.tool_call_id", "a string", call_id)
        if shape == "openai-responses":
            if item.get("type") == "function_call":
                calls.add(item.get("call_id"))
            elif item.get("type") == "function_call_output" and item.get("call_id") not in calls:
                raise _bad(
                    f"No tool call found for function call output with call_id "
                    f"{item.get('call_id')}.",
                    items_key,
                )
        output = item.get("output")
        if shape == "openai-responses" and item.get("type") == "function_call_output" \
                and isinstance(output, list):
            for j, part in enumerate(output):
                if isinstance(part, dict):
                    _check_part(part, f"{where}.output[{j}]", breakpoint_ttls)
        content = item.get("content")
        if not isinstance(content, list):
            continue
        message = shape == "openai-responses" and item.get("type", "message") == "message"
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                continue
            if message and part.get("type") in CHAT_ONLY_PART_TYPES:
                raise _invalid_value(f"{where}.content[{j}]", part["type"],
                                     RESPONSES_PART_TYPES)
            if message and part.get("type") == "output_text" \
                    and part.get("prompt_cache_breakpoint") is not None:
                param = f"{where}.content[{j}].prompt_cache_breakpoint"
                raise _bad(f"Unknown parameter: '{param}'.", param, "unknown_parameter")
            _check_part(part, f"{where}.content[{j}]", breakpoint_ttls)


CHAT_ONLY_PART_TYPES = frozenset({"text", "image_url"})
"""Chat Completions content part types a Responses ``message`` item refuses (its text part is
``input_text``, its image ``input_image``): the API answers ``invalid_value`` naming the part
(openai-python ``ResponseInputContentParam``: input_text, input_image, input_file; the hosted
API's message for ``"text"``: "Invalid value: 'text'. Supported values are: 'input_text',
'input_image', 'output_text', 'refusal', 'input_file', 'computer_screenshot', and
'summary_text'.", MervinPraison/PraisonAI#3934)."""

RESPONSES_PART_TYPES = ("input_text", "input_image", "output_text", "refusal", "input_file",
                        "computer_screenshot", "summary_text")
"""The part types that 400 names for a Responses ``message`` item (see
:data:`CHAT_ONLY_PART_TYPES`)."""


def _check_part(part: dict[str, Any], where: str,
                breakpoint_ttls: tuple[str, ...] | None = None) -> None:
    if part.get("type") == "input_image" and part.get("detail") is not None \
            and part["detail"] not in IMAGE_DETAILS:
        raise _invalid_value(f"{where}.detail", part["detail"], IMAGE_DETAILS)
    if part.get("type") == "image_url":
        image = part.get("image_url")
        if image is None:
            raise _missing(f"{where}.image_url")
        if not isinstance(image, dict):
            raise _invalid_type(f"{where}.image_url", "an object", image)
        url = image.get("url")
        if url is None:
            raise _missing(f"{where}.image_url.url")
        if not isinstance(url, str):
            raise _invalid_type(f"{where}.image_url.url", "a string", url)
    marker = part.get("prompt_cache_breakpoint")
    if not isinstance(marker, dict):
        return
    mode = marker.get("mode")
    param = f"{where}.prompt_cache_breakpoint.mode"
    if mode is None:
        raise _missing(param)
    if not isinstance(mode, str):
        raise _invalid_type(param, "a string", mode)
    if mode not in BREAKPOINT_MODES:
        raise _invalid_value(param, mode, BREAKPOINT_MODES)
    ttl = marker.get("ttl")
    if ttl is None:
        return
    param = f"{where}.prompt_cache_breakpoint.ttl"
    if not isinstance(ttl, str):
        raise _invalid_type(param, "a string", ttl)
    if breakpoint_ttls is not None and ttl not in breakpoint_ttls:
        raise _invalid_value(param, ttl, breakpoint_ttls)


def breakpoint_ttls(policy: CachePolicy) -> tuple[str, ...]:
    """The ``prompt_cache_breakpoint.ttl`` values ``policy``'s model takes, on either API: its
    catalog TTLs (``"30m"``) plus those an official SDK documents beyond them (catalog
    ``[sdk_ttls]``: ``"12h"``; openai-python 3.57.0 types ``PromptCacheBreakpoint.ttl:
    Literal["30m", "12h"]`` on the Chat Completions parts as on the Responses ones, while
    ``prompt_cache_options.ttl`` on Chat Completions takes ``"30m"`` only)."""
    ttls = tuple(policy.ttls)
    for shape in ("openai-responses", "openai-chat"):
        sdk = sdk_ttls(policy.model_id, shape)
        if sdk is not None:
            ttls += tuple(t for t in sdk.ttls if t not in ttls)
    return ttls


RETENTIONS = ("in_memory", "24h")
"""``prompt_cache_retention`` values (openai-python 3.x ``completion_create_params`` /
``response_create_params``: ``Literal["in_memory", "24h"]``; hosted-api-rules.md 2.2). A value
outside them is OpenAI's ``invalid_value`` 400; one the model does not offer names the model."""


def _check_cache_params(body: dict[str, Any], prompt: TemplatedPrompt, policy: CachePolicy) -> None:
    if not policy.prompt_cache_options:
        for span in prompt.spans:
            bp = span.segment.breakpoint
            if bp is not None and bp.source == "openai-explicit":
                raise _bad(
                    f"Unsupported parameter: 'prompt_cache_breakpoint' is not supported "
                    f"with this model ({policy.model_id}).",
                    f"{span.segment.path}.prompt_cache_breakpoint",
                )
    retention = body.get("prompt_cache_retention")
    if retention is not None and not isinstance(retention, str):
        raise _invalid_type("prompt_cache_retention", "a string", retention)
    if retention is not None and retention not in RETENTIONS:  # not a value of the enum at all
        raise _invalid_value("prompt_cache_retention", retention, RETENTIONS)
    if retention == "24h" and policy.prompt_cache_options:
        # GPT-5.6+: entries live by prompt_cache_options.ttl; openai-python: "for gpt-5.5,
        # gpt-5.5-pro, and future models, only 24h is supported", the two fields "are
        # independent" (hosted-api-rules.md 2.2: on GPT-5.6+ the field "does not apply"):
        # accepted and ignored
        return
    if retention == "in_memory" and not policy.prompt_cache_retention \
            and not policy.prompt_cache_options:
        # a model without extended retention (gpt-4o, gpt-5-nano...) keeps its prefixes in
        # memory: "in_memory" names what it does. The sources list only a "24h" refusal there
        # (hosted-api-rules.md 2.2: "Sending 24h to a model that does not support it fails")
        return
    if retention is not None and retention not in policy.prompt_cache_retention:
        raise _bad(
            f"Invalid 'prompt_cache_retention': {retention!r} is not supported with "
            f"this model ({policy.model_id}).",
            "prompt_cache_retention",
        )


def usage_counts(outcome: GenerationOutcome) -> OpenAIUsageCounts:
    """The usage a finished OpenAI request reports."""
    total = outcome.prompt.total_tokens
    if outcome.plan is not None:
        plan = outcome.plan
        return OpenAIUsageCounts(total, plan.read_tokens, plan.write_tokens,
                                 plan.write_tokens_by_ttl().get("12h", 0))
    policy = outcome.policy
    reused = int(outcome.result.reused_tokens)
    if outcome.read_limit is not None:  # the idle lifetime (automatic_live_prefix)
        reused = min(reused, outcome.read_limit)
    cached = openai_automatic_cached_tokens(
        reused,
        total,
        min_tokens=policy.min_cacheable_tokens,
        step_tokens=policy.cache_step_tokens,
    )
    return OpenAIUsageCounts(total, cached, None)


def chat_usage(counts: OpenAIUsageCounts, output_tokens: int, *, details: bool) -> dict[str, Any]:
    """``CompletionUsage`` JSON."""
    usage: dict[str, Any] = {
        "prompt_tokens": counts.prompt_tokens,
        "completion_tokens": output_tokens,
        "total_tokens": counts.prompt_tokens + output_tokens,
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    if details:
        ptd: dict[str, Any] = {"cached_tokens": counts.cached_tokens, "audio_tokens": 0}
        if counts.cache_write_tokens is not None:
            ptd["cache_write_tokens"] = counts.cache_write_tokens
        usage["prompt_tokens_details"] = ptd
    return usage


def responses_usage(counts: OpenAIUsageCounts, output_tokens: int) -> dict[str, Any]:
    """``ResponseUsage`` JSON."""
    details: dict[str, Any] = {
        "cached_tokens": counts.cached_tokens,
        "cache_write_tokens": counts.cache_write_tokens or 0,
    }
    if counts.cache_write_tokens is not None:
        details["cache_write_tokens_details"] = {
            "ttl_30m_tokens": counts.cache_write_tokens - counts.cache_write_12h_tokens,
            "ttl_12h_tokens": counts.cache_write_12h_tokens,
        }
    return {
        "input_tokens": counts.prompt_tokens,
        "input_tokens_details": details,
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": counts.prompt_tokens + output_tokens,
    }


def model_info(model_id: str, created: int) -> dict[str, Any]:
    """``Model`` JSON for /v1/models."""
    return {"id": model_id, "object": "model", "created": created, "owned_by": "promptcache"}


def _finish_reason(stop_reason: str) -> str:
    return "length" if stop_reason == "max_tokens" else "stop"


def usage_of(outcome: GenerationOutcome) -> tuple[int, int, int | None]:
    """``(prompt_tokens, cached_tokens, cache_write_tokens)`` as the response reports them."""
    counts = usage_counts(outcome)
    return counts.prompt_tokens, counts.cached_tokens, counts.cache_write_tokens


RESPONSE_STORE_SIZE = 256
"""Responses kept for ``previous_response_id`` (least recently used dropped first)."""


class ResponseStore:
    """Stored Responses conversations, for ``previous_response_id``.

    Each stored response keeps its whole conversation as input items: the items of its own
    ``previous_response_id`` chain, its input (a string input as one user message), and its
    output (one assistant message). ``instructions`` are not kept: the API does not carry them
    over to a response that names a previous one. In memory; a response is visible only to
    the API key that made it (another key gets "not found", as another project would); the
    bound is ``capacity`` responses in all, shared by every key (least recently used first).
    """

    def __init__(self, capacity: int = RESPONSE_STORE_SIZE) -> None:
        self.capacity = capacity
        self._items: OrderedDict[tuple[str, str], list[dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, tenant: str, response_id: str) -> list[dict[str, Any]] | None:
        """The conversation items of a stored response (a copy), or None."""
        with self._lock:
            items = self._items.get((tenant, response_id))
            if items is None:
                return None
            self._items.move_to_end((tenant, response_id))
            return copy.deepcopy(items)

    def put(self, tenant: str, response_id: str, items: list[dict[str, Any]]) -> None:
        """Store a response's conversation (evicting the least recently used over capacity)."""
        with self._lock:
            self._items[(tenant, response_id)] = copy.deepcopy(items)
            self._items.move_to_end((tenant, response_id))
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


def _input_items(value: Any) -> list[dict[str, Any]]:
    """A Responses ``input`` as a list of items (a string is one user message)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


def _with_previous(
    body: dict[str, Any], store: ResponseStore, tenant: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(body to generate from, its conversation items)``: with ``previous_response_id`` the
    stored conversation is prepended to ``input`` (its tokens count, and are cached and read,
    as the API's are).

    Raises:
        BackendAPIError: 400 ``previous_response_not_found`` for an unknown (or ``store:
            false``) id, as the API answers.
    """
    previous = body.get("previous_response_id")
    store_flag = body.get("store", True)
    if store_flag is not None and not isinstance(store_flag, bool):
        raise _invalid_type("store", "a boolean", store_flag)
    if previous is None:
        if isinstance(body.get("input"), (str, list)) or body.get("input") is None:
            return body, _input_items(body.get("input"))
        return body, []  # the renderer names the bad input
    if not isinstance(previous, str):
        raise _invalid_type("previous_response_id", "a string", previous)
    history = store.get(tenant, previous)
    if history is None:
        raise _bad(
            f"Previous response with id '{previous}' not found.",
            "previous_response_id",
            "previous_response_not_found",
        )
    if body.get("input") is not None and not isinstance(body.get("input"), (str, list)):
        return body, []  # the renderer names the bad input
    items = history + _input_items(body.get("input"))
    return {**body, "input": items}, items


@dataclass(slots=True)
class _Prepared:
    req: OpenAIRequest
    policy: CachePolicy
    prompt: TemplatedPrompt
    kwargs: dict[str, Any]


def idle_lifetime_seconds(policy: CachePolicy, retention: Any,
                          in_memory_s: float | None = None) -> float | None:
    """Seconds of inactivity after which the local backend stops reading an automatic (OpenAI
    before GPT-5.6) prefix: the catalog's certain bound (``policy.idle_bounds``: 1 h in memory,
    24 h with ``"24h"``; with no retention sent on a model that accepts both, 24 h, the
    default openai-python documents for non-ZDR organisations), or ``in_memory_s``
    (:attr:`ServerOptions.openai_in_memory_idle_s`) for in-memory retention when set. None
    when the model has no idle lifetime (GPT-5.6+: TTL entries)."""
    bounds = policy.idle_bounds(retention)
    if bounds is None:
        return None
    if bounds.retention == "in_memory" and in_memory_s is not None:
        return in_memory_s
    return bounds.max_s


def _idle_read_limit(service: BackendService, policy: CachePolicy, prompt: TemplatedPrompt,
                     salt: bytes, retention: Any) -> Callable[[float], int | None] | None:
    """The :data:`~promptcache.local.app.ReadLimit` of an automatic-caching request."""
    lifetime = idle_lifetime_seconds(policy, retention, service.options.openai_in_memory_idle_s)
    if lifetime is None:
        return None
    keys = automatic_prefix_keys(prompt.token_ids, salt,
                                 min_tokens=policy.min_cacheable_tokens,
                                 step_tokens=policy.cache_step_tokens)
    ledger = service.openai_idle_ledger

    def read_limit(now: float) -> int:
        return automatic_live_prefix(ledger, keys, now, lifetime)

    return read_limit


def router(service: BackendService) -> APIRouter:
    """Routes bound to ``service``."""
    api = APIRouter()

    def prepare(body: dict[str, Any], request: Request, shape: Shape,
                req: OpenAIRequest | None = None) -> _Prepared:
        """``req``: ``body``'s parameters when already parsed (:func:`parse_request`)."""
        if req is None:
            req = parse_request(body, shape, service.options.default_max_tokens)
        policy = service.policy(req.model, "openai")
        check_cache_options(body, policy, shape)  # the API's wording, before the renderer's
        try:
            prompt = apply_template(body, shape, model=policy.model_id)
        except InvalidRequestError as exc:
            raise _bad(f"Invalid '{exc.path or 'body'}': {exc.reason}", exc.path or None) from None
        _check_cache_params(body, prompt, policy)
        check_schema(body, shape, breakpoint_ttls(policy) if policy.prompt_cache_options
                     else None)
        max_param = next(
            (k for k in ("max_completion_tokens", "max_tokens", "max_output_tokens")
             if body.get(k) is not None),
            None,
        )
        prompt_field = "messages" if shape == "openai-chat" else "input"
        context = service.context_tokens
        if max_param is None and context is not None:
            # no max set: as the API, the completion may use what the context leaves (the
            # server's default only caps it); only a prompt that fills the context is refused
            req = replace(req, max_tokens=max(1, min(req.max_tokens,
                                                     context - prompt.total_tokens)))
        service.check_context(
            prompt.total_tokens,
            req.max_tokens,
            "openai",
            max_param if max_param is not None and (context or 0) < req.max_tokens
            else prompt_field,
            prompt_field,
        )
        salt = service.tenant_salt(api_key_of(request), policy.model_id)
        planner: Callable[[int, float], CachePlan | None]
        read_limit: Callable[[float], int | None] | None = None
        if policy.explicit_breakpoints:
            breakpoints = openai_breakpoints(prompt, prompt.view.params)
            ledger = service.openai_ledger

            def planner(available: int, now: float) -> CachePlan | None:
                return plan_reads_and_writes(
                    prompt,
                    breakpoints,
                    ledger,
                    tenant_salt=salt,
                    now=now,
                    min_tokens=policy.min_cacheable_tokens,
                    lookback_positions=policy.lookback_positions,
                    available_tokens=available,
                )
        else:

            def planner(available: int, now: float) -> CachePlan | None:
                return None

            read_limit = _idle_read_limit(service, policy, prompt, salt,
                                          body.get("prompt_cache_retention"))

        kwargs: dict[str, Any] = dict(
            read_limit=read_limit,
            tenant_salt=salt,
            planner=planner,
            ledger=service.openai_ledger,
            max_tokens=req.max_tokens,
            stop_sequences=req.stop,
            temperature=req.temperature,
            seed=req.seed,
            usage_of=usage_of,
        )
        return _Prepared(req, policy, prompt, kwargs)

    async def run(p: _Prepared, request: Request) -> GenerationOutcome:
        """A non-streamed generation (counted in /metrics by ``service.generate``), cancelled
        when its client disconnects."""
        return await generate_until_disconnect(request, service, p.prompt, p.policy, **p.kwargs)

    async def start(p: _Prepared, request: Request) -> tuple[GenerationStream, tuple[str, Any]]:
        """A streamed generation (counted in /metrics by its worker) and its first event."""
        events = service.start_stream(p.prompt, p.policy, **p.kwargs)
        _, first = await first_event(request, events)
        return events, first

    @api.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await read_json(request, service.options.max_body_bytes)
        p = prepare(body, request, "openai-chat")
        cid = "chatcmpl-" + secrets.token_hex(12)
        created = int(time.time())
        details = service.options.openai_prompt_tokens_details
        if not p.req.stream:
            outcome = await run(p, request)
            return JSONResponse(
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": created,
                    "model": p.req.model,
                    "system_fingerprint": "promptcache-local",
                    "service_tier": p.req.service_tier,
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": _finish_reason(outcome.result.stop_reason),
                            "logprobs": None,
                            "message": {
                                "role": "assistant",
                                "content": outcome.text,
                                "refusal": None,
                                "annotations": [],
                            },
                        }
                    ],
                    "usage": chat_usage(
                        usage_counts(outcome), len(outcome.result.output_ids), details=details
                    ),
                }
            )
        events, first = await start(p, request)
        return GenerationResponse(_chat_stream(service, p, cid, created, events, first), events)

    store = ResponseStore()

    @api.post("/v1/responses")
    async def responses(request: Request) -> Response:
        body = await read_json(request, service.options.max_body_bytes)
        tenant = api_key_of(request) or ""
        # validated before the stored conversation is looked up; the prepended items change
        # only ``input``, none of the parsed parameters
        req = parse_request(body, "openai-responses", service.options.default_max_tokens)
        full_body, items = _with_previous(body, store, tenant)
        p = prepare(full_body, request, "openai-responses", req)
        rid = "resp_" + secrets.token_hex(12)
        mid = "msg_" + secrets.token_hex(12)
        created = time.time()

        def keep(text: str) -> None:
            if body.get("store", True) is not False:
                store.put(tenant, rid, [*items, {"type": "message", "role": "assistant",
                                                 "content": text}])

        if not p.req.stream:
            outcome = await run(p, request)
            text = outcome.text
            keep(text)
            return JSONResponse(_response_object(body, p, rid, mid, created, outcome, text))
        events, first = await start(p, request)
        return GenerationResponse(
            _responses_stream(body, p, rid, mid, created, events, first, keep), events
        )

    return api


def _response_object(
    body: dict[str, Any],
    p: _Prepared,
    rid: str,
    mid: str,
    created: float,
    outcome: GenerationOutcome | None,
    text: str,
) -> dict[str, Any]:
    done = outcome is not None
    truncated = done and outcome is not None and outcome.result.stop_reason == "max_tokens"
    status = "in_progress" if not done else ("incomplete" if truncated else "completed")
    output: list[dict[str, Any]] = []
    if done:
        output = [
            {
                "type": "message",
                "id": mid,
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
                ],
            }
        ]
    usage = None
    if outcome is not None:
        usage = responses_usage(usage_counts(outcome), len(outcome.result.output_ids))
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    choice = body.get("tool_choice", "auto")
    return {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": status,
        "model": p.req.model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": choice if isinstance(choice, (str, dict)) else "auto",
        "tools": tools,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if truncated else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": p.req.max_tokens,
        "temperature": p.req.temperature,
        "top_p": 1.0,
        "truncation": "disabled",
        "text": {"format": {"type": "text"}},
        "metadata": {},
        "store": body.get("store", True) is not False,
        "previous_response_id": body.get("previous_response_id"),
        "prompt_cache_key": body.get("prompt_cache_key"),
        "service_tier": p.req.service_tier,
        "usage": usage,
    }


async def _chat_stream(
    service: BackendService,
    p: _Prepared,
    cid: str,
    created: int,
    events: Any,
    first: tuple[str, Any],
) -> AsyncIterator[bytes]:
    include_usage = p.req.include_usage

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data: dict[str, Any] = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": p.req.model,
            "system_fingerprint": "promptcache-local",
            "service_tier": p.req.service_tier,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if include_usage:
            data["usage"] = None
        return sse(None, data)

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    decoder = StopText(p.req.stop)  # holds back text that may start a stop sequence
    item = first
    while True:
        kind, value = item
        if kind == "token":
            text = decoder.feed(int(value))
            if text:
                yield chunk({"content": text})
        elif kind == "done":
            outcome: GenerationOutcome = value
            text = decoder.finish()
            if text:
                yield chunk({"content": text})
            yield chunk({}, _finish_reason(outcome.result.stop_reason))
            if include_usage:
                counts = usage_counts(outcome)
                yield sse(
                    None,
                    {
                        "id": cid,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": p.req.model,
                        "system_fingerprint": "promptcache-local",
                        "service_tier": p.req.service_tier,
                        "choices": [],
                        "usage": chat_usage(
                            counts,
                            len(outcome.result.output_ids),
                            details=service.options.openai_prompt_tokens_details,
                        ),
                    },
                )
            yield b"data: [DONE]\n\n"
            return
        elif kind == "error":
            exc = value
            message = exc.message if isinstance(exc, BackendAPIError) else "Internal server error."
            yield sse(
                None,
                {
                    "error": {
                        "message": message,
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                },
            )
            return
        item = await next_event(events)


async def _responses_stream(
    body: dict[str, Any],
    p: _Prepared,
    rid: str,
    mid: str,
    created: float,
    events: Any,
    first: tuple[str, Any],
    keep: Callable[[str], None],
) -> AsyncIterator[bytes]:
    seq = 0

    def event(kind: str, data: dict[str, Any]) -> bytes:
        nonlocal seq
        payload = {"type": kind, "sequence_number": seq, **data}
        seq += 1
        return sse(kind, payload)

    pending_resp = _response_object(body, p, rid, mid, created, None, "")
    yield event("response.created", {"response": pending_resp})
    yield event("response.in_progress", {"response": pending_resp})
    item_base = {"type": "message", "id": mid, "role": "assistant"}
    yield event(
        "response.output_item.added",
        {"output_index": 0, "item": {**item_base, "status": "in_progress", "content": []}},
    )
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    yield event(
        "response.content_part.added",
        {"output_index": 0, "content_index": 0, "item_id": mid, "part": part},
    )
    decoder = StopText(p.req.stop)  # holds back text that may start a stop sequence

    def delta(text: str) -> bytes:
        return event(
            "response.output_text.delta",
            {"output_index": 0, "content_index": 0, "item_id": mid, "delta": text, "logprobs": []},
        )

    item = first
    while True:
        kind, value = item
        if kind == "token":
            text = decoder.feed(int(value))
            if text:
                yield delta(text)
        elif kind == "done":
            outcome: GenerationOutcome = value
            rest = decoder.finish()
            if rest:
                yield delta(rest)
            full = outcome.text
            keep(full)  # stored for previous_response_id (unless store: false)
            yield event(
                "response.output_text.done",
                {
                    "output_index": 0,
                    "content_index": 0,
                    "item_id": mid,
                    "text": full,
                    "logprobs": [],
                },
            )
            done_part = {**part, "text": full}
            yield event(
                "response.content_part.done",
                {"output_index": 0, "content_index": 0, "item_id": mid, "part": done_part},
            )
            yield event(
                "response.output_item.done",
                {
                    "output_index": 0,
                    "item": {**item_base, "status": "completed", "content": [done_part]},
                },
            )
            final = _response_object(body, p, rid, mid, created, outcome, full)
            kind_done = (
                "response.incomplete" if final["status"] == "incomplete" else "response.completed"
            )
            yield event(kind_done, {"response": final})
            return
        elif kind == "error":
            exc = value
            message = exc.message if isinstance(exc, BackendAPIError) else "Internal server error."
            yield event("error", {"code": "server_error", "message": message, "param": None})
            return
        item = await next_event(events)
