"""FastAPI app of the local reference backend: Anthropic- and OpenAI-shaped endpoints.

Routes (provider shapes in :mod:`promptcache.local.api_anthropic` and
:mod:`promptcache.local.api_openai`)::

    POST /v1/messages                 Anthropic Messages (stream or not)
    POST /v1/messages/count_tokens    Anthropic token counting
    POST /v1/chat/completions         OpenAI Chat Completions (stream or not)
    POST /v1/responses                OpenAI Responses (stream or not)
    GET  /v1/models[/{id}]            Anthropic shape when ``anthropic-version`` is sent, else OpenAI
    GET  /metrics                     Prometheus text exposition (plain writer, format 0.0.4)

Every request runs on one :class:`~promptcache.local.engine.Engine` (a real model behind the
block-hash prefix cache). :class:`BackendService` serialises requests with one lock that spans
the accounting decision and the generation, so the block cache cannot change between
``engine.available_prefix`` (what the accounting may report as read) and ``engine.generate``
(what is physically reused). Caches are isolated per API key and per requested model: both go
into the engine's tenant salt.

Concurrency: serialising requests must not let a queued request read an entry that a request
ahead of it writes. The Anthropic API makes an entry available only once the first response
that writes it has begun (hosted-api-rules.md 1.9; case BR-21: N parallel cold requests pay N
writes). So every Anthropic request is stamped when it arrives (:meth:`BackendService.arrival`)
and every written entry with its writer's response start (the end of its prefill, on
:attr:`BackendService.timeline`); a request that arrived before an entry was available reports
writing that prefix itself (``cache_creation``, read 0) although the block cache reuses the KV.
The OpenAI routes pass no arrival: their reference documents no such rule.

Limits: prompt tokens + ``max_tokens`` above the local model's context (its position limit)
is a 400 before anything runs (:meth:`BackendService.check_context`; the catalog records no
per-model output limit, so the local context is the bound). A non-streamed generation whose
client disconnects is cancelled too (:func:`generate_until_disconnect`), so a client timeout
frees the engine.

Shutdown: :meth:`BackendService.begin_shutdown` (``promptcache serve`` calls it as soon as
SIGTERM / Ctrl-C arrives) stops every in-flight generation at its next decode step and refuses
new ones; each request then ends with the provider's overloaded error
(:data:`SHUTDOWN_MESSAGE`): a stream with an ``error`` event (Anthropic ``event: error`` with
``overloaded_error``, OpenAI an error chunk / Responses ``error`` event) and a clean end of the
body, a request not yet answered with 529 (Anthropic) / 503 (OpenAI). The app's lifespan
shutdown then calls :meth:`BackendService.close`, which waits for the generation threads, so
the process never exits with torch still running in one.

Counting: every generation that ran is counted once, when it ends, by :class:`BackendService`
(prompt, cache read and write as the response reports them, reused / computed and generated
tokens), whether or not its response reached the client. A streamed generation whose client
disconnects is cancelled: while the request waits for its first token (engine lock, prefill) by
a disconnect watcher (:func:`first_event`), once the response exists by the response itself
(:class:`GenerationResponse`, whether or not its body was started). Decoding then stops at the
engine's next step (after at most one token when the client left before the first), and the
request is counted with the tokens generated until then, in every counter alike. The prompt of
a request whose client left while it waited is still prefilled, cached and counted.

Errors: a malformed request -> 400 in the provider's error JSON; an unknown model -> 404; an
unknown route -> 404 (405 for a wrong method) in the provider's shape
(:func:`unknown_route_response`: Anthropic's under ``/v1/messages`` or with an
``anthropic-version`` header, else OpenAI's ``Invalid URL (...)``); a
body over ``ServerOptions.max_body_bytes`` -> 413; anything unexpected -> 500 in the provider's
shape, the server keeps running. A prompt larger than the KV pool is served, not refused (the
hosted APIs never refuse a prompt that fits the context): the engine caches the blocks the pool
holds and prefills the rest uncached, so the usage reports the write and a later request reads
only what the pool kept (reported as a new write, as after an eviction). Raise ``--pool-mb`` to
cache such prompts. A :class:`~promptcache._errors.PoolExhaustedError` can then only come from
blocks pinned outside the engine; it stays a 529 ``overloaded_error`` (Anthropic) / 503 (OpenAI).

Deviation: ``prometheus_client`` is not a dependency; /metrics is written by a small plain-text
writer in the Prometheus text format.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import queue
import threading
import time
import weakref
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from promptcache._errors import InvalidRequestError, PoolExhaustedError, UnknownModelError
from promptcache.catalog import CachePolicy, get_policy, known_models
from promptcache.local.accounting import (
    CacheLedger,
    CachePlan,
    Clock,
    Instant,
    SystemClock,
    Timeline,
    anchor_automatic_prefixes,
    automatic_prefix_keys,
    commit_plan,
)
from promptcache.local.blocks import KVCacheManager
from promptcache.local.errors import (
    BackendAPIError,
    anthropic_error_body,
    new_request_id,
    openai_error_body,
)
from promptcache.local.template import TemplatedPrompt, TokenDecoder

if TYPE_CHECKING:
    from promptcache.local.engine import Engine
    from promptcache.local.model import ModelRunner

__all__ = [
    "SHUTDOWN_MESSAGE",
    "BackendService",
    "EngineLike",
    "GenerationOutcome",
    "GenerationResponse",
    "GenerationStream",
    "ServerOptions",
    "StopText",
    "UsageOf",
    "build_engine",
    "cancel_on_close",
    "create_app",
    "first_event",
    "generate_until_disconnect",
    "next_event",
    "request_id_of",
]

log = logging.getLogger(__name__)

ProviderShape = Literal["anthropic", "openai"]

SHUTDOWN_MESSAGE = "The server is shutting down; the request was stopped. Retry it."
"""Message of the 529 ``overloaded_error`` (OpenAI: 503 ``server_error``) that a request gets
when :meth:`BackendService.begin_shutdown` stops or refuses its generation."""


def _shutdown_error() -> BackendAPIError:
    """The error of a generation stopped or refused by a shutdown (both SDKs retry 529/503)."""
    return BackendAPIError(529, "overloaded_error", SHUTDOWN_MESSAGE)


class GenerationResultLike(Protocol):
    """What :meth:`Engine.generate` returns (see /work/notes/BACKEND.md)."""

    prompt_tokens: int
    reused_tokens: int
    computed_tokens: int
    output_ids: list[int]
    stop_reason: str
    ttft_s: float
    total_s: float


class EngineLike(Protocol):
    """The part of :class:`promptcache.local.engine.Engine` the API uses."""

    def generate(
        self,
        tokens: list[int],
        *,
        tenant_salt: bytes = b"",
        max_tokens: int,
        temperature: float = 0.0,
        seed: int | None = None,
        keep_tail_at: Sequence[int] = (),
        on_token: Callable[[int], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        on_prefill: Callable[[], None] | None = None,
        stop_when: Callable[[int], bool] | None = None,
    ) -> Any: ...

    def available_prefix(self, tokens: Sequence[int], *, tenant_salt: bytes = b"") -> int: ...

    @property
    def metrics(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """Knobs of the emulated API.

    Attributes:
        max_body_bytes: request bodies above this many bytes get 413 (Anthropic's Messages
            API limit is 32 MB: https://platform.claude.com/docs/en/api/overview).
        openai_prompt_tokens_details: report ``usage.prompt_tokens_details`` on Chat
            Completions; False emulates vLLM without ``--enable-prompt-tokens-details`` (the
            field is absent, so clients must treat cached tokens as unknown).
        default_max_tokens: OpenAI requests without ``max_tokens`` / ``max_output_tokens``
            generate at most this many tokens.
        model_created: ``created`` timestamp of /v1/models entries (seconds since epoch).
        openai_in_memory_idle_s: OpenAI automatic caching (before GPT-5.6) with in-memory
            retention: seconds of inactivity after which a prefix is no longer read. None
            (default): the catalog's certain bound, 1 h ("always removed within 1 h of last
            use"); e.g. 300 emulates the usual clearing ("usually cleared after 5-10 min of
            inactivity"), which the hosted API does not guarantee (hosted-api-rules.md 2.1).
            ``24h`` retention always uses the catalog's 24 h.
    """

    max_body_bytes: int = 32 * 1024 * 1024
    openai_prompt_tokens_details: bool = True
    default_max_tokens: int = 64
    model_created: int = 1_767_225_600  # 2026-01-01T00:00:00Z
    openai_in_memory_idle_s: float | None = None


@dataclass(slots=True)
class GenerationOutcome:
    """One finished generation.

    Attributes:
        prompt: the templated request.
        plan: the Anthropic / GPT-5.6+ breakpoint plan (None for OpenAI automatic caching).
        result: the engine's result (``reused_tokens`` = KV not recomputed).
        policy: the model's cache policy.
        text: the output text, cut before a matched stop sequence (:class:`StopText`).
        stop_sequence: the stop sequence that ended the output, or None.
        read_limit: the longest prefix a read may report (OpenAI automatic caching: the longest
            prefix still within its idle lifetime, :func:`automatic_live_prefix`); None: no
            limit beyond the physical reuse.
    """

    prompt: TemplatedPrompt
    plan: CachePlan | None
    result: Any
    policy: CachePolicy
    text: str = ""
    stop_sequence: str | None = None
    read_limit: int | None = None


class StopText:
    """Stop sequences matched on the decoded output text, as the hosted APIs match them.

    Feed generated ids in order; :meth:`feed` returns the text that can be shown now: text that
    could still be the start of a stop sequence is held back, and once a stop sequence appears
    nothing from its first character on is ever returned. :meth:`finish` returns what is left
    (the held text when nothing matched). When several stop sequences appear, the one that
    starts first wins (ties: the first listed). ``"".join(feed(...)) + finish()`` is the
    response text; :attr:`matched` the stop sequence that ended it (``None`` if none).

    A stop sequence is matched on text, not token ids: the model's token may merge it with a
    leading space or cut it in the middle (``" einige"`` ends with ``"nige"``).
    """

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(s for s in stops if s)
        self.matched: str | None = None
        self._decoder = TokenDecoder()
        self._text = ""
        self._sent = 0
        self._cut: int | None = None
        self._hold = max((len(s) for s in self.stops), default=1) - 1

    def feed(self, token_id: int) -> str:
        """Add one generated id; return the text that is now safe to show (maybe ``""``)."""
        if self._cut is not None:
            return ""
        self._text += self._decoder.feed(token_id)
        return self._advance(final=False)

    def hit(self, token_id: int) -> bool:
        """:meth:`feed`, then whether a stop sequence has appeared (the engine's ``stop_when``)."""
        self.feed(token_id)
        return self._cut is not None

    def finish(self) -> str:
        """The rest of the text once generation ended (flushes a partial UTF-8 character)."""
        if self._cut is None:
            self._text += self._decoder.flush()
        return self._advance(final=True)

    def _advance(self, *, final: bool) -> str:
        if self._cut is None and self.stops:
            best: tuple[int, str] | None = None
            for stop in self.stops:  # nothing before _sent can start a match (it was safe)
                at = self._text.find(stop, self._sent)
                if at >= 0 and (best is None or at < best[0]):
                    best = (at, stop)
            if best is not None:
                self._cut, self.matched = best
        if self._cut is not None:
            end = self._cut
        elif final:
            end = len(self._text)
        else:
            end = len(self._text) - self._held()
        out = self._text[self._sent : end]
        self._sent = max(self._sent, end)
        return out

    def _held(self) -> int:
        """Length of the longest suffix not yet shown that a stop sequence starts with."""
        text = self._text
        for k in range(min(self._hold, len(text) - self._sent), 0, -1):
            tail = text[-k:]
            if any(s.startswith(tail) for s in self.stops):
                return k
        return 0

    @classmethod
    def apply(cls, stops: Sequence[str], ids: Sequence[int]) -> tuple[str, str | None]:
        """``(text, matched stop sequence)`` of a whole generated id list."""
        matcher = cls(stops)
        parts = [matcher.feed(t) for t in ids]
        parts.append(matcher.finish())
        return "".join(parts), matcher.matched


Planner = Callable[[int, float], "CachePlan | None"]
"""``planner(available_tokens, now) -> plan``: decides reads and writes under the lock."""

ReadLimit = Callable[[float], "int | None"]
"""``read_limit(now) -> tokens``: the longest prefix a read may report (None: no limit), decided
under the lock at the request's start (OpenAI automatic caching's idle lifetime)."""

UsageOf = Callable[[GenerationOutcome], "tuple[int, int, int | None]"]
"""``usage_of(outcome) -> (prompt_tokens, cache_read_tokens, cache_write_tokens)``: the input-side
usage the response reports (``cache_write_tokens`` None when the shape reports no writes)."""


class GenerationStream:
    """A generation running in a worker thread (:meth:`BackendService.start_stream`).

    ``get()`` blocks for the next event: ``("plan", CachePlan | None)``, ``("token", id)`` per
    generated token, then ``("done", GenerationOutcome)`` or ``("error", exception)``.
    ``cancel()`` asks the engine to stop decoding (the client went away); the generation then
    ends at its next decode step with ``stop_reason="cancelled"`` and is counted in /metrics
    like any other (prompt, cache read/write and the tokens generated before it stopped).
    """

    def __init__(self) -> None:
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._cancel = threading.Event()

    def get(self) -> tuple[str, Any]:
        """The next event (blocking)."""
        return self.events.get()

    def cancel(self) -> None:
        """Stop decoding at the next step (idempotent; a no-op once the generation ended)."""
        self._cancel.set()


@dataclass
class _Counters:
    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(
        default_factory=lambda: defaultdict(float)
    )
    lock: threading.Lock = field(default_factory=threading.Lock)

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        with self.lock:
            self.values[(name, tuple(sorted(labels.items())))] += amount

    def inc_many(self, amounts: Mapping[str, float]) -> None:
        """Add to several unlabelled counters at once (a scrape sees all or none of them)."""
        with self.lock:
            for name, amount in amounts.items():
                self.values[(name, ())] += amount


_COUNTER_HELP = {
    "promptcache_requests_total": "Requests answered, by endpoint and HTTP status.",
    "promptcache_prompt_tokens_total": "Prompt tokens of requests that ran (aborted streams included).",
    "promptcache_cache_read_tokens_total": "Tokens reported as cache reads.",
    "promptcache_cache_write_tokens_total": "Tokens reported as cache writes (creation).",
    "promptcache_reused_tokens_total": "Prompt tokens whose KV the block cache reused.",
    "promptcache_computed_tokens_total": "Prompt tokens prefilled (KV computed).",
    "promptcache_output_tokens_total": "Generated tokens.",
    "promptcache_accounting_violations_total": "Requests whose reported cache read exceeded the physically reused tokens (must be 0).",
}


def _forget_block_of(ledger: CacheLedger) -> Callable[[bytes], None]:
    """A block-pool eviction listener that forgets ``ledger``'s entries anchored to the evicted
    block (:meth:`CacheLedger.forget_block`); it holds the ledger weakly, so an engine that
    outlives its service does not keep the ledger alive."""
    ref = weakref.ref(ledger)

    def forget(block_hash: bytes) -> None:
        target = ref()
        if target is not None:
            target.forget_block(block_hash)

    return forget


def idle_ledger_capacity(engine: Any) -> int | None:
    """How many OpenAI idle-ledger entries (:func:`automatic_live_prefix`, one per prefix on
    the automatic-caching grid) can stand for KV the engine still holds: its cache capacity
    in tokens (``prefix_cache_blocks_total`` x ``prefix_cache_block_size`` plus
    ``tail_tokens_capacity``, from ``engine.metrics``) divided by the smallest
    ``cache_step_tokens`` of the catalog's models with an idle lifetime (each entry's last
    step is KV no other entry ends with). At least 1. None when the engine does not report
    its capacity (a test double): the ledger is then bounded by its expiry sweep only.

    The bound applies to entries not anchored to a cached block (:meth:`CacheLedger.anchor`);
    anchored ones, which prompts diverging within one step can make more numerous than this,
    leave when the pool evicts their block."""
    try:
        metrics = dict(engine.metrics)
        blocks = int(metrics["prefix_cache_blocks_total"])
        block_size = int(metrics["prefix_cache_block_size"])
        tails = int(metrics.get("tail_tokens_capacity") or 0)
    except Exception:  # no capacity reported: no bound beyond the sweep
        return None
    steps = []
    for model in known_models():
        try:
            pol = get_policy(model)
        except UnknownModelError:
            continue
        if pol.idle_lifetime and pol.cache_step_tokens:
            steps.append(int(pol.cache_step_tokens))
    step = min(steps, default=1)
    return max(1, (blocks * block_size + tails) // step)


class BackendService:
    """Engine + clock + cache ledgers + metrics, shared by all routes.

    Args:
        engine: the engine (:func:`build_engine`).
        clock: TTL clock (injectable; default :class:`SystemClock`).
        options: :class:`ServerOptions`.

    Attributes:
        timeline: stamps request arrivals (:meth:`arrival`) and response starts (the end of a
            generation's prefill) on ``clock``. A ledger entry becomes available at its writer's
            response start; a request that arrived earlier does not see it and reports writing
            the prefix too (Anthropic: hosted-api-rules.md 1.9, case BR-21), even though
            requests run one at a time and the block cache reuses the KV physically.
    """

    def __init__(
        self,
        engine: EngineLike | Engine,
        *,
        clock: Clock | None = None,
        options: ServerOptions | None = None,
    ) -> None:
        self.engine: EngineLike = engine  # type: ignore[assignment]
        self.clock: Clock = clock or SystemClock()
        self.timeline = Timeline(self.clock)
        self.options = options or ServerOptions()
        self.anthropic_ledger = CacheLedger()
        self.openai_ledger = CacheLedger()
        #: OpenAI automatic caching's idle lifetimes (:func:`automatic_live_prefix`); apart
        #: from ``openai_ledger`` so that its entries gauge counts breakpoint entries only.
        #: It follows the block cache: a prefix whose KV the cache holds is anchored to its
        #: last block after each request (:meth:`_anchor_idle_prefixes`) and forgotten when
        #: the pool evicts that block (an eviction listener), never dropped before; the
        #: other entries are bounded by count (:func:`idle_ledger_capacity`, review 16).
        #: A count bound alone dropped prefixes the cache still served (session 11).
        self.openai_idle_ledger = CacheLedger(max_entries=idle_ledger_capacity(self.engine))
        manager = getattr(self.engine, "manager", None)
        self._kv_manager = manager if isinstance(manager, KVCacheManager) else None
        if self._kv_manager is not None:
            self._kv_manager.pool.add_eviction_listener(
                _forget_block_of(self.openai_idle_ledger)
            )
        self.lock = threading.Lock()
        self.counters = _Counters()
        #: in-flight generations (their cancel events) and stream worker threads, so that
        #: :meth:`close` can stop them (guarded by ``_inflight_cv``)
        self._inflight_cv = threading.Condition()
        self._inflight: set[threading.Event] = set()
        self._workers: dict[threading.Thread, GenerationStream] = {}
        #: set by :meth:`begin_shutdown` (never cleared)
        self._closing = threading.Event()

    @property
    def closing(self) -> bool:
        """True once :meth:`begin_shutdown` (or :meth:`close`) was called."""
        return self._closing.is_set()

    def begin_shutdown(self) -> None:
        """Stop every in-flight generation and refuse new ones, without waiting.

        Each generation stops at its next decode step (a prefill runs to its end) and is
        counted like a cancelled one; its request then fails with :func:`_shutdown_error`
        (529 ``overloaded_error``, OpenAI 503, message :data:`SHUTDOWN_MESSAGE`): a stream gets
        the provider's error event and ends cleanly, a non-streamed request the error status.
        A generation that reaches the engine lock afterwards is refused before its prefill.
        Non-blocking (safe on the event loop) and idempotent; :meth:`close` waits.
        """
        self._closing.set()  # before the cancels: a generation registered later sees it
        with self._inflight_cv:
            for cancel in self._inflight:
                cancel.set()
            workers = list(self._workers.values())
        for stream in workers:
            stream.cancel()

    def close(self, timeout: float = 10.0) -> bool:
        """Cancel every in-flight generation (:meth:`begin_shutdown`) and wait for it to end.

        A stream the client broke off (or never read) may still be prefilling or decoding in
        a worker thread; torch running there while the interpreter shuts down aborts the
        process (``terminate called without an active exception``, exit 134). This asks each
        generation to stop at its next decode step (it is counted like any cancelled one) and
        waits up to ``timeout`` seconds in all for them and for the stream worker threads.
        Requests made after it are refused (529 / 503, :data:`SHUTDOWN_MESSAGE`).

        Args:
            timeout: the most seconds to wait, in total (>= 0).

        Returns:
            True when nothing is left running; False (and a warning is logged) when some
            generation was still running after ``timeout`` seconds.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        me = threading.current_thread()
        self.begin_shutdown()
        with self._inflight_cv:
            workers = list(self._workers.items())
            while self._inflight and (left := deadline - time.monotonic()) > 0:
                self._inflight_cv.wait(left)
            running = len(self._inflight)
        for thread, _ in workers:
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))
        running += sum(t.is_alive() for t, _ in workers if t is not me)
        if running:
            log.warning("close: generations still running after %.1fs", timeout)
        return not running

    # ------------------------------------------------------------------ helpers
    def policy(self, model: Any, provider: ProviderShape) -> CachePolicy:
        """The catalog policy of ``model``.

        Raises:
            BackendAPIError: 400 if ``model`` is not a string, 404 if the catalog does not know
                it or it belongs to the other provider.
        """
        if not isinstance(model, str) or not model:
            raise BackendAPIError(
                400, "invalid_request_error", "model: Field required", param="model"
            )
        try:
            policy = get_policy(model)
        except UnknownModelError:
            policy = None
        if policy is None or policy.provider != provider:
            raise BackendAPIError(
                404, "not_found_error", f"model: {model}", param="model", code="model_not_found"
            )
        return policy

    @property
    def context_tokens(self) -> int | None:
        """The local model's context (its position limit, ``max_position_embeddings``: 32,768
        for the default random model, ``ModelRunner(max_positions=...)``), or None when the
        engine does not expose one (a test double)."""
        config = getattr(getattr(self.engine, "runner", None), "config", None)
        if config is None:
            return None
        get_text = getattr(config, "get_text_config", None)
        text_cfg = get_text(decoder=True) if callable(get_text) else config
        value = getattr(text_cfg, "max_position_embeddings", None)
        return int(value) if isinstance(value, int) and value > 0 else None

    def check_context(
        self, prompt_tokens: int, max_tokens: int, provider: ProviderShape, param: str,
        prompt_field: str = "messages",
    ) -> None:
        """Reject a request whose prompt plus ``max_tokens`` cannot fit the local model.

        The hosted APIs reject, up front, a ``max_tokens`` above the model's output limit and a
        prompt plus ``max_tokens`` above its context window (Anthropic: "input length and
        `max_tokens` exceed context limit: A + B > C"; OpenAI: ``context_length_exceeded``).
        The catalog records no per-model output limit with a source, so the honest bound here
        is the local model's own context (:attr:`context_tokens`), and the message says so.
        Without this check a huge ``max_tokens`` (1e9) decoded for hours: the random model never
        stops on its own.

        ``prompt_field``: what OpenAI's message calls the prompt (``"messages"`` for Chat
        Completions, ``"input"`` for Responses).

        Raises:
            BackendAPIError: 400 ``invalid_request_error`` (OpenAI ``param`` = ``param``,
                ``code`` = ``context_length_exceeded``).
        """
        limit = self.context_tokens
        if limit is None or prompt_tokens + max_tokens <= limit:
            return
        note = (
            f"(the local backend's bound is its model's context of {limit} tokens, not the "
            f"hosted model's output limit, which the catalog does not record)"
        )
        if provider == "anthropic":
            message = (
                f"input length and `max_tokens` exceed context limit: {prompt_tokens} + "
                f"{max_tokens} > {limit}, decrease input length or `max_tokens` and try again "
                f"{note}"
            )
        else:
            message = (
                f"This model's maximum context length is {limit} tokens. However, you "
                f"requested {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the "
                f"{prompt_field}, {max_tokens} in the completion). Please reduce the length of "
                f"the {prompt_field} or completion {note}."
            )
        raise BackendAPIError(
            400, "invalid_request_error", message, param=param, code="context_length_exceeded"
        )

    def arrival(self) -> Instant:
        """Stamp a request's arrival (call first thing in a route, before it waits for the
        engine): plans compare it with entries' ``available_at``."""
        return self.timeline.stamp()

    @staticmethod
    def tenant_salt(api_key: str | None, model: str) -> bytes:
        """Salt isolating caches per API key (workspace) and per model (32 bytes)."""
        return hashlib.sha256(f"{api_key or ''}\x00{model}".encode()).digest()

    # ------------------------------------------------------------------ generation
    def _run(
        self,
        prompt: TemplatedPrompt,
        policy: CachePolicy,
        *,
        tenant_salt: bytes,
        planner: Planner,
        ledger: CacheLedger | None,
        max_tokens: int,
        stop_sequences: Sequence[str],
        temperature: float,
        seed: int | None,
        usage_of: UsageOf,
        on_plan: Callable[[CachePlan | None], None] | None,
        on_token: Callable[[int], None] | None,
        should_stop: Callable[[], bool] | None,
        read_limit: ReadLimit | None = None,
    ) -> GenerationOutcome:
        with self._cancellable(should_stop) as should_stop:
            tokens = list(prompt.token_ids)
            stopper = StopText(stop_sequences)
            with self.lock:
                if self._closing.is_set():  # queued behind a generation a shutdown stopped
                    raise _shutdown_error()
                now = self.clock.now()
                available = int(self.engine.available_prefix(tokens, tenant_salt=tenant_salt))
                plan = planner(available, now)
                limit = read_limit(now) if read_limit is not None else None
                if on_plan is not None:
                    on_plan(plan)
                started: list[Instant] = []
                hooks: dict[str, Any] = {}  # passed only when set (test doubles may lack them)
                if stopper.stops:
                    hooks["stop_when"] = stopper.hit
                if should_stop is not None:
                    hooks["should_stop"] = should_stop
                try:
                    result = self.engine.generate(
                        tokens,
                        tenant_salt=tenant_salt,
                        max_tokens=max_tokens,
                        temperature=temperature,
                        seed=seed,
                        keep_tail_at=plan.keep_tail_at if plan is not None else (),
                        on_token=on_token,
                        on_prefill=lambda: started.append(self.timeline.stamp()),
                        **hooks,
                    )
                except PoolExhaustedError as exc:
                    raise BackendAPIError(529, "overloaded_error", "Overloaded") from exc
                except InvalidRequestError as exc:  # e.g. a prompt id outside a checkpoint's vocab
                    raise BackendAPIError(400, "invalid_request_error", str(exc)) from exc
                if plan is not None and ledger is not None:
                    # the response began when the prefill ended (the engine's hook); entries are
                    # available to requests that arrive after that (hosted-api-rules.md 1.9)
                    response_start = started[0] if started else self.timeline.stamp()
                    commit_plan(plan, ledger, available_at=response_start)
                if read_limit is not None:
                    self._anchor_idle_prefixes(tokens, tenant_salt, policy)
            text, matched = StopText.apply(stop_sequences, result.output_ids)
            outcome = GenerationOutcome(prompt, plan, result, policy, text, matched, limit)
            if plan is not None and result.reused_tokens < plan.read_tokens:
                self.counters.inc("promptcache_accounting_violations_total")
                log.error("cache read %d > reused %d", plan.read_tokens, result.reused_tokens)
            # Every generation that ran is counted here, once, whether or not its response reaches
            # the client (an aborted stream still prefilled, wrote its cache entries and generated
            # tokens until it was cancelled).
            prompt_tokens, read, write = usage_of(outcome)
            amounts: dict[str, float] = {
                "promptcache_prompt_tokens_total": prompt_tokens,
                "promptcache_cache_read_tokens_total": read,
                "promptcache_reused_tokens_total": result.reused_tokens,
                "promptcache_computed_tokens_total": result.computed_tokens,
                "promptcache_output_tokens_total": len(result.output_ids),
            }
            if write:
                amounts["promptcache_cache_write_tokens_total"] = write
            self.counters.inc_many(amounts)
            if result.stop_reason == "cancelled" and self._closing.is_set():
                raise _shutdown_error()  # counted above; the response is the shutdown error
            return outcome

    def _anchor_idle_prefixes(
        self, tokens: Sequence[int], tenant_salt: bytes, policy: CachePolicy
    ) -> None:
        """Anchor the OpenAI automatic-caching prefixes of ``tokens`` (the keys
        :mod:`~promptcache.local.api_openai` recorded in :attr:`openai_idle_ledger` through
        the request's read limit) to the block-cache blocks holding them, once the request's
        blocks are committed (call under :attr:`lock`, after the generation): the ledger's
        bound then never drops a prefix whose KV is cached, and the pool's eviction of its last
        block forgets it. A no-op for an engine without a :class:`KVCacheManager`."""
        manager = self._kv_manager
        if manager is None:
            return
        keys = automatic_prefix_keys(
            tokens,
            tenant_salt,
            min_tokens=policy.min_cacheable_tokens,
            step_tokens=policy.cache_step_tokens,
        )
        if not keys:
            return
        hashes = manager.cached_prefix_hashes(tokens[: keys[-1][0]], tenant_salt=tenant_salt)
        anchor_automatic_prefixes(self.openai_idle_ledger, keys, hashes, manager.block_size)

    @contextlib.contextmanager
    def _cancellable(self, should_stop: Callable[[], bool] | None
                     ) -> Iterator[Callable[[], bool] | None]:
        """Register one generation as in flight for :meth:`close` (which sets its cancel
        event) while the block runs; yields ``should_stop`` extended with that event (None
        stays None: a generation started without the hook cannot be cancelled)."""
        closing = threading.Event()  # set by close()
        stop = should_stop
        if should_stop is not None:
            asked = should_stop
            stop = lambda: closing.is_set() or asked()  # noqa: E731
        with self._inflight_cv:
            self._inflight.add(closing)
        try:
            yield stop
        finally:
            with self._inflight_cv:
                self._inflight.discard(closing)
                self._inflight_cv.notify_all()

    def generate(
        self,
        prompt: TemplatedPrompt,
        policy: CachePolicy,
        *,
        tenant_salt: bytes,
        planner: Planner,
        ledger: CacheLedger | None,
        max_tokens: int,
        usage_of: UsageOf,
        stop_sequences: Sequence[str] = (),
        temperature: float = 0.0,
        seed: int | None = None,
        should_stop: Callable[[], bool] | None = None,
        read_limit: ReadLimit | None = None,
    ) -> GenerationOutcome:
        """Run one request to completion (blocking; call from a worker thread) and count it in
        /metrics (``usage_of`` gives the input-side usage the response reports).

        ``should_stop`` is polled before each decode step; once it returns True decoding ends
        with ``stop_reason="cancelled"`` (the client left: :func:`generate_until_disconnect`).
        ``read_limit``: see :data:`ReadLimit` (None: reads are bounded by the plan and the
        physical reuse only).

        Raises:
            BackendAPIError: 400 for a request the engine rejects (e.g. a token id outside a
                checkpoint's vocabulary); 529 only if no KV block at all can be pinned.
        """
        return self._run(
            prompt,
            policy,
            tenant_salt=tenant_salt,
            planner=planner,
            ledger=ledger,
            max_tokens=max_tokens,
            stop_sequences=stop_sequences,
            temperature=temperature,
            seed=seed,
            usage_of=usage_of,
            on_plan=None,
            on_token=None,
            should_stop=should_stop,
            read_limit=read_limit,
        )

    def start_stream(
        self,
        prompt: TemplatedPrompt,
        policy: CachePolicy,
        *,
        tenant_salt: bytes,
        planner: Planner,
        ledger: CacheLedger | None,
        max_tokens: int,
        usage_of: UsageOf,
        stop_sequences: Sequence[str] = (),
        temperature: float = 0.0,
        seed: int | None = None,
        read_limit: ReadLimit | None = None,
    ) -> GenerationStream:
        """Start a generation in a thread; return its :class:`GenerationStream`.

        Events, in order: ``("plan", CachePlan | None)``, ``("token", id)`` per generated token,
        then ``("done", GenerationOutcome)`` or ``("error", BackendAPIError | Exception)``.
        The generation is counted in /metrics by the worker when it ends, so a stream whose
        client disconnects is counted exactly like a completed one; the SSE side only has to
        call ``stream.cancel()`` when it is closed early, to stop decoding.
        """
        stream = GenerationStream()
        events = stream.events

        def work() -> None:
            try:
                outcome = self._run(
                    prompt,
                    policy,
                    tenant_salt=tenant_salt,
                    planner=planner,
                    ledger=ledger,
                    max_tokens=max_tokens,
                    stop_sequences=stop_sequences,
                    temperature=temperature,
                    seed=seed,
                    usage_of=usage_of,
                    on_plan=lambda plan: events.put(("plan", plan)),
                    on_token=lambda tok: events.put(("token", tok)),
                    should_stop=stream._cancel.is_set,
                    read_limit=read_limit,
                )
            except Exception as exc:  # delivered to the HTTP side, which renders it
                events.put(("error", exc))
            else:
                events.put(("done", outcome))
            finally:
                with self._inflight_cv:
                    self._workers.pop(threading.current_thread(), None)

        # daemon, so that a server killed mid-generation still exits; close() joins it
        thread = threading.Thread(target=work, name="promptcache-generate", daemon=True)
        with self._inflight_cv:
            self._workers[thread] = stream
        thread.start()
        return stream

    # ------------------------------------------------------------------ metrics
    def metrics_text(self) -> str:
        """Prometheus text exposition (version 0.0.4) of the counters and engine metrics."""
        lines: list[str] = []
        with self.counters.lock:
            items = sorted(self.counters.values.items())
        by_name: dict[str, list[tuple[tuple[tuple[str, str], ...], float]]] = defaultdict(list)
        for (name, labels), value in items:
            by_name[name].append((labels, value))
        for name, help_text in _COUNTER_HELP.items():
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} counter")
            for labels, value in by_name.get(name, [((), 0.0)]):
                lines.append(f"{name}{_labels(labels)} {_num(value)}")
        for key, value in sorted(_flatten(self.engine_metrics()).items()):
            metric = "promptcache_engine_" + "".join(c if c.isalnum() else "_" for c in key)
            lines.append(f"# TYPE {metric} gauge")
            lines.append(f"{metric} {_num(value)}")
        lines.append(
            f"# TYPE promptcache_anthropic_cache_entries gauge\n"
            f"promptcache_anthropic_cache_entries {len(self.anthropic_ledger)}"
        )
        lines.append(
            f"# TYPE promptcache_openai_cache_entries gauge\n"
            f"promptcache_openai_cache_entries {len(self.openai_ledger)}"
        )
        return "\n".join(lines) + "\n"

    def engine_metrics(self) -> dict[str, Any]:
        """The engine's metrics dict (prefix cache stats, computed/reused totals)."""
        try:
            return dict(self.engine.metrics)
        except Exception:  # a metrics read must never take the server down
            log.exception("engine metrics failed")
            return {}

    def metrics(self) -> dict[str, float]:
        """Counters as a flat dict ``{"promptcache_requests_total{...}": value}`` plus engine
        metrics under ``engine.<key>`` (tests and :class:`LocalBackend`)."""
        out: dict[str, float] = {}
        with self.counters.lock:
            for (name, labels), value in self.counters.values.items():
                out[name + _labels(labels)] = value
        for key, value in _flatten(self.engine_metrics()).items():
            out[f"engine.{key}"] = value
        return out


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, (int, float)):
            out[name] = float(value)
        elif isinstance(value, Mapping):
            out.update(_flatten(value, name + "_"))
        elif hasattr(value, "__dataclass_fields__"):
            out.update(
                _flatten({k: getattr(value, k) for k in value.__dataclass_fields__}, name + "_")
            )
    return out


