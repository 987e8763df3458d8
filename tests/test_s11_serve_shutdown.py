"""``promptcache serve`` shuts down cleanly with requests in flight.

Trial 18, finding 3: Ctrl-C (SIGINT) while a stream was open printed "Exception in ASGI
application" with three chained tracebacks ending in ``CancelledError``, then "Aborted!" (exit 1;
once SIGABRT: "terminate called without an active exception"), and the client's stream was cut
without an error event; SIGTERM cut the stream too. Now the server stops the generations as it
starts shutting down (``BackendService.begin_shutdown``): an open stream gets the provider's
error event (Anthropic ``overloaded_error``, OpenAI an error chunk / Responses ``error``) and
ends, a request not yet answered gets 529 / 503, the lifespan joins the generation threads, and
the process exits 0 after SIGINT (as uvicorn's CLI does), by the signal after SIGTERM.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import anthropic
import anyio
import openai
import pytest

from promptcache.local.app import SHUTDOWN_MESSAGE
from promptcache.local.cli import _shutdown_quietly

SERVE = [sys.executable, "-m", "promptcache.cli", "serve", "--device", "cpu", "--pool-mb", "4",
         "--port", "0", "--log-level", "info"]
TIMEOUT = 300  # seconds: importing torch and building the model on a slow, shared machine
USER = [{"role": "user", "content": "hi"}]
EVENTS_BEFORE_SIGNAL = 10
MAX_TOKENS = 20_000  # decodes for minutes: only the shutdown can end the stream


class _Server:
    """A ``promptcache serve --port 0`` subprocess whose output is collected by a thread."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(SERVE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.port = self._wait_ready()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def _wait_ready(self) -> int:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._reader.join(10)
                pytest.fail(f"serve exited {self.proc.returncode}:\n{self.output}")
            match = re.search(r"backend on http://127\.0\.0\.1:(\d+) ", self.output)
            if match and "Application startup complete" in self.output:
                return int(match.group(1))
            time.sleep(0.1)
        pytest.fail(f"serve did not start in {TIMEOUT} s:\n{self.output}")

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"serve still running {TIMEOUT} s after {sig!r}:\n{self.output}")
        self._reader.join(10)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture()
def server() -> Iterator[_Server]:
    pytest.importorskip("torch")
    pytest.importorskip("uvicorn")
    srv = _Server()
    try:
        yield srv
    finally:
        srv.kill()


def _anthropic_stream(port: int, started: threading.Event) -> None:
    client = anthropic.Anthropic(api_key="k", base_url=f"http://127.0.0.1:{port}",
                                 max_retries=0, timeout=TIMEOUT)
    with client.messages.stream(model="claude-sonnet-4-6", max_tokens=MAX_TOKENS,
                                messages=USER) as stream:
        for n, _ in enumerate(stream, 1):
            if n == EVENTS_BEFORE_SIGNAL:
                started.set()


def _chat_stream(port: int, started: threading.Event) -> None:
    client = openai.OpenAI(api_key="k", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0,
                           timeout=TIMEOUT)
    stream = client.chat.completions.create(model="gpt-5", max_completion_tokens=MAX_TOKENS,
                                            stream=True, messages=USER)  # type: ignore[arg-type]
    for n, _ in enumerate(stream, 1):
        if n == EVENTS_BEFORE_SIGNAL:
            started.set()


def _responses_stream(port: int, started: threading.Event) -> None:
    client = openai.OpenAI(api_key="k", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0,
                           timeout=TIMEOUT)
    stream = client.responses.create(model="gpt-5", max_output_tokens=MAX_TOKENS, stream=True,
                                     input="hi")
    for n, event in enumerate(stream, 1):
        if n == EVENTS_BEFORE_SIGNAL:
            started.set()
        if event.type == "error":  # the SDK yields the Responses error event
            raise openai.APIError(event.message, request=None, body=None)  # type: ignore[arg-type]


def _check_error(kind: str, exc: BaseException | None) -> None:
    """The stream ended with the provider's shutdown error, not a cut connection."""
    assert exc is not None, "the stream ended without an error"
    if kind == "anthropic":
        assert isinstance(exc, anthropic.APIStatusError), repr(exc)
        assert exc.body == {"type": "error", "error": {"type": "overloaded_error",
                                                       "message": SHUTDOWN_MESSAGE}}
    else:
        assert isinstance(exc, openai.APIError), repr(exc)
        assert not isinstance(exc, openai.APIConnectionError), repr(exc)
        assert exc.message == SHUTDOWN_MESSAGE


STREAMS: dict[str, Callable[[int, threading.Event], None]] = {
    "anthropic": _anthropic_stream,
    "chat": _chat_stream,
    "responses": _responses_stream,
}


