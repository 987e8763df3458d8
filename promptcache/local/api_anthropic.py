"""Anthropic Messages API emulation: ``POST /v1/messages`` and ``/v1/messages/count_tokens``.

Request: ``model``, ``max_tokens`` (0 = pre-warm), ``messages``, ``system`` (string or text
blocks), ``tools``, ``tool_choice``, ``stop_sequences``, ``temperature``, ``stream``,
``cache_control`` on any block kind the API allows plus the top-level (automatic) one; the
renderer (:func:`promptcache.prefix.render`) validates shapes. Response objects parse with
``anthropic.types.Message`` / ``MessageTokensCount`` / ``RawMessageStreamEvent``.

Usage (hosted-api-rules.md 1.8; https://platform.claude.com/docs/en/build-with-claude/prompt-caching):
``input_tokens`` counts tokens after the last cache read/write only; ``cache_creation`` splits
writes by TTL. An entry is readable only by requests that arrived after its writer's response
began (hosted-api-rules.md 1.9): parallel cold requests each report the write. Streaming puts the input-side counts on ``message_start`` (with ``output_tokens``
generated so far: message_start is sent once the prefill has run, like the real API) and
**cumulative** counts on ``message_delta`` (no ``cache_creation`` there, as in
``MessageDeltaUsage``).

Token counts (usage and count_tokens) are the local model's own tokens (o200k_base ids for the
default random model, a checkpoint's tokenizer otherwise) for every Claude model: the catalog's
``token_ratio`` (1.3 on Claude 4.7 and later, whose tokenizer "produces about 30% more tokens",
hosted-api-rules.md 1.10), which ``promptcache count`` applies to its cl100k_base estimate, is
**not** applied. So on 4.7+ models the backend reports about 1/1.3 of the hosted count (and of
``promptcache count``) and checks the model's minimum (Opus 4.7: 2,048) against that smaller
count: a prefix of about 1,580-2,047 local tokens is cached on the hosted API but not here.
Why not scaled: every count reported here is a position in the backend's own KV cache (reads,
writes and breakpoints line up exactly with :func:`~promptcache.local.template.apply_template`
spans, and reported reads are checked against the physical reuse); a rounded "about 30%"
factor would break that exactness, and even the 4.6 counts are not Anthropic's tokenizer's.
To test a 4.7+ minimum, size the prefix against ``min_cacheable_tokens / token_ratio``.

Limits: input tokens + ``max_tokens`` above the local model's context is a 400 ("input length
and `max_tokens` exceed context limit: A + B > C", the API's wording; the bound is the local
model's context, as the catalog records no per-model output limit). A non-streamed request
whose client disconnects stops decoding (:func:`promptcache.local.app.generate_until_disconnect`).

Stop sequences are matched on the decoded output text (:class:`~promptcache.local.app.StopText`),
as the API does: ``stop_reason: "stop_sequence"``, ``stop_sequence`` the matched string, the text
cut before it; streamed deltas hold back text that may begin a stop sequence. ``output_tokens``
counts every generated token, the ones that completed the match included.

Pre-warm (``max_tokens: 0``): prefill only, writes at the breakpoints, ``content: []``,
``stop_reason: "max_tokens"``; rejected with ``stream``, ``thinking.type: "enabled"``,
``output_config.format`` or a forced ``tool_choice`` (hosted-api-rules.md 1.5).

Schema (both routes, :func:`_check_schema`): a ``role`` other than user / assistant (or the beta
``system``), a block ``type`` no SDK block type has, an image / document without a ``source``
object, a ``tool_use`` whose ``id`` / ``name`` is not a string or ``input`` not an object, and a
``tool_choice`` that is not an object with a known ``type`` are the API's 400, not priced.

Tool pairing (both routes): a client ``tool_use`` without a ``tool_result`` for its id in the
next message, or a ``tool_result`` whose ``tool_use_id`` matches no ``tool_use`` of the previous
message, is the API's 400 naming the id (:func:`_check_tool_pairing`); ``server_tool_use`` and a
``tool_use`` in the final assistant message (prefill) are not checked.

Deviation: the model is a local random/checkpoint model, so replies are text only (no
``tool_use`` output blocks) and ``model`` is echoed as requested.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from promptcache._errors import InvalidRequestError
from promptcache.catalog import CachePolicy
from promptcache.local.accounting import (
    AnthropicUsageCounts,
    CachePlan,
    Instant,
    PlannedBreakpoint,
    anthropic_breakpoints,
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
    request_id_of,
    sse,
)
from promptcache.local.errors import SEED_MAX, SEED_MIN, BackendAPIError
from promptcache.local.template import (
    TemplatedPrompt,
    apply_template,
)
from promptcache.prefix import NO_MARKER_KINDS

__all__ = ["AnthropicRequest", "message_body", "model_info", "parse_request", "router"]

_STOP_REASONS = {"max_tokens": "max_tokens", "stop": "stop_sequence", "eos": "end_turn"}


def _bad(message: str) -> BackendAPIError:
    return BackendAPIError(400, "invalid_request_error", message)


def _dotted(path: str) -> str:
    return path.replace("[", ".").replace("]", "")


@dataclass(frozen=True, slots=True)
class AnthropicRequest:
    """The generation parameters of a validated Messages request.

    Attributes:
        model: the model id as requested.
        max_tokens: output limit (0 = pre-warm).
        stream: SSE response.
        stop_sequences: strings that end generation.
        temperature: sampling temperature (0 = greedy).
        seed: sampling seed (``metadata`` is not a seed; a local-only ``seed`` key is honoured,
            a 64-bit signed integer: another value is a 400 naming ``seed``).
    """

    model: str
    max_tokens: int
    stream: bool
    stop_sequences: tuple[str, ...]
    temperature: float
    seed: int | None


def parse_request(body: dict[str, Any], *, count_only: bool = False) -> AnthropicRequest:
    """Validate the non-segment fields of a Messages request.

    Raises:
        BackendAPIError: 400 with the API's style of message (``"max_tokens: Field required"``).
    """
    model = body.get("model")
    if model is None or model == "":
        raise _bad("model: Field required")
    if not isinstance(model, str):  # 5, ["claude-..."]: a type error, not a missing field
        raise _bad("model: Input should be a valid string")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise _bad(
            "messages: Field required"
            if messages is None
            else "messages: Input should be a valid list"
        )
    if not messages and not count_only:
        raise _bad("messages: at least one message is required")
    _check_message_content(messages)
    if count_only:
        return AnthropicRequest(model, 0, False, (), 1.0, None)
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        raise _bad("max_tokens: Field required")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise _bad("max_tokens: Input should be a valid integer")
    if max_tokens < 0:
        raise _bad("max_tokens: Input should be greater than or equal to 0")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("stream: Input should be a valid boolean")
    stops = body.get("stop_sequences") or []
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise _bad("stop_sequences: Input should be a list of non-empty strings")
    temperature = body.get("temperature", 1.0)
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not (0.0 <= float(temperature) <= 1.0)
    ):
        raise _bad("temperature: Input should be a number between 0 and 1")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise _bad("seed: Input should be a valid integer")
    if seed is not None and not SEED_MIN <= seed <= SEED_MAX:
        # a local-only key (the Messages API has no seed); the engine's sampler takes an int64
        bound = f"greater than or equal to {SEED_MIN}" if seed < SEED_MIN else (
            f"less than or equal to {SEED_MAX}")
        raise _bad(f"seed: Input should be {bound} (a 64-bit signed integer)")
    if max_tokens == 0:
        thinking = body.get("thinking")
        choice = body.get("tool_choice")
        output_config = body.get("output_config")
        if stream:
            raise _bad("max_tokens: 0 (pre-warming) cannot be combined with stream: true")
        if isinstance(thinking, dict) and thinking.get("type") == "enabled":
            raise _bad("max_tokens: 0 (pre-warming) cannot be combined with thinking enabled")
        if isinstance(output_config, dict) and output_config.get("format") is not None:
            raise _bad("max_tokens: 0 (pre-warming) cannot be combined with output_config.format")
        if isinstance(choice, dict) and choice.get("type") in ("tool", "any"):
            raise _bad("max_tokens: 0 (pre-warming) cannot be combined with a forced tool_choice")
    return AnthropicRequest(model, max_tokens, stream, tuple(stops), float(temperature), seed)


def _check_message_content(messages: list[Any]) -> None:
    """The API's 400 for an empty ``content`` (``""`` or ``[]``): "all messages must have
    non-empty content except for the optional final assistant message"."""
    last = len(messages) - 1
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue  # the renderer names the path
        content = message.get("content")
        if (content == "" or content == []) and not (
            i == last and message.get("role") == "assistant"
        ):
            raise _bad(
                f"messages.{i}: all messages must have non-empty content except for the "
                f"optional final assistant message"
            )


