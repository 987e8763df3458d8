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
}

__all__ = [
    "Breakpoint",
    "CachePolicy",
    "CatalogError",
    "InputError",
    "InvalidRequestError",
    "OrderingError",
    "PlanError",
    "PoolExhaustedError",
    "PrefixView",
    "PromptCacheError",
    "PromptCacheLintError",
    "Segment",
    "TokenCount",
    "UnknownModelError",
    "VolatileValueError",
    "__version__",
    "count_tokens",
    "get_policy",
    "get_prices",
    "render",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from promptcache.catalog import CachePolicy as CachePolicy
    from promptcache.catalog import get_policy as get_policy
    from promptcache.catalog import get_prices as get_prices
    from promptcache.prefix import Breakpoint as Breakpoint
    from promptcache.prefix import PrefixView as PrefixView
    from promptcache.prefix import Segment as Segment
    from promptcache.prefix import render as render
    from promptcache.tokens import TokenCount as TokenCount
    from promptcache.tokens import count_tokens as count_tokens


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'promptcache' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