@pytest.mark.local
@pytest.mark.parametrize(
    ("sig", "kind"),
    [(signal.SIGINT, "anthropic"), (signal.SIGTERM, "chat"), (signal.SIGINT, "responses")],
    ids=["sigint-anthropic", "sigterm-chat", "sigint-responses"],
)
def test_signal_with_an_open_stream_shuts_down_cleanly(
    server: _Server, sig: signal.Signals, kind: str
) -> None:
    started = threading.Event()
    error: list[BaseException] = []

    def client() -> None:
        try:
            STREAMS[kind](server.port, started)
        except BaseException as exc:  # checked in the test thread
            error.append(exc)

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    deadline = time.monotonic() + TIMEOUT
    while not started.is_set() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.is_set(), (error, server.output)

    rc = server.stop(sig)
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    _check_error(kind, error[0] if error else None)
    out = server.output
    for bad in ("Traceback", "Exception in ASGI application", "CancelledError", "Aborted!",
                "terminate called", "ERROR"):
        assert bad not in out, out
    assert "Finished server process" in out, out
    # exit 0 after Ctrl-C, as uvicorn's CLI gives; the signal's status after SIGTERM
    assert rc == (0 if sig == signal.SIGINT else -signal.SIGTERM), (rc, out)


# ------------------------------------------------------------ in-process: the service's shutdown
@pytest.fixture()
def backend() -> Iterator[Any]:
    pytest.importorskip("torch")
    from promptcache.local.testing import SMALL_MODEL, LocalBackend

    with LocalBackend(mode="fast", pool_mb=8.0, **SMALL_MODEL) as b:
        yield b


def _wait_in_flight(backend: Any, thread: threading.Thread) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not backend.service._inflight and thread.is_alive():
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.local
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_begin_shutdown_answers_a_non_streamed_request_with_the_overloaded_error(
    backend: Any, provider: str
) -> None:
    result: list[BaseException | object] = []

    def call() -> None:
        try:
            if provider == "anthropic":
                result.append(backend.anthropic().messages.create(
                    model="claude-sonnet-4-6", max_tokens=MAX_TOKENS, messages=USER))
            else:
                result.append(backend.openai().chat.completions.create(
                    model="gpt-5", max_completion_tokens=MAX_TOKENS, messages=USER))
        except BaseException as exc:
            result.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    _wait_in_flight(backend, thread)
    backend.service.begin_shutdown()
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    exc = result[0]
    if provider == "anthropic":
        assert isinstance(exc, anthropic.APIStatusError) and exc.status_code == 529, exc
        assert isinstance(exc.body, dict)
        assert exc.body["error"] == {"type": "overloaded_error", "message": SHUTDOWN_MESSAGE}
    else:
        assert isinstance(exc, openai.APIStatusError) and exc.status_code == 503, exc
        assert isinstance(exc.body, dict)
        assert exc.body["message"] == SHUTDOWN_MESSAGE
        assert exc.body["type"] == "server_error"
    # stopped (or refused, had it not reached the engine yet), not decoded to max_tokens
    out = backend.metrics()["promptcache_output_tokens_total"]
    assert out < MAX_TOKENS
    # a request after the shutdown began is refused before it runs
    with pytest.raises(anthropic.APIStatusError) as refused:
        with backend.anthropic().messages.stream(model="claude-sonnet-4-6", max_tokens=5,
                                                 messages=USER) as stream:
            stream.get_final_message()
    assert refused.value.status_code == 529
    assert backend.metrics()["promptcache_output_tokens_total"] == out


# ------------------------------------------------------- the ASGI wrapper: cancelled at shutdown
def _run_cancelled(
    closing: bool, path: str, start_response: bool
) -> tuple[list[dict[str, Any]], BaseException | None]:
    """Run ``_shutdown_quietly`` around an app that hangs (after starting a response or not)
    and cancel it, as uvicorn does once its graceful timeout runs out."""
    sent: list[dict[str, Any]] = []
    hanging = anyio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if start_response:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"data: x\n\n", "more_body": True})
        hanging.set()
        await anyio.sleep_forever()

    async def receive() -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    wrapped = _shutdown_quietly(app, SimpleNamespace(closing=closing))  # type: ignore[arg-type]
    scope = {"type": "http", "method": "POST", "path": path, "headers": [], "query_string": b"",
             "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 1),
             "client": ("127.0.0.1", 2), "root_path": ""}
    raised: list[BaseException] = []

    async def main() -> None:
        import asyncio

        task = asyncio.ensure_future(wrapped(scope, receive, send))
        await hanging.wait()
        task.cancel()
        try:
            await task
        except BaseException as exc:
            raised.append(exc)

    anyio.run(main)
    return sent, raised[0] if raised else None


def test_cancelled_at_shutdown_before_the_response_gets_the_shutdown_error() -> None:
    sent, raised = _run_cancelled(True, "/v1/messages", start_response=False)
    assert raised is None
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 529
    body = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert body["error"] == {"type": "overloaded_error", "message": SHUTDOWN_MESSAGE}

    sent, raised = _run_cancelled(True, "/v1/chat/completions", start_response=False)
    assert raised is None and sent[0]["status"] == 503
    body = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert body["error"]["message"] == SHUTDOWN_MESSAGE


def test_cancelled_at_shutdown_mid_stream_ends_the_body() -> None:
    sent, raised = _run_cancelled(True, "/v1/messages", start_response=True)
    assert raised is None
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_cancelled_outside_a_shutdown_still_propagates() -> None:
    import asyncio

    sent, raised = _run_cancelled(False, "/v1/messages", start_response=True)
    assert isinstance(raised, asyncio.CancelledError)
    assert sent[-1]["more_body"] is True