def template(body: dict[str, Any], policy: CachePolicy) -> TemplatedPrompt:
    """Render and encode a Messages request.

    Raises:
        BackendAPIError: 400 naming the path (``messages.2.content.0.text: must be a string``).
    """
    try:
        prompt = apply_template(body, "anthropic", model=policy.model_id)
    except InvalidRequestError as exc:
        where = _dotted(exc.path) if exc.path else "body"
        raise _bad(f"{where}: {exc.reason}") from None
    _check_schema(body)
    _check_text_blocks(prompt)
    _check_tool_pairing(body["messages"])
    return prompt


MESSAGE_ROLES = ("user", "assistant", "system")
"""``messages[].role`` values: the SDK's ``MessageParam`` takes ``"user"`` / ``"assistant"``;
``"system"`` is the beta mid-conversation system message (hosted-api-rules.md 1.7 notes,
"Escape hatches")."""

CONTENT_BLOCK_TYPES = (
    "text", "image", "document", "search_result", "thinking", "redacted_thinking", "tool_use",
    "tool_result", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
    "advisor_tool_result", "code_execution_tool_result", "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result", "tool_search_tool_result", "mcp_tool_use",
    "mcp_tool_result", "container_upload", "compaction", "tool_addition", "tool_removal",
    "mcp_tool_listing", "fallback",
)
"""Message content block types a request may send: the ``type`` tags of anthropic-python
2.14.0 ``BetaContentBlockParam`` (``types/beta/beta_content_block_param.py``; the GA
``ContentBlockParam`` union is a subset), so beta blocks are accepted too. Another ``type`` is
the API's 400 (its discriminated union has no such tag)."""

