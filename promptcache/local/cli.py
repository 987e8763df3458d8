"""``promptcache serve``: run the local reference backend over HTTP with uvicorn.

Binds 127.0.0.1 by default (the backend has no authentication; every API key is just a cache
tenant). Point the official clients at it::

    anthropic.Anthropic(base_url="http://127.0.0.1:8000", api_key="any")
    openai.OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="any")

The listening socket is bound before the engine is built and handed to uvicorn, so a port in
use or a host that does not resolve is reported at once, and the banner (printed only once the
socket is bound) names the real port (``--port 0`` picks a free one).

Shutdown: SIGTERM or Ctrl-C first stops every in-flight generation
(:meth:`~promptcache.local.app.BackendService.begin_shutdown`): an open stream gets the
provider's overloaded error event (Anthropic ``event: error`` with ``overloaded_error``, OpenAI
an error chunk / Responses ``error`` event, message
:data:`~promptcache.local.app.SHUTDOWN_MESSAGE`) and ends cleanly, a request not yet answered
gets 529 (Anthropic) / 503 (OpenAI). uvicorn then waits at most :data:`GRACEFUL_SHUTDOWN_S`
seconds for the requests to end (a prefill is not interrupted) and cancels those left, which
end quietly (an error status if nothing was sent yet, else the body just ends); the app's
lifespan shutdown waits for the generation threads
(:meth:`~promptcache.local.app.BackendService.close`). No traceback, and never an abort
(torch running in a thread while the interpreter exits).

Exit codes: 0 after Ctrl-C (SIGINT), as ``uvicorn`` itself exits; after a shutdown by SIGTERM,
uvicorn re-raises the signal, so the status is the signal's (143 in a shell, -15 as
``subprocess`` reports it), as a service manager expects; 1 if a generation was still running
:data:`CLOSE_TIMEOUT_S` seconds after the server stopped (the process exits without waiting
further); 2 when the address cannot be bound
(port in use, unknown host, no permission) or the engine cannot be built (bad model path,
device, pool size, missing ``local`` extra), printed as one line:
``promptcache: HOST:PORT: reason``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
from typing import TYPE_CHECKING, Any

import click

from promptcache._cliutil import fail

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from promptcache.local.app import BackendService

__all__ = ["CLOSE_TIMEOUT_S", "GRACEFUL_SHUTDOWN_S", "serve_command"]

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 10.0
"""Seconds the stopped server waits for generation threads still running (a long prefill is not
interrupted) before the process exits without them (exit 1, :func:`os._exit`: exiting the
interpreter normally with torch running in a thread aborts it)."""

GRACEFUL_SHUTDOWN_S = 3
"""Seconds SIGTERM / Ctrl-C waits for in-flight requests before cancelling them (uvicorn's
``timeout_graceful_shutdown``): a cancelled request cancels its generation, which stops at the
engine's next decode step, so ``serve`` exits within a few seconds even while a long
generation runs (uvicorn's default waits for every request, forever)."""


def _shutdown_quietly(app: ASGIApp, service: BackendService) -> ASGIApp:
    """``app``, with an HTTP request that uvicorn cancels during a shutdown (it outlived
    :data:`GRACEFUL_SHUTDOWN_S`) ending quietly instead of logging "Exception in ASGI
    application" with chained ``CancelledError`` tracebacks: a response not yet started is
    answered with the shutdown error (:data:`~promptcache.local.app.SHUTDOWN_MESSAGE`, 529 /
    OpenAI 503), a started one has its body ended. uvicorn already logs the cancellation
    ("Cancel N running task(s), timeout graceful shutdown exceeded"). A cancellation outside a
    shutdown propagates as before."""

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        sent = {"start": False, "complete": False}

        async def tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                sent["start"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                sent["complete"] = True
            await send(message)

        try:
            await app(scope, receive, tracked)
        except asyncio.CancelledError:
            if not service.closing:
                raise
            log.debug("%s cancelled by the shutdown", scope.get("path"))
            try:
                await _end_response(scope, receive, send, sent)
            except (asyncio.CancelledError, Exception):  # the connection is going away
                pass

    return asgi


async def _end_response(
    scope: Scope, receive: Receive, send: Send, sent: dict[str, bool]
) -> None:
    """The shutdown error as the response (none was started), or the end of a started body."""
    from starlette.requests import Request

    from promptcache.local.app import _shutdown_error, error_response, provider_of

    if not sent["start"]:
        request = Request(scope, receive)
        await error_response(provider_of(request), _shutdown_error(), request)(
            scope, receive, send
        )
    elif not sent["complete"]:
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _server(config: Any, service: BackendService) -> Any:
    """A ``uvicorn.Server`` that stops the generations (:meth:`BackendService.begin_shutdown`)
    as soon as it starts shutting down, before it waits for in-flight requests: their
    responses then end with the shutdown error within the graceful timeout instead of being
    cancelled when it runs out."""
    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            service.begin_shutdown()
            await super().shutdown(sockets=sockets)

    return Server(config)


def _address(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets (``[::1]:8000``)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` and listening (as uvicorn binds its own: IPv6
    when ``host`` holds a colon, ``SO_REUSEADDR``); port 0 picks a free port
    (``sock.getsockname()[1]``).

    Raises:
        OSError: the address cannot be bound (in use, no permission, a host that does not
            resolve: :class:`socket.gaierror`).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    return sock


def _bind_reason(exc: OSError) -> str:
    """The OS reason of a failed bind, lower-cased as the CLI's other reasons are."""
    reason = exc.strerror or str(exc)
    return reason[:1].lower() + reason[1:]


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option(
    "--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="TCP port."
)
@click.option(
    "--model",
    default="random",
    show_default=True,
    help="'random' (a small seeded Llama, no download) or a local Hugging Face "
    "checkpoint directory.",
)
@click.option("--device", default=None, help="cpu or cuda (default: cuda when available).")
@click.option(
    "--pool-mb",
    default=256.0,
    show_default=True,
    type=click.FloatRange(min=0.01),
    help="KV block pool size in MiB: what the prefix cache can hold. A longer prompt is "
    "still served; only its first blocks are cached.",
)
@click.option(
    "--block-size",
    default=16,
    show_default=True,
    type=click.IntRange(min=1),
    help="Tokens per KV block.",
)
@click.option(
    "--mode",
    type=click.Choice(["exact", "fast"]),
    default="exact",
    show_default=True,
    help="exact: block-aligned chunked prefill (bit-identical logits for block-aligned "
    "prompt hits; kept partial tails and reused generated tokens differ by ~1e-6); "
    "fast: one-shot.",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the random model.")
@click.option(
    "--max-body-mb",
    default=32.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Request bodies above this size get 413.",
)
@click.option(
    "--no-prompt-tokens-details",
    is_flag=True,
    help="Leave usage.prompt_tokens_details out of Chat Completions (like vLLM "
    "without --enable-prompt-tokens-details).",
)
@click.option(
    "--openai-in-memory-idle",
    type=click.FloatRange(min=1),
    default=None,
    metavar="SECONDS",
    help="OpenAI models before GPT-5.6 with in-memory retention: stop reading a prefix idle "
    "this long. Default: the catalog's certain bound, 1 h ('always removed within 1 h'); "
    "300 emulates the usual clearing ('usually cleared after 5-10 min'), which the hosted "
    "API does not guarantee. 24h retention always lasts 24 h.",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
)
def serve_command(
    host: str,
    port: int,
    model: str,
    device: str | None,
    pool_mb: float,
    block_size: int,
    mode: str,
    seed: int,
    max_body_mb: float,
    no_prompt_tokens_details: bool,
    openai_in_memory_idle: float | None,
    log_level: str,
) -> None:
    """Serve the local reference backend (Anthropic /v1/messages, OpenAI /v1/chat/completions
    and /v1/responses, /v1/models, /metrics)."""
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # an IPv6 address written as in a URL: [::1]
    try:
        sock = _bind_socket(host, port)
    except OSError as exc:
        fail(f"{_address(host, port)}: {_bind_reason(exc)}")
    try:
        try:
            import uvicorn

            from promptcache.local.app import ServerOptions, build_engine, create_app

            engine = build_engine(
                model, device=device, pool_mb=pool_mb, block_size=block_size, mode=mode,
                seed=seed,
            )
        except ImportError as exc:
            fail(f"the local backend needs the 'local' extra ({exc}); "
                 "pip install 'promptcache[local]'")
        except (OSError, ValueError, RuntimeError) as exc:
            fail(f"{model}: cannot start the engine: {exc}")
        options = ServerOptions(
            max_body_bytes=int(max_body_mb * 1024 * 1024),
            openai_prompt_tokens_details=not no_prompt_tokens_details,
            openai_in_memory_idle_s=openai_in_memory_idle,
        )
        app = create_app(engine, options=options)
        service: BackendService = app.state.service
        bound = sock.getsockname()[1]
        click.echo(
            f"promptcache local backend on http://{_address(host, bound)} (model {model}, "
            f"pool {pool_mb:g} MiB, block {block_size}, {mode} mode)",
            err=True,
        )
        config = uvicorn.Config(
            _shutdown_quietly(app, service),
            host=host,
            port=bound,
            log_level=log_level,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
        try:
            _server(config, service).run(sockets=[sock])
        except KeyboardInterrupt:  # Ctrl-C, re-raised by uvicorn once it has shut down
            pass  # exit 0, as uvicorn's own CLI does
        finally:
            # the lifespan shutdown already waited, unless a second Ctrl-C forced the exit
            if not service.close(CLOSE_TIMEOUT_S):
                click.echo(
                    f"promptcache: a generation was still running {CLOSE_TIMEOUT_S:g} s after "
                    "the server stopped; exiting without waiting for it",
                    err=True,
                )
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(1)
    finally:
        sock.close()