def _labels(labels: tuple[tuple[str, str], ...]) -> str:
    if not labels:
        return ""
    body = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in labels
    )
    return "{" + body + "}"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


# ---------------------------------------------------------------------- request helpers
def provider_of(request: Request) -> ProviderShape:
    """Which provider's error shape a request gets (by path; /v1/models by header)."""
    path = request.url.path
    if path.startswith("/v1/messages"):
        return "anthropic"
    if path.startswith("/v1/models") and "anthropic-version" in request.headers:
        return "anthropic"
    return "openai"


def unknown_route_response(request: Request, status: int) -> JSONResponse:
    """An unknown route (404) or method (405) in the provider's error shape.

    Anthropic's shape (``not_found_error``) when the path is under ``/v1/messages`` or the
    request sends ``anthropic-version`` (as the official Anthropic client always does);
    otherwise OpenAI's error object, ``Invalid URL (METHOD /path)`` (``invalid_request_error``).
    """
    path = request.url.path
    anthropic = provider_of(request) == "anthropic" or "anthropic-version" in request.headers
    if status == 404:
        if anthropic:
            exc = BackendAPIError(404, "not_found_error", "Not Found")
        else:
            exc = BackendAPIError(
                404, "invalid_request_error", f"Invalid URL ({request.method} {path})"
            )
    else:
        exc = BackendAPIError(
            status, "invalid_request_error", f"Method {request.method} not allowed for {path}"
        )
    return error_response("anthropic" if anthropic else "openai", exc, request)


