"""SDK wrapper around the official anthropic and openai clients.

- :func:`wrap`: observe a client (usage to a tracker, auto-cache, run-time lint, live diff).
- :func:`warm_then_fanout` / :func:`awarm_then_fanout`: send one request, wait for its first
  token, then the rest concurrently (they read the prefix the first one wrote).
- :func:`keepalive` / :class:`KeepAlive`: bounded, priced cache keep-alive pings with a stop
  handle.
- :func:`assert_cache_stable`: test helper that fails with the diff's explanation when a
  request breaks the prefix the previous request of its session cached;
  :func:`sent_requests` lists what a wrapped client sent.
- :func:`call_options`: per-call label / session / auto_cache / lint for a block of code.
- :func:`tracker_of`, :func:`unwrap`, :func:`is_wrapped`: introspection.

The pytest plugin (:mod:`promptcache.sdk.pytest_plugin`, entry point ``promptcache``) gives
in-process local-backend clients as fixtures.
"""

from __future__ import annotations

from promptcache.sdk._fanout import awarm_then_fanout, warm_then_fanout
from promptcache.sdk._keepalive import KeepAlive, keepalive
from promptcache.sdk._observe import PromptCacheWarning, SentRequest, call_options
from promptcache.sdk._testing import assert_cache_stable, sent_requests
from promptcache.sdk._wrap import is_wrapped, tracker_of, unwrap, wrap

__all__ = [
    "KeepAlive",
    "PromptCacheWarning",
    "SentRequest",
    "assert_cache_stable",
    "awarm_then_fanout",
    "call_options",
    "is_wrapped",
    "keepalive",
    "sent_requests",
    "tracker_of",
    "unwrap",
    "warm_then_fanout",
    "wrap",
]
