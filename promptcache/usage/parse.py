"""Parse provider usage objects (SDK objects or plain dicts) into :class:`UsageRecord`.

Every provider has one private ``_map_usage_<provider>`` that turns its usage object into a flat
dict of *raw counters* (the provider's own field names), and one ``_build_<provider>`` that turns
raw counters into a record. Streaming goes through the same two steps: :class:`StreamUsage`
merges the raw counters of every event of one response with the BR-30 rule (per field, the
**maximum** across the response's events; counters never decrease within one response, so a
decrease is flagged, and cumulative counters are never summed), then builds one record.

Provider semantics (sources: reference/hosted-api-rules.md sections 1.8, 2.4, 3):

* Anthropic (https://github.com/anthropics/anthropic-sdk-python ``types/usage.py``):
  ``input_tokens`` is the uncached bucket; ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens`` are separate; ``cache_creation.ephemeral_{5m,1h}_input_tokens``
  splits writes by TTL. Streaming: ``message_start`` carries the input side and the TTL split,
  ``message_delta.usage`` carries *cumulative* counts (no TTL split). Some relays send everything
  on ``message_delta`` only; the max-merge gives the same record either way. A stream with a
  ``message_start`` but no ``message_delta`` (cut short) has an unknown output, flagged.
  ``usage.inference_geo`` (``"us"``: 1.1x pricing for Claude 4.6+) becomes the record's
  ``inference_geo``. Message Batches results (``{"custom_id", "result": {"type":
  "succeeded", "message": {...}}}``) are read as their message; OpenAI Batch output lines
  (``{"custom_id", "response": {"status_code", "body": {...}}}``) as their body.
* OpenAI chat (https://github.com/openai/openai-python ``types/completion_usage.py``):
  ``prompt_tokens`` *includes* ``prompt_tokens_details.cached_tokens`` and ``cache_write_tokens``;
  uncached = prompt - cached - written. When the parts exceed the total the record is clamped
  (the read capped at the total, the writes at what remains, uncached 0) and flagged
  ``input_parts_exceed_total`` plus ``input_parts_reported:...`` with the reported numbers
  (:class:`~promptcache.usage.record.UsageRecord` does it for every record with ``input_total``).
  Streaming: the ``include_usage`` chunk (``choices: []``). vLLM and other compatible servers use
  the same shape; a missing ``cached_tokens`` is unknown (``None``), not 0.
* OpenAI Responses (``types/responses/response_usage.py``): ``input_tokens`` inclusive,
  ``input_tokens_details.{cached_tokens, cache_write_tokens}``; streaming: ``response.completed``.
* DeepSeek (https://api-docs.deepseek.com/guides/kv_cache): ``prompt_cache_hit_tokens`` (read) and
  ``prompt_cache_miss_tokens`` (uncached); no write category.
* Bedrock Converse (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_TokenUsage.html):
  ``inputTokens`` excludes ``cacheReadInputTokens``/``cacheWriteInputTokens``; ``cacheDetails``
  (``[{ttl, inputTokens}]``) splits writes by TTL. Streaming: the ``metadata`` event.
* Gemini (https://ai.google.dev/gemini-api/docs/caching): ``usage_metadata.prompt_token_count``
  includes ``cached_content_token_count``; thoughts are billed as output. Deviation from "missing
  means unknown": the Gemini REST API serialises with proto3 JSON rules, which omit zero-valued
  fields, so when ``prompt_token_count`` is present an absent ``cached_content_token_count`` /
  ``candidates_token_count`` / ``thoughts_token_count`` is 0.
* Normalized (relays and gateways that convert Anthropic usage to an OpenAI-like shape, case
  BR-25, https://github.com/BerriAI/litellm/issues/9812): ``prompt_tokens`` plus
  ``cached_read_tokens`` (read) and ``cache_creation_tokens`` (write, TTL not reported);
  detected by those two field names (before OpenAI, whose ``prompt_tokens`` it shares).
  ``prompt_tokens`` *includes* both unless ``prompt_tokens_includes_cache`` is ``false``, so
  uncached = prompt - read - write (subtracting only the reads bills the writes twice).

* LangChain ``UsageMetadata`` (``AIMessage.usage_metadata``,
  https://reference.langchain.com/python/langchain-core/messages/ai/UsageMetadata):
  ``input_tokens`` is the *sum of all input token types* (reads and writes inside it);
  ``input_token_details.cache_read`` / ``cache_creation`` are parts of it (langchain-anthropic
  adds ``ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``), and
  ``output_token_details.reasoning``. Detected by ``input_token_details`` /
  ``output_token_details``, or by a number ``cache_read`` / ``cache_creation`` at the top level
  next to ``input_tokens``/``output_tokens`` (the flattened shape of case BR-30's
  ``cumulative_summed`` stream). uncached = input - read - write; an absent ``cache_read`` is
  unknown.

Unmapped cache counts are never dropped silently: a non-zero count in the usage object whose
path names a cache (``cache`` in a key, e.g. ``prompt_details.cache_hits``) that the detected
format does not read gives the flag ``unknown_cache_field:PATH`` (the tracker reports it as a
``usage_anomaly``; ``promptcache report`` lists it).

Errors: :class:`promptcache._errors.InvalidRequestError` (path ``"usage"``) for an object that
carries no recognisable usage.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from promptcache._errors import InvalidRequestError
from promptcache._times import parse_timestamp
from promptcache.usage.record import MAX_TOKENS, UsageRecord

__all__ = [
    "CACHE_WRITE_FIELDS",
    "INCOMPLETE_ANTHROPIC_FLAG",
    "PROVIDERS",
    "StreamUsage",
    "detect_provider",
    "merge_cumulative",
    "parse_stream",
    "parse_usage",
]

Raw = dict[str, Any]  # raw counters: provider field name -> int | None (plus a few strings)

#: Wire formats :func:`parse_usage` understands (``provider=`` values).
PROVIDERS = ("anthropic", "openai", "openai-responses", "vllm", "deepseek", "bedrock", "gemini",
             "normalized", "langchain")

#: Per wire format, the usage field that reports cache writes (the record's ``cache_write``),
#: so a report can name the field a record lacks. Formats without a write category
#: (``deepseek``, ``gemini``) are absent. Sources: hosted-api-rules.md 1.8 (Anthropic), 2.4
#: (OpenAI chat and Responses), 3 (Bedrock); the normalized and LangChain shapes as above.
CACHE_WRITE_FIELDS: dict[str, str] = {
    "anthropic": "cache_creation_input_tokens",
    "openai": "prompt_tokens_details.cache_write_tokens",
    "vllm": "prompt_tokens_details.cache_write_tokens",
    "openai-responses": "input_tokens_details.cache_write_tokens",
    "bedrock": "cacheWriteInputTokens",
    "normalized": "cache_creation_tokens",
    "langchain": "input_token_details.cache_creation",
}

#: Flag of an Anthropic stream record without a ``message_delta`` (cut short): output unknown.
INCOMPLETE_ANTHROPIC_FLAG = "stream_incomplete:no message_delta (output unknown)"

# Raw keys that are not counters (never max-merged, last non-None wins).
_META_KEYS = frozenset({"service_tier", "inference_geo", "model", "request_id", "_split_ttls", "_prompt_exclusive",
                        "_unknown_cache"})


# ---------------------------------------------------------------------------- generic helpers


#: Top-level fields of an SDK response that :func:`_locate` reads besides ``usage``.
_RESPONSE_META_FIELDS = ("type", "object", "model", "id", "service_tier")


def _to_dict(obj: Any) -> dict[str, Any]:
    """SDK object (pydantic) or mapping -> plain dict; anything else -> InvalidRequestError."""
    return _to_dict_shaped(obj)[0]


def _to_dict_shaped(obj: Any) -> tuple[dict[str, Any], _Shape | None]:
    """:func:`_to_dict`, plus the shape of its ``usage`` (see :func:`_plain`) when that was
    read from an SDK usage object without ``model_dump`` (else None)."""
    if isinstance(obj, Mapping):
        return dict(obj), None
    usage = getattr(obj, "usage", None)
    if usage is not None and callable(getattr(usage, "model_dump", None)):
        # An SDK response: only its usage and the few fields _locate reads are dumped (a long
        # answer's content blocks would cost more to dump than everything else here). The
        # fields are read from the instance dict: a pydantic getattr of a field the model lacks
        # raises and catches an AttributeError inside pydantic's __getattr__.
        fields = getattr(obj, "__dict__", None)
        extra = getattr(obj, "__pydantic_extra__", None)
        if isinstance(fields, dict) and hasattr(type(obj), "__pydantic_fields__"):
            # a pydantic model: declared fields in __dict__, undeclared ones (extra="allow",
            # e.g. a service_tier the SDK version does not declare) in __pydantic_extra__
            fields = {**extra, **fields} if isinstance(extra, dict) and extra else fields
        else:  # anything else (a wrapper that forwards attributes): ask it
            fields = {key: getattr(obj, key, None) for key in _RESPONSE_META_FIELDS}
        out: dict[str, Any] = {}
        for key in _RESPONSE_META_FIELDS:
            value = fields.get(key)
            if isinstance(value, str):
                out[key] = value
        plain = _plain(usage)
        if plain is not None:  # the dict model_dump would give, read directly
            out["usage"] = plain[0]
            return out, plain[1]
        dumped = usage.model_dump(warnings=False)
        if isinstance(dumped, dict):
            out["usage"] = dumped
            return out, None
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        result = dump(warnings=False)
        if isinstance(result, dict):
            return result, None
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        result = to_dict()
        if isinstance(result, dict):
            return result, None
    raise InvalidRequestError("usage", f"cannot read usage from a {type(obj).__name__}")


#: The shape of a usage dict read by :func:`_plain`: the model class, then (field, shape) for
#: each field that held a nested model. Within one shape the format mappers look up the same
#: paths, so the cache fields they leave unread are known once per shape (:func:`_map`).
_Shape = tuple[Any, ...]


class _PlainSpec:
    """How :func:`_plain` reads one pydantic class: its field names in order, those whose
    annotation names no model class (scalars), and the others with the model classes their
    annotation allows (a nested value of another class is left to model_dump)."""

    __slots__ = ("names", "nested", "scalars")

    def __init__(self, names: tuple[str, ...], scalars: tuple[str, ...],
                 nested: tuple[tuple[str, frozenset[type]], ...]) -> None:
        self.names, self.scalars, self.nested = names, scalars, nested


#: Per pydantic class: its :class:`_PlainSpec`, or None when the class does not dump as a
#: plain copy of its fields (custom serialisers of the class or of a field, computed or
#: excluded fields, aliases used for dumping, an overridden model_dump).
_PLAIN_FIELDS: dict[type, _PlainSpec | None] = {}
#: The value types :func:`_plain` copies as they are.
_SCALARS = frozenset({int, str, type(None)})
_UNKNOWN: Any = object()


def _model_classes(annotation: Any) -> frozenset[type]:
    """The pydantic model classes named anywhere in a field annotation."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return frozenset({annotation})
    found: frozenset[type] = frozenset()
    for arg in typing.get_args(annotation):
        found |= _model_classes(arg)
    return found