_REQUEST_ID_KEY = "promptcache.request_id"


def request_id_of(request: Request) -> str:
    """The request's Anthropic-style id (``req_...``), made on first use and kept in the ASGI
    scope, so that the ``request-id`` header and an error body's ``request_id`` are the same
    id, as on the hosted API (https://platform.claude.com/docs/en/api/errors)."""
    rid = request.scope.get(_REQUEST_ID_KEY)
    if not isinstance(rid, str):
        rid = new_request_id()
        request.scope[_REQUEST_ID_KEY] = rid
    return rid


def error_response(
    provider: ProviderShape, exc: BackendAPIError, request: Request | None = None
) -> JSONResponse:
    """Render a :class:`BackendAPIError` in the provider's shape (OpenAI: 529 -> 503).

    ``request``: the request it answers; an Anthropic body's ``request_id`` is then that
    request's id (:func:`request_id_of`, also sent as the ``request-id`` header).
    """
    if provider == "anthropic":
        rid = request_id_of(request) if request is not None else None
        return JSONResponse(
            anthropic_error_body(exc.error_type, exc.message, rid), status_code=exc.status
        )
    status = 503 if exc.status == 529 else exc.status
    return JSONResponse(
        openai_error_body(exc.error_type, exc.message, param=exc.param, code=exc.code),
        status_code=status,
    )


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The request body as a JSON object.

    Raises:
        BackendAPIError: 413 over ``limit`` bytes (checked on Content-Length before reading and
            while reading); 400 when the body is not a JSON object.
    """
    declared = request.headers.get("content-length")
    too_large = BackendAPIError(
        413, "request_too_large", "Request exceeds the maximum allowed number of bytes."
    )
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BackendAPIError(
            400, "invalid_request_error", f"The request body is not valid JSON: {exc}"
        ) from None
    if not isinstance(body, dict):
        raise BackendAPIError(
            400, "invalid_request_error", "The request body must be a JSON object."
        )
    return body


def api_key_of(request: Request) -> str | None:
    """The caller's API key (``x-api-key`` or ``Authorization: Bearer``), used as tenant."""
    key = request.headers.get("x-api-key")
    if key:
        return key
    auth = request.headers.get("authorization", "")
    return auth[7:] if auth.lower().startswith("bearer ") else None


