"""pytest plugin (entry point ``promptcache`` in the ``pytest11`` group): real SDK clients on an
in-process local backend, for users' own test suites.

Fixtures:

- ``promptcache_backend`` (session): a :class:`promptcache.local.testing.LocalBackend` with a
  small seeded random model (``mode="fast"``); its ``clock`` is a manual clock
  (``backend.clock.advance(301)`` expires 5-minute entries). Override
  ``promptcache_backend_options`` (session scope, a dict of ``LocalBackend`` keyword
  arguments) in your ``conftest.py`` to change the model or pool.
- ``promptcache_anthropic`` / ``promptcache_async_anthropic`` / ``promptcache_openai`` /
  ``promptcache_async_openai``: official clients talking to that backend, unwrapped (wrap them
  yourself). Each test gets its own API key, which the backend uses as the cache tenant, so
  tests never see each other's cache entries.
- ``promptcache_tracker``: a fresh :class:`promptcache.usage.UsageTracker`.

The backend needs the ``local`` extra (torch, transformers, fastapi); without it the fixtures
skip the test with the install hint. Importing this module imports nothing heavy: pytest loads
it in every session of a project that has promptcache installed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import anthropic
    import openai

    from promptcache.local.testing import LocalBackend
    from promptcache.usage import UsageTracker

__all__ = [
    "promptcache_anthropic",
    "promptcache_async_anthropic",
    "promptcache_async_openai",
    "promptcache_backend",
    "promptcache_backend_options",
    "promptcache_openai",
    "promptcache_tracker",
]

_INSTALL_HINT = "the local backend needs the local extra: pip install 'promptcache[local]'"


@pytest.fixture(scope="session")
def promptcache_backend_options() -> dict[str, Any]:
    """Keyword arguments of the session's ``LocalBackend`` (override in conftest.py)."""
    return {"mode": "fast", "hidden_size": 64, "layers": 2, "heads": 4, "kv_heads": 2,
            "pool_mb": 32.0, "seed": 0}


@pytest.fixture(scope="session")
def promptcache_backend(promptcache_backend_options: dict[str, Any]) -> Iterator[LocalBackend]:
    """One in-process local backend for the test session."""
    try:
        from promptcache.local.testing import LocalBackend
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        pytest.skip(f"{_INSTALL_HINT} ({exc})")
    backend = LocalBackend(**promptcache_backend_options)
    try:
        yield backend
    finally:
        backend.close()


def _tenant_key(request: pytest.FixtureRequest) -> str:
    """A per-test API key: the backend's cache tenant, so tests share no cache entries."""
    return "pc-test-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:16]


def _base_url() -> str:
    from promptcache.local.testing import BASE_URL

    return BASE_URL


@pytest.fixture
def promptcache_anthropic(promptcache_backend: LocalBackend,
                          request: pytest.FixtureRequest) -> anthropic.Anthropic:
    """A real ``anthropic.Anthropic`` on the in-process backend (this test's own tenant)."""
    import anthropic

    return anthropic.Anthropic(api_key=_tenant_key(request), base_url=_base_url(),
                               http_client=promptcache_backend.http_client(), max_retries=0)


@pytest.fixture
def promptcache_async_anthropic(promptcache_backend: LocalBackend,
                                request: pytest.FixtureRequest) -> anthropic.AsyncAnthropic:
    """A real ``anthropic.AsyncAnthropic`` on the in-process backend (own tenant)."""
    import anthropic

    return anthropic.AsyncAnthropic(api_key=_tenant_key(request), base_url=_base_url(),
                                    http_client=promptcache_backend.async_http_client(),
                                    max_retries=0)


@pytest.fixture
def promptcache_openai(promptcache_backend: LocalBackend,
                       request: pytest.FixtureRequest) -> openai.OpenAI:
    """A real ``openai.OpenAI`` on the in-process backend (own tenant)."""
    import openai

    return openai.OpenAI(api_key=_tenant_key(request), base_url=_base_url() + "/v1",
                         http_client=promptcache_backend.http_client(), max_retries=0)


@pytest.fixture
def promptcache_async_openai(promptcache_backend: LocalBackend,
                             request: pytest.FixtureRequest) -> openai.AsyncOpenAI:
    """A real ``openai.AsyncOpenAI`` on the in-process backend (own tenant)."""
    import openai

    return openai.AsyncOpenAI(api_key=_tenant_key(request), base_url=_base_url() + "/v1",
                              http_client=promptcache_backend.async_http_client(),
                              max_retries=0)


@pytest.fixture
def promptcache_tracker() -> UsageTracker:
    """A fresh usage tracker (catalog prices)."""
    from promptcache.usage import UsageTracker

    return UsageTracker()