def _custom_serialization(schema: Any) -> bool:
    """Whether a pydantic core schema (nested dicts and lists) sets a serialiser anywhere."""
    if isinstance(schema, Mapping):
        return "serialization" in schema or any(
            _custom_serialization(v) for v in schema.values())
    if isinstance(schema, list | tuple):
        return any(_custom_serialization(v) for v in schema)
    return False


def _plain_fields(cls: type) -> _PlainSpec | None:
    """The :class:`_PlainSpec` of ``cls`` (worked out once per class), None if not plain."""
    if cls in _PLAIN_FIELDS:
        return _PLAIN_FIELDS[cls]
    spec: _PlainSpec | None = None
    fields = getattr(cls, "__pydantic_fields__", None)
    decorators = getattr(cls, "__pydantic_decorators__", None)
    config = getattr(cls, "model_config", None) or {}
    try:
        schema = getattr(cls, "__pydantic_core_schema__", None)
        if not isinstance(schema, dict) and issubclass(cls, BaseModel):
            # not built yet (defer_build=True, as the SDKs' models, which they make with
            # model_construct): a placeholder that cannot tell a serialiser (review 16). Built
            # here, as model_dump would build it.
            cls.model_rebuild()
            schema = getattr(cls, "__pydantic_core_schema__", None)
        # still not a schema: not plain (left to model_dump)
        custom = not isinstance(schema, dict) or _custom_serialization(schema)
    except Exception:  # a schema that cannot be built or read: leave the class to model_dump
        custom = True
    if (not custom and isinstance(fields, dict) and issubclass(cls, BaseModel)
            and cls.model_dump is BaseModel.model_dump
            and not getattr(cls, "__pydantic_root_model__", False)
            and decorators is not None and not decorators.field_serializers
            and not decorators.model_serializers
            and not getattr(cls, "__pydantic_computed_fields__", None)
            and not config.get("serialize_by_alias")
            and all(not f.exclude and not getattr(f, "exclude_if", None)
                    and f.serialization_alias in (None, name) for name, f in fields.items())):
        kinds = {name: _model_classes(f.annotation) for name, f in fields.items()}
        spec = _PlainSpec(tuple(kinds), tuple(name for name, m in kinds.items() if not m),
                          tuple((name, m) for name, m in kinds.items() if m))
    if len(_PLAIN_FIELDS) < 1024:
        _PLAIN_FIELDS[cls] = spec
    return spec


def _plain(model: Any) -> tuple[dict[str, Any], _Shape] | None:
    """``model.model_dump(warnings=False)`` of an SDK usage object, and its shape, read
    straight from its fields. Only for a plain model (:func:`_plain_fields`) without extra
    (undeclared) fields whose every value is None, an exact int or str, or a nested model of
    a class its field declares that is itself read so; else None (the caller dumps it)."""
    spec = _PLAIN_FIELDS.get(type(model), _UNKNOWN)
    if spec is _UNKNOWN:
        spec = _plain_fields(type(model))
    if spec is None or getattr(model, "__pydantic_extra__", None):
        return None
    data = model.__dict__
    # exactly the declared fields, in their order (model_dump's), every scalar one None, an
    # exact int or an exact str
    if tuple(data) != spec.names or not _SCALARS.issuperset(
            map(type, map(data.__getitem__, spec.scalars))):
        return None
    out = dict(data)
    shape: list[Any] = [type(model)]
    for name, classes in spec.nested:
        value = out[name]
        if value is None:
            continue
        if type(value) not in classes:
            return None
        sub = _plain(value)
        if sub is None:
            return None
        out[name] = sub[0]
        shape.append((name, sub[1]))
    return out, tuple(shape)