def sse(event: str | None, data: Mapping[str, Any] | str) -> bytes:
    """One server-sent event."""
    payload = (
        data
        if isinstance(data, str)
        else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    )
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def iter_events(
    events: GenerationStream | queue.Queue[tuple[str, Any]],
) -> Iterator[tuple[str, Any]]:
    """Blocking iterator over a generation's events (ends after done/error)."""
    while True:
        kind, value = events.get()
        yield kind, value
        if kind in ("done", "error"):
            return


async def cancel_on_close(
    body: AsyncIterator[bytes], stream: GenerationStream
) -> AsyncIterator[bytes]:
    """An SSE body that cancels its generation when it ends, however it ends.

    A client that disconnects mid-stream closes the body (``GeneratorExit`` at a ``yield``, or
    ``CancelledError`` at an ``await`` when the server cancels the response task): decoding
    then stops at the engine's next step instead of running to ``max_tokens``. Usage is not
    counted here but by the generation's worker (:meth:`BackendService.start_stream`), so an
    aborted stream is counted exactly once, like one read to the end.
    """
    try:
        async for chunk in body:
            yield chunk
    finally:
        stream.cancel()  # a no-op when the generation already ended
        aclose = getattr(body, "aclose", None)
        if aclose is not None:
            await aclose()  # the body is suspended at a yield (or done): this does not block