TOOL_CHOICE_TYPES = ("auto", "any", "tool", "none")
"""``tool_choice.type`` values (anthropic-python 2.14.0 ``ToolChoiceParam``)."""

_SOURCE_BLOCKS = ("image", "document")


def _check_schema(body: dict[str, Any]) -> None:
    """The API's 400s for request shapes its schema rejects and the renderer passes over.

    * ``messages.N.role`` not ``"user"`` / ``"assistant"`` (or the beta ``"system"``);
    * a content block whose ``type`` is no block type (:data:`CONTENT_BLOCK_TYPES`);
    * an ``image`` / ``document`` block without a ``source`` object;
    * a ``tool_use`` / ``server_tool_use`` block whose ``id`` or ``name`` is not a string or
      whose ``input`` is not an object;
    * a ``tool_choice`` that is not an object with a known ``type`` (``"tool"`` needs a
      ``name``).

    Messages follow the API's validation errors (``messages.0.role: Input should be 'user' or
    'assistant'``).

    Raises:
        BackendAPIError: 400 ``invalid_request_error``.
    """
    for i, message in enumerate(body.get("messages") or []):
        if not isinstance(message, dict):
            continue  # the renderer named it
        if message.get("role") not in MESSAGE_ROLES:
            raise _bad(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for j, block in enumerate(content):
            if isinstance(block, dict):
                _check_block(block, f"messages.{i}.content.{j}")
    choice = body.get("tool_choice")
    if choice is not None:
        if not isinstance(choice, dict):
            raise _bad("tool_choice: Input should be a valid dictionary or object to extract "
                       "fields from")
        kind = choice.get("type")
        if kind not in TOOL_CHOICE_TYPES:
            tags = ", ".join(f"'{t}'" for t in TOOL_CHOICE_TYPES)
            raise _bad(f"tool_choice: Input tag {kind!r} found using 'type' does not match any "
                       f"of the expected tags: {tags}")
        if kind == "tool" and not isinstance(choice.get("name"), str):
            raise _bad("tool_choice.name: Field required" if choice.get("name") is None
                       else "tool_choice.name: Input should be a valid string")


def _check_block(block: dict[str, Any], where: str) -> None:
    kind = block.get("type")
    if kind not in CONTENT_BLOCK_TYPES:
        tags = ", ".join(f"'{t}'" for t in CONTENT_BLOCK_TYPES)
        raise _bad(f"{where}: Input tag {kind!r} found using 'type' does not match any of the "
                   f"expected tags: {tags}")
    if kind in _SOURCE_BLOCKS:
        source = block.get("source")
        if source is None:
            raise _bad(f"{where}.source: Field required")
        if not isinstance(source, dict):
            raise _bad(f"{where}.source: Input should be a valid dictionary or object to "
                       f"extract fields from")
    elif kind in ("tool_use", "server_tool_use"):
        for key in ("id", "name"):
            value = block.get(key)
            if value is None:
                raise _bad(f"{where}.{key}: Field required")
            if not isinstance(value, str):
                raise _bad(f"{where}.{key}: Input should be a valid string")
        tool_input = block.get("input")
        if tool_input is None:
            raise _bad(f"{where}.input: Field required")
        if not isinstance(tool_input, dict):
            raise _bad(f"{where}.input: Input should be a valid dictionary")


def _turns(messages: list[Any]) -> list[tuple[str, list[tuple[int, int, dict[str, Any]]]]]:
    """Turns as the API sees them: consecutive messages of one role are one turn, and
    mid-conversation ``role: "system"`` messages sit between turns. Each turn lists its
    ``(message index, block index, block)`` for the block-list contents (a string content has
    no tool blocks). Call after the renderer validated the shapes."""
    turns: list[tuple[str, list[tuple[int, int, dict[str, Any]]]]] = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "system":
            continue
        content = message.get("content")
        blocks = (
            [(i, j, block) for j, block in enumerate(content)]
            if isinstance(content, list)
            else []
        )
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((str(role), blocks))
    return turns


def _check_tool_pairing(messages: list[Any]) -> None:
    """The API's 400s for client tool calls and results that do not pair up.

    * Every ``tool_use`` block of an assistant turn needs a ``tool_result`` block with its id in
      the next (user) turn: "messages.N: tool_use ids were found without tool_result blocks
      immediately after: ID. Each tool_use block must have a corresponding tool_result block
      in the next message."
    * Every ``tool_result`` of a user turn must answer a ``tool_use`` of the previous
      (assistant) turn: "messages.N.content.K: unexpected tool_use_id found in tool_result
      blocks: ID. Each tool_result block must have a corresponding tool_use block in the
      previous message."

    Only client ``tool_use`` blocks need results: ``server_tool_use`` (web search, code
    execution, ...) and their ``*_tool_result`` blocks are paired by the server. Text after the
    ``tool_result`` blocks of a turn is allowed. A ``tool_use`` in the final assistant message
    (a prefill) is not checked: nothing follows it, and hosted-api-rules.md documents no rule
    for it, so the backend does not guess one. Consecutive messages of one role are one turn,
    as the API combines them."""
    turns = _turns(messages)
    for t, (role, blocks) in enumerate(turns):
        if role == "assistant" and t + 1 < len(turns):
            uses = [(i, b["id"]) for i, _, b in blocks
                    if b.get("type") == "tool_use" and isinstance(b.get("id"), str)]
            if not uses:
                continue
            next_role, next_blocks = turns[t + 1]
            answered = {
                b.get("tool_use_id") for _, _, b in next_blocks if b.get("type") == "tool_result"
            } if next_role == "user" else set()
            missing = [(i, tid) for i, tid in uses if tid not in answered]
            if missing:
                raise _bad(
                    f"messages.{missing[0][0]}: tool_use ids were found without tool_result "
                    f"blocks immediately after: {', '.join(tid for _, tid in missing)}. Each "
                    f"tool_use block must have a corresponding tool_result block in the next "
                    f"message."
                )
        elif role == "user":
            previous = turns[t - 1] if t > 0 else None
            called = {
                b.get("id") for _, _, b in previous[1] if b.get("type") == "tool_use"
            } if previous is not None and previous[0] == "assistant" else set()
            for i, j, b in blocks:
                tid = b.get("tool_use_id")
                if b.get("type") == "tool_result" and tid not in called:
                    raise _bad(
                        f"messages.{i}.content.{j}: unexpected tool_use_id found in "
                        f"tool_result blocks: {tid}. Each tool_result block must have a "
                        f"corresponding tool_use block in the previous message."
                    )


def _check_text_blocks(prompt: TemplatedPrompt) -> None:
    """The API's 400s for blocks that cannot carry a marker or hold no text.

    A ``thinking`` / ``redacted_thinking`` block with ``cache_control`` is a 400 naming the
    path (``messages.1.content.0.cache_control``): the SDK's param types of those blocks have no
    ``cache_control`` field (hosted-api-rules.md 1.2), so the API rejects the extra input; the
    block is still cached as part of a prefix that a later breakpoint closes.

    Case BR-10: an empty text block cannot carry
    ``cache_control``, and a text *block* (not a plain string) must hold non-whitespace text.
    Source: https://github.com/anthropics/claude-code/issues/54013 (see
    ../shared/cases, BR-10) and https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    ("empty text blocks cannot be cached")."""
    for seg in prompt.view.segments:
        if (
            seg.kind in NO_MARKER_KINDS
            and seg.breakpoint is not None
            and seg.breakpoint.source == "block"
        ):
            raise _bad(
                f"{_dotted(seg.path)}.cache_control: Extra inputs are not permitted "
                f"({seg.kind} blocks cannot carry cache_control)"
            )
        if seg.kind != "text" or not seg.path.endswith("]") or (seg.text or "").strip():
            continue
        where = _dotted(seg.path)
        if seg.breakpoint is not None and not seg.text:
            raise _bad(f"{where}.cache_control: cache_control cannot be set for empty text blocks")
        raise _bad(f"{where}: text content blocks must contain non-whitespace text")


def usage_body(counts: AnthropicUsageCounts, output_tokens: int) -> dict[str, Any]:
    """``Usage`` JSON (``anthropic.types.Usage``)."""
    return {
        "input_tokens": counts.input_tokens,
        "cache_creation_input_tokens": counts.cache_creation_input_tokens,
        "cache_read_input_tokens": counts.cache_read_input_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": counts.ephemeral_5m_input_tokens,
            "ephemeral_1h_input_tokens": counts.ephemeral_1h_input_tokens,
        },
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def _message_id() -> str:
    return "msg_" + secrets.token_hex(12)


def _stop_sequence(outcome: GenerationOutcome) -> str | None:
    """The stop sequence that ended generation (matched on the output text)."""
    return outcome.stop_sequence if outcome.result.stop_reason == "stop" else None


def message_body(
    req: AnthropicRequest, message_id: str, outcome: GenerationOutcome
) -> dict[str, Any]:
    """The ``Message`` JSON of a finished generation."""
    assert outcome.plan is not None
    result = outcome.result
    text = outcome.text
    content = [{"type": "text", "text": text}] if req.max_tokens > 0 and text else []
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": content,
        "stop_reason": _STOP_REASONS.get(result.stop_reason, "end_turn"),
        "stop_sequence": _stop_sequence(outcome),
        "usage": usage_body(AnthropicUsageCounts.from_plan(outcome.plan), len(result.output_ids)),
    }