def _sub(d: Mapping[str, Any] | None, *keys: str) -> Any:
    """``d[k1][k2]...`` with ``None`` for any missing level."""
    cur: Any = d
    for key in keys:
        if cur.__class__ is not dict and not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


#: Floats above this are not exact integers (a double has a 53-bit mantissa): ``1e30`` is not
#: the count a logger wrote, ``int(1e30)`` is 1000000000000000019884624838657.
_FLOAT_EXACT = 2**53


def _int(value: Any, field: str) -> int | None:
    """A token count from a usage field (None stays None).

    Raises:
        InvalidRequestError: (path ``usage.FIELD``) not a number, not whole, negative, a
            float too large to be an exact integer, or over
            :data:`~promptcache.usage.record.MAX_TOKENS` (an implausible count: a logging or
            relay bug, never summed into a total).
    """
    if value is None:
        return None
    if value.__class__ is int and 0 <= value <= MAX_TOKENS:  # the common case, as below
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequestError(f"usage.{field}", f"expected a token count, got {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise InvalidRequestError(f"usage.{field}", f"expected a whole token count, got {value!r}")
    if value < 0:
        raise InvalidRequestError(f"usage.{field}", f"negative token count {value!r}")
    if isinstance(value, float) and value > _FLOAT_EXACT:
        raise InvalidRequestError(
            f"usage.{field}", f"usage.{field} = {value!r}: a float beyond the exact-integer "
            "range (2**53), not a token count any response reports")
    if value > MAX_TOKENS:
        raise InvalidRequestError(
            f"usage.{field}", f"usage.{field} = {value!r}: implausible token count (over "
            f"{MAX_TOKENS:,}, far beyond any model's context window: a logging or relay bug?)")
    return int(value)


def _first(d: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in d and d[key] is not None:
            return d[key]
    return None


# ---------------------------------------------------------------------------- Anthropic


def _map_usage_anthropic(u: Mapping[str, Any]) -> Raw:
    split = u.get("cache_creation")
    raw: Raw = {
        "input_tokens": _int(u.get("input_tokens"), "input_tokens"),
        "cache_read_input_tokens": _int(u.get("cache_read_input_tokens"), "cache_read_input_tokens"),
        "cache_creation_input_tokens": _int(
            u.get("cache_creation_input_tokens"), "cache_creation_input_tokens"
        ),
        "ephemeral_5m_input_tokens": _int(
            _sub(split, "ephemeral_5m_input_tokens"), "cache_creation.ephemeral_5m_input_tokens"
        ),
        "ephemeral_1h_input_tokens": _int(
            _sub(split, "ephemeral_1h_input_tokens"), "cache_creation.ephemeral_1h_input_tokens"
        ),
        "output_tokens": _int(u.get("output_tokens"), "output_tokens"),
        "thinking_tokens": _int(
            _sub(u, "output_tokens_details", "thinking_tokens"), "output_tokens_details"
        ),
        "service_tier": u.get("service_tier"),
        # where the request ran ("us": 1.1x on every token category for Claude 4.6+)
        "inference_geo": _text(u.get("inference_geo")),
    }
    return raw


def _text(value: Any) -> str | None:
    """A non-empty string, else None (a meta field that is not text is not read)."""
    return value if isinstance(value, str) and value else None


def _write_split(raw: Raw, total_w: int | None, flags: list[str]
                 ) -> tuple[int | None, int | None, int | None]:
    """(cache write, of which 5m, of which 1h) from a total and Anthropic's
    ``ephemeral_5m/1h_input_tokens`` split: a missing total is the split's sum; a split that
    does not add up to the total is dropped and flagged ``cache_write_split_mismatch``."""
    w5, w1 = raw.get("ephemeral_5m_input_tokens"), raw.get("ephemeral_1h_input_tokens")
    if w5 is None and w1 is None:
        return total_w, None, None
    split_sum = (w5 or 0) + (w1 or 0)
    if total_w is None:
        total_w = split_sum
    if split_sum != total_w:
        flags.append("cache_write_split_mismatch")
        return total_w, None, None
    return total_w, w5 or 0, w1 or 0


def _build_anthropic(raw: Raw) -> dict[str, Any]:
    flags: list[str] = []
    total_w, w5, w1 = _write_split(raw, raw.get("cache_creation_input_tokens"), flags)
    return {
        "uncached_input": raw.get("input_tokens"),
        "cache_read": raw.get("cache_read_input_tokens"),
        "cache_write": total_w,
        "cache_write_5m": w5,
        "cache_write_1h": w1,
        "output": raw.get("output_tokens"),
        "reasoning": raw.get("thinking_tokens"),
        "service_tier": raw.get("service_tier"),
        "inference_geo": raw.get("inference_geo"),
        "flags": flags,
    }


# ---------------------------------------------------------------------------- OpenAI chat / vLLM


def _map_usage_openai(u: Mapping[str, Any]) -> Raw:
    details = u.get("prompt_tokens_details")
    return {
        "prompt_tokens": _int(u.get("prompt_tokens"), "prompt_tokens"),
        "completion_tokens": _int(u.get("completion_tokens"), "completion_tokens"),
        "cached_tokens": _int(_sub(details, "cached_tokens"), "prompt_tokens_details.cached_tokens"),
        "cache_write_tokens": _int(
            _sub(details, "cache_write_tokens"), "prompt_tokens_details.cache_write_tokens"
        ),
        "reasoning_tokens": _int(
            _sub(u, "completion_tokens_details", "reasoning_tokens"),
            "completion_tokens_details.reasoning_tokens",
        ),
    }


def _split_inclusive(
    total: int | None, read: int | None, write: int | None, flags: list[str]
) -> int | None:
    """Uncached part of an inclusive total; clamps at 0 and flags when the parts exceed it (the
    record then caps the read and the writes at the total: ``UsageRecord._clamp_parts``)."""
    if total is None or read is None:
        return None
    uncached = total - read - (write or 0)
    if uncached < 0:
        flags.append("input_parts_exceed_total")
        return 0
    return uncached


def _build_openai(raw: Raw) -> dict[str, Any]:
    flags: list[str] = []
    read, write = raw.get("cached_tokens"), raw.get("cache_write_tokens")
    return {
        "uncached_input": _split_inclusive(raw.get("prompt_tokens"), read, write, flags),
        "cache_read": read,
        "cache_write": write,
        # prompt_cache_options.ttl: "30m" is the default and only documented value (GPT-5.6+).
        "cache_write_ttl": "30m" if write else None,
        "input_total": raw.get("prompt_tokens"),
        "output": raw.get("completion_tokens"),
        "reasoning": raw.get("reasoning_tokens"),
        "service_tier": raw.get("service_tier"),
        "flags": flags,
    }


# ---------------------------------------------------------------------------- OpenAI Responses


def _map_usage_openai_responses(u: Mapping[str, Any]) -> Raw:
    details = u.get("input_tokens_details")
    ttl_details = _sub(details, "cache_write_tokens_details")
    return {
        "input_tokens": _int(u.get("input_tokens"), "input_tokens"),
        "output_tokens": _int(u.get("output_tokens"), "output_tokens"),
        "cached_tokens": _int(_sub(details, "cached_tokens"), "input_tokens_details.cached_tokens"),
        "cache_write_tokens": _int(
            _sub(details, "cache_write_tokens"), "input_tokens_details.cache_write_tokens"
        ),
        "ttl_30m_tokens": _int(_sub(ttl_details, "ttl_30m_tokens"), "ttl_30m_tokens"),
        "ttl_12h_tokens": _int(_sub(ttl_details, "ttl_12h_tokens"), "ttl_12h_tokens"),
        "reasoning_tokens": _int(
            _sub(u, "output_tokens_details", "reasoning_tokens"),
            "output_tokens_details.reasoning_tokens",
        ),
    }


def _build_openai_responses(raw: Raw) -> dict[str, Any]:
    flags: list[str] = []
    read, write = raw.get("cached_tokens"), raw.get("cache_write_tokens")
    ttl: str | None = None
    if write:
        t30, t12 = raw.get("ttl_30m_tokens") or 0, raw.get("ttl_12h_tokens") or 0
        ttl = None if t12 and t30 else "12h" if t12 else "30m"  # mixed TTLs: no single ttl
    return {
        "uncached_input": _split_inclusive(raw.get("input_tokens"), read, write, flags),
        "cache_read": read,
        "cache_write": write,
        "cache_write_ttl": ttl,
        "input_total": raw.get("input_tokens"),
        "output": raw.get("output_tokens"),
        "reasoning": raw.get("reasoning_tokens"),
        "service_tier": raw.get("service_tier"),
        "flags": flags,
    }


# ---------------------------------------------------------------------------- DeepSeek


def _map_usage_deepseek(u: Mapping[str, Any]) -> Raw:
    return {
        "prompt_tokens": _int(u.get("prompt_tokens"), "prompt_tokens"),
        "prompt_cache_hit_tokens": _int(u.get("prompt_cache_hit_tokens"), "prompt_cache_hit_tokens"),
        "prompt_cache_miss_tokens": _int(
            u.get("prompt_cache_miss_tokens"), "prompt_cache_miss_tokens"
        ),
        "completion_tokens": _int(u.get("completion_tokens"), "completion_tokens"),
        "reasoning_tokens": _int(
            _sub(u, "completion_tokens_details", "reasoning_tokens"),
            "completion_tokens_details.reasoning_tokens",
        ),
    }


def _build_deepseek(raw: Raw) -> dict[str, Any]:
    flags: list[str] = []
    hit, miss, prompt = (
        raw.get("prompt_cache_hit_tokens"),
        raw.get("prompt_cache_miss_tokens"),
        raw.get("prompt_tokens"),
    )
    if miss is None and prompt is not None and hit is not None:
        miss = _split_inclusive(prompt, hit, None, flags)
    if prompt is None and hit is not None and miss is not None:
        prompt = hit + miss
    if prompt is not None and hit is not None and miss is not None and hit + miss != prompt:
        flags.append("input_parts_exceed_total" if hit + miss > prompt else "input_parts_short")
    return {
        "uncached_input": miss,
        "cache_read": hit,
        "input_total": prompt,
        "output": raw.get("completion_tokens"),
        "reasoning": raw.get("reasoning_tokens"),
        "flags": flags,
    }


# ---------------------------------------------------------------------------- Bedrock Converse


def _map_usage_bedrock(u: Mapping[str, Any]) -> Raw:
    raw: Raw = {
        "inputTokens": _int(u.get("inputTokens"), "inputTokens"),
        "outputTokens": _int(u.get("outputTokens"), "outputTokens"),
        "cacheReadInputTokens": _int(u.get("cacheReadInputTokens"), "cacheReadInputTokens"),
        "cacheWriteInputTokens": _int(u.get("cacheWriteInputTokens"), "cacheWriteInputTokens"),
        "cacheWrite5m": None,
        "cacheWrite1h": None,
    }
    details = u.get("cacheDetails")
    if isinstance(details, list) and details:
        w5 = w1 = 0
        for i, item in enumerate(details):
            ttl = _sub(item, "ttl")
            n = _int(_sub(item, "inputTokens"), f"cacheDetails[{i}].inputTokens") or 0
            if ttl == "5m":
                w5 += n
            elif ttl == "1h":
                w1 += n
            else:
                raise InvalidRequestError(f"usage.cacheDetails[{i}].ttl", f"unknown TTL {ttl!r}")
        raw["cacheWrite5m"], raw["cacheWrite1h"] = w5, w1
    return raw


def _build_bedrock(raw: Raw) -> dict[str, Any]:
    flags: list[str] = []
    total_w = raw.get("cacheWriteInputTokens")
    w5, w1 = raw.get("cacheWrite5m"), raw.get("cacheWrite1h")
    if w5 is not None and w1 is not None:
        if total_w is None:
            total_w = w5 + w1
        elif w5 + w1 != total_w:
            flags.append("cache_write_split_mismatch")
            w5 = w1 = None
    return {
        "uncached_input": raw.get("inputTokens"),
        "cache_read": raw.get("cacheReadInputTokens"),
        "cache_write": total_w,
        "cache_write_5m": w5,
        "cache_write_1h": w1,
        "output": raw.get("outputTokens"),
        "flags": flags,
    }


# ---------------------------------------------------------------------------- Gemini


def _map_usage_gemini(u: Mapping[str, Any]) -> Raw:
    def field(snake: str) -> int | None:
        camel = snake.split("_")[0] + "".join(p.title() for p in snake.split("_")[1:])
        return _int(_first(u, snake, camel), snake)

    raw: Raw = {
        "prompt_token_count": field("prompt_token_count"),
        "cached_content_token_count": field("cached_content_token_count"),
        "candidates_token_count": field("candidates_token_count"),
        "thoughts_token_count": field("thoughts_token_count"),
        "tool_use_prompt_token_count": field("tool_use_prompt_token_count"),
    }
    if raw["prompt_token_count"] is not None:  # proto3 JSON omits zero-valued counters
        for key in ("cached_content_token_count", "candidates_token_count", "thoughts_token_count",
                    "tool_use_prompt_token_count"):
            if raw[key] is None:
                raw[key] = 0
    return raw


def _build_gemini(raw: Raw) -> dict[str, Any]:
    flags: list[str] = []
    prompt = raw.get("prompt_token_count")
    tool_prompt = raw.get("tool_use_prompt_token_count") or 0
    total = None if prompt is None else prompt + tool_prompt
    read = raw.get("cached_content_token_count")
    cand, thoughts = raw.get("candidates_token_count"), raw.get("thoughts_token_count")
    return {
        "uncached_input": _split_inclusive(total, read, None, flags),
        "cache_read": read,
        "input_total": total,
        "output": None if cand is None else cand + (thoughts or 0),
        "reasoning": thoughts,
        "flags": flags,
    }


# ---------------------------------------------------------------------------- normalized (relays)


def _map_usage_normalized(u: Mapping[str, Any]) -> Raw:
    includes = u.get("prompt_tokens_includes_cache")
    if includes is not None and not isinstance(includes, bool):
        raise InvalidRequestError(
            "usage.prompt_tokens_includes_cache", f"expected true or false, got {includes!r}"
        )
    return {
        "prompt_tokens": _int(u.get("prompt_tokens"), "prompt_tokens"),
        "cached_read_tokens": _int(u.get("cached_read_tokens"), "cached_read_tokens"),
        "cache_creation_tokens": _int(u.get("cache_creation_tokens"), "cache_creation_tokens"),
        "completion_tokens": _int(u.get("completion_tokens"), "completion_tokens"),
        "reasoning_tokens": _int(
            _sub(u, "completion_tokens_details", "reasoning_tokens"),
            "completion_tokens_details.reasoning_tokens",
        ),
        # a flag, not a counter: False (exclusive) must survive merging, so it is kept as text
        "_prompt_exclusive": "yes" if includes is False else None,
    }


def _build_normalized(raw: Raw) -> dict[str, Any]:
    flags: list[str] = []
    prompt = raw.get("prompt_tokens")
    read, write = raw.get("cached_read_tokens"), raw.get("cache_creation_tokens")
    if raw.get("_prompt_exclusive") == "yes":
        uncached = prompt
        total = (
            prompt + read + write
            if prompt is not None and read is not None and write is not None else None
        )
    else:
        uncached = _split_inclusive(prompt, read, write, flags)
        total = prompt
    return {
        "uncached_input": uncached,
        "cache_read": read,
        "cache_write": write,
        "input_total": total,
        "output": raw.get("completion_tokens"),
        "reasoning": raw.get("reasoning_tokens"),
        "flags": flags,
    }


# ---------------------------------------------------------------------------- LangChain


def _map_usage_langchain(u: Mapping[str, Any]) -> Raw:
    details = u.get("input_token_details")
    return {
        "input_tokens": _int(u.get("input_tokens"), "input_tokens"),
        "output_tokens": _int(u.get("output_tokens"), "output_tokens"),
        # documented place: input_token_details; flattened to the top level by some callbacks
        # and by the LangChain JS stream of case BR-30 (cumulative_summed)
        "cache_read": _int(_first_of(_sub(details, "cache_read"), u.get("cache_read")),
                           "input_token_details.cache_read"),
        "cache_creation": _int(_first_of(_sub(details, "cache_creation"),
                                         _number_or_none(u.get("cache_creation"))),
                               "input_token_details.cache_creation"),
        # langchain-anthropic adds Anthropic's TTL split to input_token_details
        "ephemeral_5m_input_tokens": _int(_sub(details, "ephemeral_5m_input_tokens"),
                                          "input_token_details.ephemeral_5m_input_tokens"),
        "ephemeral_1h_input_tokens": _int(_sub(details, "ephemeral_1h_input_tokens"),
                                          "input_token_details.ephemeral_1h_input_tokens"),
        "reasoning": _int(_sub(u, "output_token_details", "reasoning"),
                          "output_token_details.reasoning"),
    }


def _first_of(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _number_or_none(value: Any) -> Any:
    """A top-level ``cache_creation`` that is an object is Anthropic's TTL split, not a count."""
    return None if isinstance(value, Mapping) else value


def _build_langchain(raw: Raw) -> dict[str, Any]:
    flags: list[str] = []
    read = raw.get("cache_read")
    write, w5, w1 = _write_split(raw, raw.get("cache_creation"), flags)
    return {
        # input_tokens is the sum of all input token types: reads and writes are inside it
        "uncached_input": _split_inclusive(raw.get("input_tokens"), read, write, flags),
        "cache_read": read,
        "cache_write": write,
        "cache_write_5m": w5,
        "cache_write_1h": w1,
        "input_total": raw.get("input_tokens"),
        "output": raw.get("output_tokens"),
        "reasoning": raw.get("reasoning"),
        "flags": flags,
    }


# ---------------------------------------------------------------------------- dispatch

_Mapper = Callable[[Mapping[str, Any]], Raw]
_Builder = Callable[[Raw], dict[str, Any]]

_FORMATS: dict[str, tuple[_Mapper, _Builder]] = {
    "anthropic": (_map_usage_anthropic, _build_anthropic),
    "openai": (_map_usage_openai, _build_openai),
    "vllm": (_map_usage_openai, _build_openai),
    "openai-responses": (_map_usage_openai_responses, _build_openai_responses),
    "deepseek": (_map_usage_deepseek, _build_deepseek),
    "bedrock": (_map_usage_bedrock, _build_bedrock),
    "gemini": (_map_usage_gemini, _build_gemini),
    "normalized": (_map_usage_normalized, _build_normalized),
    "langchain": (_map_usage_langchain, _build_langchain),
}


class _KeyProbe(Mapping[str, Any]):
    """An empty mapping that records every key looked up in it."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __getitem__(self, key: str) -> Any:
        self.asked.append(key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


class _Ones(Mapping[str, Any]):
    """A mapping in which every key holds the count 1 (a probe for nested counter objects)."""

    def __getitem__(self, key: str) -> Any:
        return 1

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


_COUNT, _NESTED = "count", "nested"


def _counter_fields(mapper: _Mapper) -> dict[str, frozenset[str]]:
    """The top-level usage fields that carry counters for ``mapper``, each with its kind:
    ``_COUNT`` (a number) or ``_NESTED`` (an object of counts, e.g. Anthropic's
    ``cache_creation``). Derived from the mapper itself: each field it looks up is tried alone,
    as 1 and as an object whose every field is 1, and is a counter field when a raw counter (not
    a meta key) comes out set. Meta and flag fields (``service_tier``,
    ``prompt_tokens_includes_cache``) and Bedrock's ``cacheDetails`` list are not."""
    probe = _KeyProbe()
    mapper(probe)
    fields: dict[str, frozenset[str]] = {}
    for key in dict.fromkeys(probe.asked):
        for kind, value in ((_COUNT, 1), (_NESTED, _Ones())):
            try:
                raw = mapper({key: value})
            except InvalidRequestError:
                continue
            if any(v is not None for k, v in raw.items() if k not in _META_KEYS):
                fields[key] = frozenset({kind})
                break
    return fields


#: Per wire format: its counter fields (see :func:`_counter_fields`).
_COUNTER_FIELDS: dict[str, dict[str, frozenset[str]]] = {
    fmt: _counter_fields(mapper) for fmt, (mapper, _) in _FORMATS.items()
}
#: The counter fields of every format (a field's kinds merged).
_ANY_COUNTER_FIELDS: dict[str, frozenset[str]] = {}
for _fields in _COUNTER_FIELDS.values():
    for _key, _kinds in _fields.items():
        _ANY_COUNTER_FIELDS[_key] = _ANY_COUNTER_FIELDS.get(_key, frozenset()) | _kinds
del _fields, _key, _kinds


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _usage_kind(u: Mapping[str, Any]) -> str | None:
    """Guess the wire format of a bare usage mapping from its field names."""
    keys = set(u)
    if keys & {"prompt_cache_hit_tokens", "prompt_cache_miss_tokens"}:
        return "deepseek"
    if keys & {"inputTokens", "cacheReadInputTokens", "cacheWriteInputTokens", "cacheDetails"}:
        return "bedrock"
    if keys & {"prompt_token_count", "promptTokenCount", "cached_content_token_count",
               "cachedContentTokenCount", "candidates_token_count", "candidatesTokenCount"}:
        return "gemini"
    if keys & {"cached_read_tokens", "cache_creation_tokens"}:
        return "normalized"
    if "prompt_tokens" in keys or "prompt_tokens_details" in keys:
        return "openai"
    if keys & {"input_token_details", "output_token_details"} or (
        # flattened: a *number* cache_read / cache_creation (Anthropic's cache_creation is the
        # TTL-split object) next to input/output_tokens, and no Anthropic cache field
        any(_is_number(u.get(k)) for k in ("cache_read", "cache_creation"))
        and keys & {"input_tokens", "output_tokens"}
        and not keys & {"cache_read_input_tokens", "cache_creation_input_tokens",
                        "provider", "uncached_input"}  # the last two: a (broken) record line
    ):
        # LangChain's UsageMetadata (input_tokens is the inclusive total; the cache counts are
        # in input_token_details, or flattened to the top level: BR-30 cumulative_summed)
        return "langchain"
    if "input_tokens_details" in keys or (
        "output_tokens_details" in keys and _sub(u, "output_tokens_details", "reasoning_tokens")
        is not None
    ):
        return "openai-responses"
    if keys & {"input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"}:
        return "anthropic"
    return None


def batch_result_response(d: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The response inside an official batch result line, or None when ``d`` is not one: an
    OpenAI Batch output line (``{"custom_id", "response": {"status_code": 200, "body":
    {...}}}``: its ``body``) or a succeeded Anthropic Message Batches result (``{"custom_id",
    "result": {"type": "succeeded", "message": {...}}}``: its ``message``). A line with its
    own ``usage`` is not one."""
    if "usage" in d:
        return None
    body = _sub(d, "response", "body")
    if isinstance(body, Mapping) and _sub(d, "response", "status_code") is not None:
        return body
    message = _sub(d, "result", "message")
    if isinstance(message, Mapping) and _sub(d, "result", "type") == "succeeded":
        return message
    return None


#: ``service_tier`` values of a batch line's inner response that do not name its tier.
_UNNAMED_TIERS = (None, "default", "auto")


def _batch_tier(found: tuple[Mapping[str, Any] | None, dict[str, Any], str | None]
                ) -> tuple[Mapping[str, Any] | None, dict[str, Any], str | None]:
    """A batch result line's usage, its tier ``"batch"`` unless the response inside names
    another (an OpenAI Batch body carries no batch tier, and an Anthropic result may omit
    ``usage.service_tier``; a tier in the usage itself still wins, see :func:`_extract`):
    the Batch APIs bill 50 % off (hosted-api-rules.md 1.6, 2.5)."""
    usage, meta, hint = found
    if meta.get("service_tier") in _UNNAMED_TIERS:
        meta = {**meta, "service_tier": "batch"}
    return usage, meta, hint


def _locate(d: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, dict[str, Any], str | None]:
    """Find the usage mapping inside a response/event; returns (usage, meta, format hint)."""
    meta: dict[str, Any] = {}
    inner = batch_result_response(d)
    if inner is not None:
        return _batch_tier(_locate(inner))
    kind = d.get("type")
    if kind == "message_start" and isinstance(d.get("message"), Mapping):
        inner = d["message"]
        meta = {"model": inner.get("model"), "request_id": inner.get("id")}
        usage = inner.get("usage")
        return (usage if isinstance(usage, Mapping) else None), meta, "anthropic"
    if kind == "message_delta":
        usage = d.get("usage")
        return (usage if isinstance(usage, Mapping) else None), meta, "anthropic"
    if isinstance(kind, str) and kind.startswith("response.") and isinstance(
        d.get("response"), Mapping
    ):
        inner = d["response"]
        meta = {"model": inner.get("model"), "request_id": inner.get("id"),
                "service_tier": inner.get("service_tier")}
        usage = inner.get("usage")
        return (usage if isinstance(usage, Mapping) else None), meta, "openai-responses"
    if isinstance(d.get("metadata"), Mapping) and "usage" in d["metadata"]:  # Bedrock stream
        usage = d["metadata"]["usage"]
        return (usage if isinstance(usage, Mapping) else None), meta, "bedrock"
    for key in ("usage_metadata", "usageMetadata"):
        if key in d:
            usage = d[key]
            if isinstance(usage, Mapping) and ("input_tokens" in usage
                                               or "input_token_details" in usage):
                # LangChain's AIMessage.usage_metadata (Gemini's names are prompt_token_count /
                # promptTokenCount): the message's id and its response_metadata's model name
                rm = d.get("response_metadata")
                model = _first(rm, "model_name", "model") if isinstance(rm, Mapping) else None
                return usage, {"model": model, "request_id": d.get("id")}, "langchain"
            meta = {"model": _first(d, "model_version", "modelVersion"),
                    "request_id": _first(d, "response_id", "responseId")}
            return (usage if isinstance(usage, Mapping) else None), meta, "gemini"
    if "usage" in d:
        usage = d["usage"]
        hint: str | None = None
        if d.get("object") == "response":
            hint = "openai-responses"
        elif d.get("type") == "message":
            hint = "anthropic"
        meta = {"model": d.get("model"), "request_id": d.get("id")}
        if d.get("service_tier") is not None:
            meta["service_tier"] = d.get("service_tier")
        rid = _sub(d, "ResponseMetadata", "RequestId")
        if rid is not None:
            meta["request_id"] = rid
        return (usage if isinstance(usage, Mapping) else None), meta, hint
    return d, meta, None  # a bare usage mapping


def _locate_sdk(d: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """:func:`_locate` for the dict :func:`_to_dict_shaped` makes of an SDK response (a plain
    ``usage`` dict and text fields of :data:`_RESPONSE_META_FIELDS` only): the branches that
    look for other keys cannot match it."""
    kind = d.get("type")
    if kind == "message_delta":
        return d["usage"], {}, "anthropic"
    hint = ("openai-responses" if d.get("object") == "response"
            else "anthropic" if kind == "message" else None)
    meta = {"model": d.get("model"), "request_id": d.get("id")}
    if d.get("service_tier") is not None:
        meta["service_tier"] = d["service_tier"]
    return d["usage"], meta, hint


def detect_provider(obj: Any) -> str | None:
    """The wire format of a response, event or bare usage object, or ``None`` if unknown."""
    usage, _, hint = _locate(_to_dict(obj))
    return hint or (_usage_kind(usage) if usage is not None else None)


def _extract(obj: Any, provider: str | None) -> tuple[str, Raw | None, dict[str, Any]]:
    d, shape = _to_dict_shaped(obj)
    usage, meta, hint = _locate(d) if shape is None else _locate_sdk(d)
    fmt = provider or hint or (_usage_kind(usage) if usage is not None else None)
    if fmt is None:
        raise InvalidRequestError("usage", "no recognisable usage fields "
                                  f"(keys: {', '.join(sorted(d)) or 'none'})")
    if fmt not in _FORMATS:
        raise InvalidRequestError(
            "usage", f"unknown provider format {fmt!r}; expected one of {', '.join(PROVIDERS)}"
        )
    raw = None if usage is None else _map(fmt, usage, shape)
    if raw is not None and raw.get("service_tier") is None and meta.get("service_tier"):
        raw["service_tier"] = meta["service_tier"]
    return fmt, raw, {k: v for k, v in meta.items() if v is not None and k != "service_tier"}


class _Recorder(Mapping[str, Any]):
    """A read-only view of a usage mapping that records the path of every field looked up in
    it (nested mappings are returned as recorders too)."""

    def __init__(self, data: Mapping[str, Any], prefix: str, seen: set[str]) -> None:
        self._data, self._prefix, self._seen = data, prefix, seen

    def __getitem__(self, key: str) -> Any:
        value = self._data[key]
        path = f"{self._prefix}{key}"
        self._seen.add(path)
        if isinstance(value, Mapping):
            return _Recorder(value, f"{path}.", self._seen)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return repr(dict(self._data))


def _unread_cache_fields(usage: Mapping[str, Any], seen: set[str], prefix: str = ""
                         ) -> list[tuple[str, Any]]:
    """(path, value) of the non-zero counts in ``usage`` whose path names a cache (``cache`` in
    a key) and that the format's mapper never looked up: cache counts it would silently drop.
    Lists (Gemini's per-modality ``cache_tokens_details``, a breakdown of a count that is
    read) are not looked into."""
    out: list[tuple[str, Any]] = []
    for key, value in usage.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.extend(_unread_cache_fields(value, seen, f"{path}."))
        elif _is_number(value) and value and path not in seen and "cache" in path.lower():
            out.append((path, value))
    return out


#: Formats whose mapper looks a field up only with ``get`` and :func:`_sub`: the paths it
#: reads in a usage dict depend on the dict's shape only, not on its values.
_SHAPE_FORMATS = frozenset({"anthropic", "openai", "vllm", "openai-responses"})

#: Per (format, shape): the paths (and their keys) of the fields that name a cache and that
#: the format's mapper does not read: the only fields :func:`_unread_cache_fields` can report.
_UNREAD_CANDIDATES: dict[tuple[str, _Shape], tuple[tuple[str, tuple[str, ...]], ...]] = {}


def _leaf_paths(usage: Mapping[str, Any], prefix: str = "", keys: tuple[str, ...] = ()
                ) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(path, keys) of every field of ``usage`` that is not a mapping, in walk order."""
    for key, value in usage.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _leaf_paths(value, f"{path}.", (*keys, key))
        else:
            yield path, (*keys, key)


def _map(fmt: str, usage: Mapping[str, Any], shape: _Shape | None = None) -> Raw:
    """``fmt``'s mapper on ``usage``; cache-related counts it does not read are listed under
    the raw key ``_unknown_cache`` (they become ``unknown_cache_field:PATH`` flags).

    ``shape``: that of a plain usage dict made by :func:`_plain` (values None, int, str or
    such dicts). The mapper then runs on the dict itself, without recording its lookups: the
    fields it leaves unread are known per shape once the recorded run of the first dict of
    that shape has listed them."""
    key = None if shape is None or fmt not in _SHAPE_FORMATS else (fmt, shape)
    candidates = None if key is None else _UNREAD_CANDIDATES.get(key)
    if candidates is not None:
        raw = _FORMATS[fmt][0](usage)
        if not candidates:
            return raw
        found: list[tuple[str, Any]] = []
        for path, keys in candidates:
            value: Any = usage
            for k in keys:
                value = value[k]
            if _is_number(value) and value:
                found.append((path, value))
    else:
        seen: set[str] = set()
        raw = _FORMATS[fmt][0](_Recorder(usage, "", seen))
        found = _unread_cache_fields(usage, seen)
        if key is not None and len(_UNREAD_CANDIDATES) < 1024:
            _UNREAD_CANDIDATES[key] = tuple(
                (path, keys) for path, keys in _leaf_paths(usage)
                if path not in seen and "cache" in path.lower())
    if not found:
        return raw
    # a count equal to one the mapper read is a relay's copy of it under another name (LiteLLM
    # adds cache_read_input_tokens beside OpenAI's cached_tokens, DeepSeek relays add
    # prompt_tokens_details.cached_tokens beside prompt_cache_hit_tokens): nothing is dropped
    mapped = {v for k, v in raw.items() if "cache" in k and isinstance(v, int)}
    unread = [path for path, value in found if value not in mapped]
    if unread:
        raw["_unknown_cache"] = ",".join(unread)
    return raw


def _unknown_cache_flags(raws: Iterable[Raw]) -> list[str]:
    paths = (p for raw in raws if raw.get("_unknown_cache")
             for p in str(raw["_unknown_cache"]).split(","))
    return [f"unknown_cache_field:{p}" for p in dict.fromkeys(paths)]


def _make_record(fmt: str, raw: Raw, meta: Mapping[str, Any], extra_flags: Iterable[str],
                 overrides: Mapping[str, Any]) -> UsageRecord:
    built = _FORMATS[fmt][1](raw)
    flags: list[str] = built.pop("flags", [])
    if raw.get("_unknown_cache"):
        flags = [*flags, *_unknown_cache_flags([raw])]
    if extra_flags:
        flags = [*flags, *extra_flags]
    fields: dict[str, Any] = {"provider": fmt, **built, **meta}
    for key, value in overrides.items():
        if key == "flags":
            flags.extend(value)
        elif value is not None:
            fields[key] = value
    fields["flags"] = tuple(dict.fromkeys(flags)) if flags else ()
    try:
        return UsageRecord.model_validate(fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = err["loc"][0] if err["loc"] else None
        if isinstance(loc, str) and loc in overrides:  # a bad keyword argument, not the usage
            value = overrides[loc]
            if loc in _TIME_FIELDS and isinstance(value, int | float) and err[
                    "type"] == "value_error":  # a number out of range (NaN, past 9999)
                reason = str(err["msg"]).removeprefix("Value error, ")
            elif loc in _TIME_FIELDS:
                reason = (f"expected seconds since the epoch (a number) or a datetime, got "
                          f"{value!r}")
            else:
                reason = err["msg"]
            raise InvalidRequestError(loc, reason) from exc
        raise


#: Record fields that hold a time (seconds since the epoch).
_TIME_FIELDS = ("start", "first_token", "end")


def _epoch_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` with datetimes in :data:`_TIME_FIELDS` turned into seconds since the epoch
    (a naive datetime is UTC, as the catalog's ``at=`` takes it)."""
    out = dict(fields)
    for key in _TIME_FIELDS:
        value = out.get(key)
        if isinstance(value, datetime):
            out[key] = parse_timestamp(value)
    return out


def parse_usage(obj: Any, *, provider: str | None = None, **fields: Any) -> UsageRecord:
    """Parse one non-streamed response (or its bare usage object) into a record.

    Args:
        obj: an SDK object (``anthropic.types.Message``/``Usage``, ``openai`` ``ChatCompletion``/
            ``CompletionUsage``/``Response``/``ResponseUsage``, a ``response.completed`` or
            ``message_start`` event) or the equivalent dict, a DeepSeek, Bedrock Converse or
            Gemini response dict (or its usage part).
        provider: force a wire format (one of :data:`PROVIDERS`); needed for ``"vllm"``, whose
            shape is OpenAI's. Detected from field names when omitted.
        **fields: record fields to set or override (``label``, ``session``, ``start``,
            ``first_token``, ``end``, ``model``, ``request_id``, ``prefix_hash``, ``cacheable``
            ...). ``start`` / ``first_token`` / ``end`` are seconds since the epoch (float);
            a ``datetime`` is accepted and converted (a naive one is taken as UTC).

    Returns:
        The record; counts the response does not report are ``None``.

    Raises:
        InvalidRequestError: no usage in ``obj``, an unknown ``provider``, a bad count, or a
            bad value in ``fields`` (e.g. ``start="yesterday"``; the error's ``path`` names
            the field).
    """
    fields = _epoch_fields(fields)
    fmt, raw, meta = _extract(obj, provider)
    if raw is None:
        raise InvalidRequestError("usage", "the response carries no usage object")
    if all(v is None for k, v in raw.items() if k not in _META_KEYS):
        raise InvalidRequestError(
            "usage", f"none of the {fmt} usage fields is present (wrong provider=?)"
        )
    return _make_record(fmt, raw, meta, (), fields)


# ---------------------------------------------------------------------------- streaming


def merge_cumulative(
    snapshots: Iterable[Mapping[str, Any]],
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Merge the usage counters of one response's events (case BR-30's merge rule).

    Per field, the result is the maximum over the snapshots that report it (``None`` where none
    does); counters within one response never decrease, so a field whose value goes down is
    named in the second return value. Cumulative counters are never summed.

    Args:
        snapshots: flat mappings field -> int | None (non-int values: last non-None wins).

    Returns:
        (merged counters, names of fields that decreased at some event).
    """
    merged: dict[str, Any] = {}
    last: dict[str, int] = {}
    decreased: list[str] = []
    for snap in snapshots:
        for key, value in snap.items():
            if value is None:
                continue
            if key in _META_KEYS or not isinstance(value, int) or isinstance(value, bool):
                merged[key] = value
                continue
            if key in last and value < last[key] and key not in decreased:
                decreased.append(key)
            last[key] = value
            prev = merged.get(key)
            merged[key] = value if prev is None else max(prev, value)
    return merged, tuple(decreased)


def _holds_counters(usage: Mapping[str, Any], fields: Mapping[str, frozenset[str]],
                    bare: bool) -> bool:
    """Whether a usage mapping that names no wire format holds a counter field of ``fields``
    (with a value other than None); such a mapping is read as a snapshot of the stream's format.

    A ``bare`` mapping (the event itself, not an event's ``usage``) must also be shaped like
    usage: each of its counter fields a number (a nested split: an object). Otherwise it is
    another kind of event (``{"type": "x", "output_tokens": [1, 2]}``) and is ignored. An
    explicit ``usage`` object is read as usage, so a bad count in it raises, as in a typed event.
    Content events (no counter field) stop here, before any mapping work."""
    found = False
    for key in usage:
        kinds = fields.get(key)
        if kinds is None:
            continue
        value = usage[key]
        if value is None:
            continue
        if bare and not (
            (_COUNT in kinds and isinstance(value, int | float) and not isinstance(value, bool))
            or (_NESTED in kinds and isinstance(value, Mapping))
        ):
            return False
        found = True
    return found


class StreamUsage:
    """Accumulates the usage of one streamed response, event by event.

    Feed it every event/chunk in order (SDK objects or dicts); events without usage are ignored.
    Handles Anthropic ``message_start``/``message_delta``, OpenAI chat chunks (the
    ``include_usage`` chunk; servers that repeat cumulative usage on every chunk too), Responses
    ``response.completed``/``response.incomplete``, Bedrock ``metadata`` and Gemini chunks.

    Example::

        acc = StreamUsage(label="chat")
        for event in client.messages.create(..., stream=True):
            acc.feed(event)
        record = acc.record()
    """

    def __init__(self, provider: str | None = None, **fields: Any) -> None:
        self._provider = provider
        self._fields = _epoch_fields(fields)
        self._format: str | None = provider
        self._snapshots: list[Raw] = []
        self._meta: dict[str, Any] = {}
        # events whose usage names no wire format, seen before an event fixed the format
        self._pending: list[dict[str, Any]] = []
        # Anthropic: message_start seen; a message_delta with usage seen (the output count)
        self._message_start = self._message_delta = False

    def feed(self, event: Any) -> None:
        """Take one event or chunk (SDK object or dict).

        A usage mapping without a field that identifies its wire format (an untyped
        ``{"usage": {"output_tokens": 16}}`` after an Anthropic-shaped first event) is a
        snapshot of the stream's format once that is known (``provider=`` or an earlier event),
        provided it holds a counter of that format; one that comes before the format is known
        is kept and read once a later event fixes it. Counter fields are those the format
        mappers read (:data:`_COUNTER_FIELDS`). An event whose only "usage" is the event itself
        is read so only when its counter fields hold numbers. Events without usage are ignored.

        Raises:
            InvalidRequestError: the event mixes wire formats with earlier events or has a bad
                count.
        """
        d = _to_dict(event)
        usage, meta, hint = _locate(d)
        if d.get("type") == "message_start":
            self._message_start = True
        elif d.get("type") == "message_delta" and usage is not None:
            self._message_delta = True
        if usage is None and not meta:
            return
        if usage is not None and hint is None and _usage_kind(usage) is None:
            # no format-identifying field: a snapshot of the stream's format if it holds one of
            # that format's counters (the merge below takes the maximum, never a sum: BR-30)
            fields = (_ANY_COUNTER_FIELDS if self._format is None
                      else _COUNTER_FIELDS.get(self._format, _ANY_COUNTER_FIELDS))
            if _holds_counters(usage, fields, bare=usage is d):
                if self._format is None:
                    self._pending.append(d)
                elif self._add_untyped(d):
                    return
            usage = None
        if usage is None:
            for key, value in meta.items():
                if value is not None:
                    self._meta.setdefault(key, value)
            return
        fmt, raw, meta = _extract(d, self._format)
        for key, value in meta.items():
            self._meta.setdefault(key, value)
        if self._format is None:
            self._format = fmt
            pending, self._pending = self._pending, []
            for earlier in pending:  # untyped usage seen before the format was known
                self._add_untyped(earlier)
        if raw is not None:
            self._snapshots.append(raw)

    def _add_untyped(self, d: dict[str, Any]) -> bool:
        """Add untyped event ``d`` read as the stream's (known) format; False when it holds
        none of that format's counters (then nothing is added)."""
        _, raw, meta = _extract(d, self._format)
        if raw is None or all(v is None for k, v in raw.items() if k not in _META_KEYS):
            return False
        for key, value in meta.items():
            self._meta.setdefault(key, value)
        self._snapshots.append(raw)
        return True

    @property
    def seen_usage(self) -> bool:
        """True once an event carried usage."""
        return bool(self._snapshots)

    def record(self) -> UsageRecord:
        """The merged record of the response.

        An Anthropic stream with a ``message_start`` but no ``message_delta`` carrying usage
        (cut short) has an unknown output (``None``; the start's ``output_tokens`` is a
        placeholder) and the flag :data:`INCOMPLETE_ANTHROPIC_FLAG`.

        Raises:
            InvalidRequestError: no event carried usage (for OpenAI chat: the request did not set
                ``stream_options={"include_usage": True}`` or the stream was cut short).
        """
        if self._format is None and self._pending:
            keys = sorted({str(k) for d in self._pending for k in (_locate(d)[0] or {})})
            raise InvalidRequestError(
                "usage", "no streamed event names its usage's wire format (usage keys: "
                f"{', '.join(keys)}); pass provider="
            )
        if not self._snapshots or self._format is None:
            raise InvalidRequestError(
                "usage", "no streamed event carried usage (OpenAI chat needs "
                "stream_options={'include_usage': True}; the stream may have been cut short)"
            )
        merged, decreased = merge_cumulative(self._snapshots)
        merged.pop("_unknown_cache", None)  # flagged from every event below, not the last
        flags = [*_unknown_cache_flags(self._snapshots),
                 *(f"usage_decreased:{name}" for name in decreased)]
        if self._format == "anthropic" and self._message_start and not self._message_delta:
            # message_start's output_tokens is a placeholder (1): the count arrives on the
            # cumulative message_delta.usage (hosted-api-rules.md 1.8), which never came
            merged["output_tokens"] = merged["thinking_tokens"] = None
            flags.append(INCOMPLETE_ANTHROPIC_FLAG)
        return _make_record(self._format, merged, self._meta, flags, self._fields)


def parse_stream(events: Iterable[Any], *, provider: str | None = None, **fields: Any) -> UsageRecord:
    """Parse every event of one streamed response into one record (see :class:`StreamUsage`).

    ``provider`` and ``**fields`` as in :func:`parse_usage` (times: seconds since the epoch or
    datetimes).

    Raises:
        InvalidRequestError: no event carried usage, a bad count or a bad value in ``fields``.
    """
    acc = StreamUsage(provider, **fields)
    for event in events:
        acc.feed(event)
    return acc.record()