async def next_event(events: GenerationStream) -> tuple[str, Any]:
    """The generation's next event, awaited in a worker thread."""
    item: tuple[str, Any] = await anyio.to_thread.run_sync(events.get)
    return item


async def first_event(
    request: Request, events: GenerationStream
) -> tuple[CachePlan | None, tuple[str, Any]]:
    """Wait for a streamed generation's plan and first ``token`` (or ``done``) event.

    Waiting lets admission errors (pool exhausted, bad token) get a proper status: an
    ``error`` event is raised. While it waits (for the engine lock, then the prefill), a
    watcher listens for the client's ``http.disconnect`` and cancels the generation, which then
    stops after at most one token instead of decoding to ``max_tokens`` (servers do not cancel a
    route handler when its client leaves). The watcher ends with the wait; the generation is
    also cancelled if the wait itself is cancelled or fails.
    """

    plan: CachePlan | None = None
    item: tuple[str, Any]
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_disconnect, request, events.cancel, "before the first token")
            while True:
                item = await next_event(events)
                if item[0] == "plan":
                    plan = item[1]
                    continue
                break
            tg.cancel_scope.cancel()  # stop watching: the response listens from here on
        if item[0] == "error":
            raise item[1]
    except BaseException:  # cancelled, or an admission error: nothing will read the stream
        events.cancel()
        raise
    return plan, item


