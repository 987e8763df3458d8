"""Official SDK clients wired to an in-process local backend (no network, no port).

::

    from promptcache.local.testing import LocalBackend

    with LocalBackend() as backend:                  # seeded random Llama, manual clock
        client = backend.anthropic()                 # a real anthropic.Anthropic
        msg = client.messages.create(model="claude-sonnet-4-5", max_tokens=8, system=[...],
                                     messages=[...])
        msg.usage.cache_creation_input_tokens
        backend.clock.advance(301)                   # let a 5m entry expire
        backend.openai().chat.completions.create(...)  # a real openai.OpenAI

Sync clients go through ``starlette.testclient.TestClient`` (an ``httpx2.Client`` that calls the
ASGI app directly); async clients through ``httpx2.AsyncClient(transport=httpx2.ASGITransport(app))``.
(anthropic 2.x, openai 3.x and starlette 1.x use ``httpx2``, the successor of ``httpx``; the SDKs
reject plain ``httpx`` clients.)
Clients are built with ``max_retries=0`` so a 529/503 surfaces at once (override with
``max_retries=``); everything else is the SDKs' own behaviour.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx2
from starlette.testclient import TestClient

from promptcache.local.accounting import ManualClock
from promptcache.local.app import (
    BackendService,
    EngineLike,
    ServerOptions,
    build_engine,
    create_app,
)

if TYPE_CHECKING:
    import anthropic as anthropic_sdk
    import openai as openai_sdk
    from fastapi import FastAPI

    from promptcache.local.engine import Engine
    from promptcache.local.model import ModelRunner

__all__ = ["BASE_URL", "SMALL_MODEL", "LocalBackend", "shared_runner"]

BASE_URL = "http://promptcache.local"
"""Host the in-process clients address (never resolved: requests go straight to the app)."""


SMALL_MODEL: dict[str, int] = {"hidden_size": 64, "layers": 2, "heads": 4, "kv_heads": 2}
"""A tiny random Llama shape for fast tests (``LocalBackend(**SMALL_MODEL)``)."""

_RUNNERS: dict[tuple[Any, ...], ModelRunner] = {}
_RUNNERS_LOCK = threading.Lock()


def shared_runner(
    model: str = "random", *, seed: int = 0, device: str | None = "cpu", **overrides: Any
) -> ModelRunner:
    """A :class:`ModelRunner` built once per process and configuration.

    Model weights are read-only at inference, so every :class:`LocalBackend` (each with its own
    engine, block pool and ledgers) can share one runner; building a random Llama with an
    o200k_base vocabulary takes seconds, a fresh engine on a built runner milliseconds.
    """
    from promptcache.local.model import ModelRunner

    key = (model, seed, device, tuple(sorted(overrides.items())))
    with _RUNNERS_LOCK:
        runner = _RUNNERS.get(key)
        if runner is None:
            runner = ModelRunner(model, seed=seed, device=device, **overrides)
            _RUNNERS[key] = runner
        return runner


class LocalBackend:
    """An in-process local backend and factories for the official clients.

    Args:
        engine: an engine to serve (default: :func:`promptcache.local.app.build_engine` with
            ``model``, ``pool_mb``, ``block_size``, ``mode``, ``device`` and ``seed``).
        clock: the TTL clock, a :class:`ManualClock` (default: a new one at 0), so tests
            control expiry with ``backend.clock.advance(seconds)``.
        options: :class:`ServerOptions` (body limit, vLLM-style usage without details, ...).
        api_key: the key the clients send; it is the cache tenant (other keys see no hits).
        model, pool_mb, block_size, mode, device, seed, **runner_overrides: engine settings.

    Attributes:
        app: the FastAPI app. engine: the engine. clock: the clock. service: the
        :class:`BackendService` (ledgers, metrics).
    """

    def __init__(
        self,
        engine: EngineLike | Engine | None = None,
        *,
        clock: ManualClock | None = None,
        options: ServerOptions | None = None,
        api_key: str = "local-test-key",
        model: str = "random",
        pool_mb: float = 64.0,
        block_size: int = 16,
        mode: str = "exact",
        device: str | None = "cpu",
        seed: int = 0,
        **runner_overrides: Any,
    ) -> None:
        self.clock: ManualClock = clock if clock is not None else ManualClock()
        self.engine = (
            engine
            if engine is not None
            else build_engine(
                pool_mb=pool_mb,
                block_size=block_size,
                mode=mode,
                runner=shared_runner(model, seed=seed, device=device, **runner_overrides),
            )
        )
        self.app: FastAPI = create_app(self.engine, clock=self.clock, options=options)
        self.service: BackendService = self.app.state.service
        self.api_key = api_key
        self._sync = TestClient(self.app, base_url=BASE_URL, raise_server_exceptions=False)
        self._async: list[httpx2.AsyncClient] = []

    # ------------------------------------------------------------------ http clients
    def http_client(self) -> httpx2.Client:
        """The sync ``httpx2.Client`` bound to the app (a starlette ``TestClient``)."""
        return self._sync

    def async_http_client(self) -> httpx2.AsyncClient:
        """A new ``httpx2.AsyncClient`` bound to the app through ``httpx2.ASGITransport``."""
        client = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=self.app, raise_app_exceptions=False),
            base_url=BASE_URL,
        )
        self._async.append(client)
        return client

    # ------------------------------------------------------------------ SDK clients
    def anthropic(self, **kwargs: Any) -> anthropic_sdk.Anthropic:
        """A real ``anthropic.Anthropic`` client talking to this backend."""
        import anthropic

        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("api_key", self.api_key)
        return anthropic.Anthropic(base_url=BASE_URL, http_client=self._sync, **kwargs)

    def async_anthropic(self, **kwargs: Any) -> anthropic_sdk.AsyncAnthropic:
        """A real ``anthropic.AsyncAnthropic`` client talking to this backend."""
        import anthropic

        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("api_key", self.api_key)
        return anthropic.AsyncAnthropic(
            base_url=BASE_URL, http_client=self.async_http_client(), **kwargs
        )

    def openai(self, **kwargs: Any) -> openai_sdk.OpenAI:
        """A real ``openai.OpenAI`` client talking to this backend."""
        import openai

        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("api_key", self.api_key)
        return openai.OpenAI(base_url=f"{BASE_URL}/v1", http_client=self._sync, **kwargs)

    def async_openai(self, **kwargs: Any) -> openai_sdk.AsyncOpenAI:
        """A real ``openai.AsyncOpenAI`` client talking to this backend."""
        import openai

        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("api_key", self.api_key)
        return openai.AsyncOpenAI(
            base_url=f"{BASE_URL}/v1",
            http_client=self.async_http_client(),
            **kwargs,
        )

    # ------------------------------------------------------------------ introspection
    def metrics(self) -> dict[str, float]:
        """Request/usage counters and engine metrics (see :meth:`BackendService.metrics`)."""
        return self.service.metrics()

    def metrics_text(self) -> str:
        """What ``GET /metrics`` returns (Prometheus text)."""
        return self.service.metrics_text()

    def close(self, timeout: float = 10.0) -> None:
        """Stop in-flight generations and close the sync HTTP client (async clients are closed
        by their owners' ``aclose``).

        A stream broken off early (or left open) may still be decoding in a worker thread;
        its generation is cancelled and waited for, up to ``timeout`` seconds in all
        (:meth:`BackendService.close`), so the process does not abort at exit with torch still
        running (``terminate called without an active exception``). Idempotent.
        """
        try:
            self._sync.close()  # aborts requests whose responses are still open
        finally:
            self.service.close(timeout)

    def __enter__(self) -> LocalBackend:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