def model_info(model_id: str, created: int) -> dict[str, Any]:
    """``ModelInfo`` JSON for /v1/models."""
    return {
        "type": "model",
        "id": model_id,
        "display_name": model_id,
        "created_at": datetime.fromtimestamp(created, UTC).isoformat().replace("+00:00", "Z"),
        "lifecycle": "active",
    }


def usage_of(outcome: GenerationOutcome) -> tuple[int, int, int]:
    """``(prompt_tokens, cache_read, cache_write)`` as the response reports them (/metrics)."""
    assert outcome.plan is not None
    counts = AnthropicUsageCounts.from_plan(outcome.plan)
    return (
        outcome.prompt.total_tokens,
        counts.cache_read_input_tokens,
        counts.cache_creation_input_tokens,
    )


def router(service: BackendService) -> APIRouter:
    """Routes bound to ``service``."""
    api = APIRouter()

    def prepare(
        body: dict[str, Any], request: Request, req: AnthropicRequest, arrived: Instant
    ) -> tuple[CachePolicy, TemplatedPrompt, bytes, Callable[[int, float], CachePlan]]:
        policy = service.policy(req.model, "anthropic")
        prompt = template(body, policy)
        breakpoints: list[PlannedBreakpoint] = anthropic_breakpoints(prompt, policy)
        salt = service.tenant_salt(api_key_of(request), policy.model_id)
        ledger = service.anthropic_ledger

        def planner(available: int, now: float) -> CachePlan:
            return plan_reads_and_writes(
                prompt,
                breakpoints,
                ledger,
                tenant_salt=salt,
                now=now,
                min_tokens=policy.min_cacheable_tokens,
                lookback_positions=policy.lookback_positions,
                available_tokens=available,
                arrived=arrived,
            )

        return policy, prompt, salt, planner

    @api.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> JSONResponse:
        body = await read_json(request, service.options.max_body_bytes)
        req = parse_request(body, count_only=True)
        policy = service.policy(req.model, "anthropic")
        prompt = template(body, policy)
        return JSONResponse({"input_tokens": prompt.total_tokens})

    @api.post("/v1/messages")
    async def messages(request: Request) -> Response:
        # entries whose writer's response began after this are not readable by this request
        # (hosted-api-rules.md 1.9: "available only after the first response begins")
        arrived = service.arrival()
        body = await read_json(request, service.options.max_body_bytes)
        req = parse_request(body)
        policy, prompt, salt, planner = prepare(body, request, req, arrived)
        service.check_context(prompt.total_tokens, req.max_tokens, "anthropic", "max_tokens")
        kwargs: dict[str, Any] = dict(
            tenant_salt=salt,
            planner=planner,
            ledger=service.anthropic_ledger,
            max_tokens=req.max_tokens,
            stop_sequences=req.stop_sequences,
            temperature=req.temperature,
            seed=req.seed,
            usage_of=usage_of,
        )
        message_id = _message_id()
        if not req.stream:  # counted by service.generate; cancelled if the client leaves
            outcome = await generate_until_disconnect(request, service, prompt, policy, **kwargs)
            return JSONResponse(message_body(req, message_id, outcome))

        events = service.start_stream(prompt, policy, **kwargs)  # counted by its worker
        plan, first = await first_event(request, events)
        assert plan is not None
        return GenerationResponse(
            _stream(req, message_id, plan, first, events),
            events,
            headers={"cache-control": "no-cache", "request-id": request_id_of(request)},
        )

    return api