async def _watch_disconnect(request: Request, stop: Callable[[], None], what: str) -> None:
    """Call ``stop`` once the client sends ``http.disconnect`` (it left: ``what``)."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            log.debug("client left %s: cancelling the generation", what)
            stop()
            return


async def generate_until_disconnect(
    request: Request,
    service: BackendService,
    prompt: TemplatedPrompt,
    policy: CachePolicy,
    **kwargs: Any,
) -> GenerationOutcome:
    """A non-streamed generation (:meth:`BackendService.generate` in a worker thread) that is
    cancelled when its client disconnects or the request task is cancelled.

    A watcher listens for the client's ``http.disconnect`` (servers do not cancel a route
    handler when its client leaves) and asks the engine to stop; decoding then ends at its next
    step with ``stop_reason="cancelled"`` and the generation is counted with the tokens
    generated until then, as an aborted stream is. When the request task itself is cancelled
    (server shutdown after its graceful timeout) the worker is abandoned and told to stop, so a
    client timeout or a shutdown frees the engine instead of decoding to ``max_tokens``.

    Raises:
        BackendAPIError: as :meth:`BackendService.generate`.
    """
    cancel = threading.Event()

    def work() -> tuple[GenerationOutcome | None, BaseException | None]:
        try:
            return service.generate(prompt, policy, should_stop=cancel.is_set, **kwargs), None
        except Exception as exc:  # re-raised outside the task group (no exception group)
            return None, exc

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_disconnect, request, cancel.set,
                          "a non-streamed request")
            outcome, error = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
            tg.cancel_scope.cancel()
    finally:
        cancel.set()  # cancelled or done: a no-op once the generation ended
    if error is not None:
        raise error
    assert outcome is not None
    return outcome


class GenerationResponse(StreamingResponse):
    """The SSE response of a streamed generation: it cancels the generation when it ends,
    however it ends (read to the end, client gone, server shutting down), even if its body
    was never started (an async generator that never ran has no ``finally`` to run)."""

    def __init__(
        self,
        body: AsyncIterator[bytes],
        events: GenerationStream,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            cancel_on_close(body, events), media_type="text/event-stream", headers=headers
        )
        self.generation = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.generation.cancel()  # a no-op when the generation already ended


# ---------------------------------------------------------------------- app
def build_engine(
    model: str = "random",
    *,
    device: str | None = None,
    pool_mb: float = 256.0,
    block_size: int = 16,
    mode: str = "exact",
    seed: int = 0,
    runner: ModelRunner | None = None,
    **runner_overrides: Any,
) -> Engine:
    """A real engine: :class:`ModelRunner` (``"random"`` seeded Llama or a local checkpoint
    path) behind a KV pool of ``pool_mb`` MiB.

    Args:
        runner: an existing runner to serve (its weights are read-only, so several engines may
            share one); otherwise one is built from ``model``, ``seed``, ``device`` and
            ``runner_overrides``.

    Raises:
        ImportError: torch / transformers are not installed (the ``local`` extra).
        ValueError: bad model shape or a pool smaller than one block.
    """
    from promptcache.local.engine import Engine
    from promptcache.local.model import ModelRunner

    if runner is None:
        runner = ModelRunner(model, seed=seed, device=device, **runner_overrides)
    return Engine(runner, pool_bytes=int(pool_mb * 1024 * 1024), block_size=block_size, mode=mode)  # type: ignore[arg-type]


def create_app(
    engine: EngineLike | Engine | None = None,
    *,
    clock: Clock | None = None,
    options: ServerOptions | None = None,
) -> FastAPI:
    """The FastAPI app serving one engine.

    Args:
        engine: the engine (default: :func:`build_engine` with its defaults).
        clock: TTL clock (default: wall clock).
        options: :class:`ServerOptions`.

    Returns:
        the app; its :class:`BackendService` is ``app.state.service``. Its lifespan shutdown
        (a server stopping) calls :meth:`BackendService.close`; a server that wants streams
        to end with an error event instead of being cut should call
        :meth:`BackendService.begin_shutdown` when it starts shutting down, before waiting
        for its requests (``promptcache serve`` does).
    """
    from promptcache.local import api_anthropic, api_openai

    service = BackendService(
        engine if engine is not None else build_engine(), clock=clock, options=options
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        # the server is shutting down (its requests have ended or were cancelled): stop the
        # generations still running and wait for their threads, so that the interpreter does
        # not exit with torch running in one (an abort: "terminate called ...")
        await anyio.to_thread.run_sync(service.close)

    app = FastAPI(
        title="promptcache local backend", docs_url=None, redoc_url=None, openapi_url=None,
        lifespan=lifespan,
    )
    app.state.service = service

    @app.middleware("http")
    async def count_requests(request: Request, call_next: Callable[[Request], Any]) -> Response:
        start = time.perf_counter()
        try:
            response: Response = await call_next(request)
        except Exception as exc:  # nothing crashes the server: 500 in the provider's shape
            log.exception("unhandled error on %s", request.url.path)
            response = error_response(
                provider_of(request),
                BackendAPIError(500, "api_error", f"Internal server error ({type(exc).__name__})."),
                request,
            )
        route = request.scope.get("route")
        endpoint = getattr(route, "path", None) or "unmatched"  # bounded label values
        service.counters.inc(
            "promptcache_requests_total", endpoint=endpoint, status=str(response.status_code)
        )
        anthropic = provider_of(request) == "anthropic" or _REQUEST_ID_KEY in request.scope
        if anthropic and "request-id" not in response.headers:
            response.headers["request-id"] = request_id_of(request)
        log.debug(
            "%s %s -> %d in %.3fs",
            request.method,
            request.url.path,
            response.status_code,
            time.perf_counter() - start,
        )
        return response

    @app.exception_handler(BackendAPIError)
    async def on_api_error(request: Request, exc: BackendAPIError) -> JSONResponse:
        return error_response(provider_of(request), exc, request)

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return unknown_route_response(request, exc.status_code)

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(
            service.metrics_text(), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    @app.get("/v1/models")
    async def models(request: Request) -> JSONResponse:
        provider = provider_of(request)
        ids = [m for m in known_models() if get_policy(m).provider == provider]
        if provider == "anthropic":
            data = [api_anthropic.model_info(m, service.options.model_created) for m in ids]
            return JSONResponse(
                {
                    "data": data,
                    "has_more": False,
                    "first_id": ids[0] if ids else None,
                    "last_id": ids[-1] if ids else None,
                }
            )
        return JSONResponse(
            {
                "object": "list",
                "data": [api_openai.model_info(m, service.options.model_created) for m in ids],
            }
        )

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str, request: Request) -> JSONResponse:
        provider = provider_of(request)
        policy = service.policy(model_id, provider)
        if provider == "anthropic":
            return JSONResponse(
                api_anthropic.model_info(policy.model_id, service.options.model_created)
            )
        return JSONResponse(api_openai.model_info(policy.model_id, service.options.model_created))

    app.include_router(api_anthropic.router(service))
    app.include_router(api_openai.router(service))
    return app
