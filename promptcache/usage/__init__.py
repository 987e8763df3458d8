"""Usage tracking: parse every provider's usage, aggregate hit rate and cost, find break-even.

- :class:`UsageRecord`: one normalised record (exclusive buckets; unknown is ``None``).
- :func:`parse_usage`, :func:`parse_stream`, :class:`StreamUsage`: Anthropic, OpenAI chat and
  Responses, vLLM, DeepSeek, Bedrock Converse, Gemini; streamed counters merged by maximum.
- :func:`price_record`, :func:`explicit_prices`, :class:`Cost`: Decimal USD with TTL-split writes,
  OpenAI write rates, prompt-length tiers and batch discount.
- :func:`classify_openai`, :func:`classify_anthropic`: one response's cache outcome
  (full / partial hit, below the model's minimum, ...); :func:`diagnose_hit_pattern`: routing
  (bimodal hits on one prefix) versus content misses.
- :class:`UsageTracker`: thread/asyncio-safe aggregation by label, model, session; zero-hit
  alarm, collapse classification, prefix regression, concurrent cold writes.
- :class:`JsonlSink`, :class:`MemorySink`, :func:`read_jsonl`: append-only logs.
- :func:`otel_attributes`, :func:`set_span_usage`: OpenTelemetry GenAI usage attributes.
- :func:`breakeven`, :func:`ttl_policy`: when caching pays, and the cheapest TTL policy.
"""

from __future__ import annotations

from promptcache.usage.billing import Cost, explicit_prices, price_record
from promptcache.usage.breakeven import BreakEven, PolicyOption, TtlPolicy, breakeven, ttl_policy
from promptcache.usage.classify import (
    AnthropicHit,
    HitPattern,
    OpenAIHit,
    Regression,
    check_append_only,
    classify_anthropic,
    classify_collapse,
    classify_openai,
    diagnose_hit_pattern,
    predicted_openai_cached,
    ttl_seconds,
)
from promptcache.usage.otel import otel_attributes, set_span_usage
from promptcache.usage.parse import (
    PROVIDERS,
    StreamUsage,
    detect_provider,
    merge_cumulative,
    parse_stream,
    parse_usage,
)
from promptcache.usage.record import UsageRecord
from promptcache.usage.sinks import JsonlSink, MemorySink, Sink, iter_jsonl, read_jsonl
from promptcache.usage.tracker import (
    ColdWriteGroup,
    UsageEvent,
    UsageSummary,
    UsageTracker,
    ZeroHitWarning,
)

__all__ = [
    "PROVIDERS",
    "AnthropicHit",
    "BreakEven",
    "ColdWriteGroup",
    "Cost",
    "HitPattern",
    "JsonlSink",
    "MemorySink",
    "OpenAIHit",
    "PolicyOption",
    "Regression",
    "Sink",
    "StreamUsage",
    "TtlPolicy",
    "UsageEvent",
    "UsageRecord",
    "UsageSummary",
    "UsageTracker",
    "ZeroHitWarning",
    "breakeven",
    "check_append_only",
    "classify_anthropic",
    "classify_collapse",
    "classify_openai",
    "detect_provider",
    "diagnose_hit_pattern",
    "explicit_prices",
    "iter_jsonl",
    "merge_cumulative",
    "otel_attributes",
    "parse_stream",
    "parse_usage",
    "predicted_openai_cached",
    "price_record",
    "read_jsonl",
    "set_span_usage",
    "ttl_policy",
    "ttl_seconds",
]
