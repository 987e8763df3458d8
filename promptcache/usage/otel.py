"""OpenTelemetry GenAI usage attributes for a usage record (no dependency on opentelemetry).

Attribute names follow the OpenTelemetry GenAI semantic conventions (incubating):

* ``gen_ai.usage.input_tokens``: **all** input tokens. The conventions say the cache-read and
  cache-creation counts "SHOULD be included in gen_ai.usage.input_tokens", so we emit
  :attr:`UsageRecord.total_input`, not Anthropic's exclusive ``input_tokens`` (mixing the two is
  the Langfuse #12306 / OpenLLMetry #3647 double-count).
* ``gen_ai.usage.output_tokens``
* ``gen_ai.usage.cache_read.input_tokens``
* ``gen_ai.usage.cache_creation.input_tokens``
* ``gen_ai.provider.name`` and ``gen_ai.response.model`` when known.

Sources: https://github.com/open-telemetry/semantic-conventions/issues/2094 and the generated
constants ``ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS`` /
``ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS`` in @opentelemetry/semantic-conventions
(https://open-telemetry.github.io/opentelemetry-js/). Unknown counts are left out, never sent
as 0. The older underscore spellings (``gen_ai.usage.cache_read_input_tokens``) are deprecated
and not emitted.
"""

from __future__ import annotations

from typing import Any, Protocol

from promptcache.usage.record import UsageRecord

__all__ = [
    "CACHE_CREATION_INPUT_TOKENS",
    "CACHE_READ_INPUT_TOKENS",
    "INPUT_TOKENS",
    "OUTPUT_TOKENS",
    "otel_attributes",
    "set_span_usage",
]

INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
PROVIDER_NAME = "gen_ai.provider.name"
RESPONSE_MODEL = "gen_ai.response.model"

# our wire-format names -> gen_ai.provider.name well-known values
_PROVIDER_NAMES = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-responses": "openai",
    "deepseek": "deepseek",
    "bedrock": "aws.bedrock",
    "gemini": "gcp.gemini",
}


class _SpanLike(Protocol):
    def set_attribute(self, key: str, value: Any) -> Any: ...


def otel_attributes(record: UsageRecord) -> dict[str, str | int]:
    """The GenAI usage attributes of ``record``; counts that are unknown are omitted.

    Returns:
        attribute name -> value (tokens as ints, names as strings).
    """
    attrs: dict[str, str | int] = {}
    provider = _PROVIDER_NAMES.get(record.provider)
    if provider is not None:
        attrs[PROVIDER_NAME] = provider
    if record.model is not None:
        attrs[RESPONSE_MODEL] = record.model
    for key, value in (
        (INPUT_TOKENS, record.total_input),
        (OUTPUT_TOKENS, record.output),
        (CACHE_READ_INPUT_TOKENS, record.cache_read),
        (CACHE_CREATION_INPUT_TOKENS, record.writes),
    ):
        if value is not None:
            attrs[key] = value
    return attrs


def set_span_usage(span: _SpanLike, record: UsageRecord) -> dict[str, str | int]:
    """Set :func:`otel_attributes` on an OpenTelemetry span (any object with ``set_attribute``).

    Returns:
        the attributes that were set.
    """
    attrs = otel_attributes(record)
    for key, value in attrs.items():
        span.set_attribute(key, value)
    return attrs
