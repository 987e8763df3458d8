"""LocalBackend.close() stops in-flight generations; one request id per Anthropic request.

Trial 16, finding 1: an OpenAI chat stream broken off early and closed, then leaving
``with LocalBackend()``, aborted the interpreter at exit ("terminate called without an active
exception", exit 134): the generation was still running torch in its daemon thread.
Finding 8: an Anthropic error body's ``request_id`` differed from the ``request-id`` header.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import anthropic
import pytest

pytest.importorskip("torch")

from promptcache.local.testing import SMALL_MODEL, LocalBackend

TIMEOUT = 300  # seconds: importing torch and building the model on a slow, shared machine

_REPRO = textwrap.dedent(
    """
    from promptcache.local.testing import SMALL_MODEL, LocalBackend

    with LocalBackend(mode="fast", pool_mb=8.0, **SMALL_MODEL) as backend:
        stream = backend.openai().chat.completions.create(
            model="gpt-5", max_completion_tokens=50, stream=True,
            messages=[{"role": "user", "content": "hi"}],
        )
        for _ in stream:
            break
        stream.close()
    print("exited cleanly", flush=True)
    """
)


def test_stream_broken_off_then_exit_does_not_abort() -> None:
    proc = subprocess.run([sys.executable, "-c", _REPRO], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "exited cleanly" in proc.stdout
    assert "terminate called" not in proc.stderr


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=8.0, **SMALL_MODEL) as b:
        yield b


def _generation_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "promptcache-generate" and t.is_alive()]


def test_close_cancels_and_joins_broken_off_streams() -> None:
    before = set(_generation_threads())
    with LocalBackend(mode="fast", pool_mb=8.0, **SMALL_MODEL) as backend:
        client = backend.openai()
        streams = []
        for _ in range(2):  # two abandoned streams: the first closed, the second left open
            stream = client.chat.completions.create(
                model="gpt-5", max_completion_tokens=200, stream=True,
                messages=[{"role": "user", "content": "hi"}],
            )
            for _ in stream:
                break
            streams.append(stream)
            if len(streams) == 1:
                stream.close()
    assert set(_generation_threads()) <= before
    # both generations ended, cancelled rather than decoded to max_completion_tokens
    out = backend.metrics()["promptcache_output_tokens_total"]
    assert 2 <= out < 2 * 200


def test_anthropic_error_body_request_id_is_the_header(backend: LocalBackend) -> None:
    client = backend.anthropic()
    bad = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model="claude-sonnet-4-6", max_tokens=2, system=[bad] * 5,
                               messages=[{"role": "user", "content": "hi"}])
    body = info.value.body
    assert isinstance(body, dict)
    assert body["request_id"].startswith("req_")
    assert body["request_id"] == info.value.request_id == info.value.response.headers["request-id"]


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("POST", "/v1/messages/nope", {}),  # unknown route under /v1/messages: 404
        ("GET", "/v1/messages", {}),  # wrong method: 405
        ("POST", "/v1/unknown", {"anthropic-version": "2023-06-01"}),  # Anthropic client: 404
    ],
)
def test_route_errors_have_one_request_id(
    backend: LocalBackend, method: str, path: str, headers: dict[str, str]
) -> None:
    response = backend.http_client().request(method, path, headers=headers)
    assert response.status_code in (404, 405)
    assert response.json()["request_id"] == response.headers["request-id"]


def test_streamed_message_request_id_is_a_request_id(backend: LocalBackend) -> None:
    """The hosted API's ``request-id`` is a ``req_`` id, never the message's ``msg_`` id."""
    client = backend.anthropic()
    with client.messages.with_streaming_response.create(
        model="claude-sonnet-4-6", max_tokens=2, stream=True,
        messages=[{"role": "user", "content": "hi"}],
    ) as response:
        rid = response.headers["request-id"]
        text = "".join(response.iter_text())
    assert rid.startswith("req_")
    assert rid not in text