async def _stream(
    req: AnthropicRequest,
    message_id: str,
    plan: CachePlan,
    first: tuple[str, Any],
    events: GenerationStream,
) -> AsyncIterator[bytes]:
    """The SSE body (usage is counted by the generation's worker, not here)."""
    counts = AnthropicUsageCounts.from_plan(plan)
    produced = 1 if first[0] == "token" else 0
    start_usage = usage_body(counts, produced)
    yield sse(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": req.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            },
        },
    )
    yield sse(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )
    yield sse("ping", {"type": "ping"})
    decoder = StopText(req.stop_sequences)  # holds back text that may start a stop sequence

    def delta(text: str) -> bytes:
        return sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
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
            result = outcome.result
            stop_seq = _stop_sequence(outcome)
            tail = decoder.finish()
            if tail:
                yield delta(tail)
            yield sse("content_block_stop", {"type": "content_block_stop", "index": 0})
            yield sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {
                        "stop_reason": _STOP_REASONS.get(result.stop_reason, "end_turn"),
                        "stop_sequence": stop_seq,
                    },
                    "usage": {
                        "input_tokens": counts.input_tokens,
                        "cache_creation_input_tokens": counts.cache_creation_input_tokens,
                        "cache_read_input_tokens": counts.cache_read_input_tokens,
                        "output_tokens": len(result.output_ids),
                    },
                },
            )
            yield sse("message_stop", {"type": "message_stop"})
            return
        elif kind == "error":
            exc = value
            err_type = exc.error_type if isinstance(exc, BackendAPIError) else "api_error"
            message = exc.message if isinstance(exc, BackendAPIError) else "Internal server error."
            yield sse("error", {"type": "error", "error": {"type": err_type, "message": message}})
            return
        item = await next_event(events)
