"""promptcache: make prompt caching on hosted LLM APIs work, and keep it working.

This is the public API; everything not listed in ``__all__`` is private. Names are imported
lazily so ``import promptcache`` stays cheap (the local backend's torch is only imported when
you use it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from promptcache._errors import (
    CatalogError as CatalogError,
)
from promptcache._errors import (
    InputError as InputError,
)
from promptcache._errors import (
    InvalidRequestError as InvalidRequestError,
)
from promptcache._errors import (
    OrderingError as OrderingError,
)
from promptcache._errors import (
    PlanError as PlanError,
)
from promptcache._errors import (
    PoolExhaustedError as PoolExhaustedError,
)
from promptcache._errors import (
    PromptCacheError as PromptCacheError,
)
from promptcache._errors import (
    PromptCacheLintError as PromptCacheLintError,
)
from promptcache._errors import (
    UnknownModelError as UnknownModelError,
)
from promptcache._errors import (
    VolatileValueError as VolatileValueError,
)

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "render": "promptcache.prefix",
    "PrefixView": "promptcache.prefix",
    "Segment": "promptcache.prefix",
    "Breakpoint": "promptcache.prefix",
    "count_tokens": "promptcache.tokens",
    "TokenCount": "promptcache.tokens",
    "get_policy": "promptcache.catalog",
    "get_prices": "promptcache.catalog",
    "CachePolicy": "promptcache.catalog",
    "PromptBuilder": "promptcache.builder",
    "Volatile": "promptcache.builder",
    "Image": "promptcache.builder",
    "Message": "promptcache.builder",
    "Thinking": "promptcache.builder",
    "ToolCall": "promptcache.builder",
    "ToolResult": "promptcache.builder",
    "plan_breakpoints": "promptcache.planner",
    "BreakpointPlan": "promptcache.planner",
    "auto_cache": "promptcache.planner",
    "UsageRecord": "promptcache.usage",
    "UsageTracker": "promptcache.usage",
    "parse_usage": "promptcache.usage",
    "breakeven": "promptcache.usage",
    "ttl_policy": "promptcache.usage",
    "diff": "promptcache.diff",
    "explain": "promptcache.diff",
    "lint_request": "promptcache.lint",
    "wrap": "promptcache.sdk",
    "warm_then_fanout": "promptcache.sdk",
    "keepalive": "promptcache.sdk",
    "assert_cache_stable": "promptcache.sdk",
    "sent_requests": "promptcache.sdk",
    "tracker_of": "promptcache.sdk",
    "call_options": "promptcache.sdk",
    "awarm_then_fanout": "promptcache.sdk",
    "KeepAlive": "promptcache.sdk",
    "PromptCacheWarning": "promptcache.sdk",
}

__all__ = [
    "Breakpoint",
    "BreakpointPlan",
    "CachePolicy",
    "CatalogError",
    "Image",
    "InputError",
    "InvalidRequestError",
    "KeepAlive",
    "Message",
    "OrderingError",
    "PlanError",
    "PoolExhaustedError",
    "PrefixView",
    "PromptBuilder",
    "PromptCacheError",
    "PromptCacheLintError",
    "PromptCacheWarning",
    "Segment",
    "Thinking",
    "TokenCount",
    "ToolCall",
    "ToolResult",
    "UnknownModelError",
    "UsageRecord",
    "UsageTracker",
    "Volatile",
    "VolatileValueError",
    "__version__",
    "assert_cache_stable",
    "auto_cache",
    "awarm_then_fanout",
    "breakeven",
    "call_options",
    "count_tokens",
    "diff",
    "explain",
    "get_policy",
    "get_prices",
    "keepalive",
    "lint_request",
    "parse_usage",
    "plan_breakpoints",
    "render",
    "sent_requests",
    "tracker_of",
    "ttl_policy",
    "warm_then_fanout",
    "wrap",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from promptcache.builder import Image as Image
    from promptcache.builder import Message as Message
    from promptcache.builder import PromptBuilder as PromptBuilder
    from promptcache.builder import Thinking as Thinking
    from promptcache.builder import ToolCall as ToolCall
    from promptcache.builder import ToolResult as ToolResult
    from promptcache.builder import Volatile as Volatile
    from promptcache.catalog import CachePolicy as CachePolicy
    from promptcache.catalog import get_policy as get_policy
    from promptcache.catalog import get_prices as get_prices
    from promptcache.diff import diff as diff
    from promptcache.diff import explain as explain
    from promptcache.lint import lint_request as lint_request
    from promptcache.planner import BreakpointPlan as BreakpointPlan
    from promptcache.planner import auto_cache as auto_cache
    from promptcache.planner import plan_breakpoints as plan_breakpoints
    from promptcache.prefix import Breakpoint as Breakpoint
    from promptcache.prefix import PrefixView as PrefixView
    from promptcache.prefix import Segment as Segment
    from promptcache.prefix import render as render
    from promptcache.sdk import KeepAlive as KeepAlive
    from promptcache.sdk import PromptCacheWarning as PromptCacheWarning
    from promptcache.sdk import assert_cache_stable as assert_cache_stable
    from promptcache.sdk import awarm_then_fanout as awarm_then_fanout
    from promptcache.sdk import call_options as call_options
    from promptcache.sdk import keepalive as keepalive
    from promptcache.sdk import sent_requests as sent_requests
    from promptcache.sdk import tracker_of as tracker_of
    from promptcache.sdk import warm_then_fanout as warm_then_fanout
    from promptcache.sdk import wrap as wrap
    from promptcache.tokens import TokenCount as TokenCount
    from promptcache.tokens import count_tokens as count_tokens
    from promptcache.usage import UsageRecord as UsageRecord
    from promptcache.usage import UsageTracker as UsageTracker
    from promptcache.usage import breakeven as breakeven
    from promptcache.usage import parse_usage as parse_usage
    from promptcache.usage import ttl_policy as ttl_policy


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'promptcache' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
