"""``promptcache serve`` as a user runs it: bind errors are one line with exit status 2 (no
banner, no uvicorn log), and the banner names the port really bound (``--port 0``)."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import pytest

SERVE = [sys.executable, "-m", "promptcache.cli", "serve", "--device", "cpu", "--pool-mb", "1"]
TIMEOUT = 300  # seconds: importing torch on a slow, shared machine


@pytest.fixture()
def busy_port() -> Iterator[int]:
    """A port this test holds bound and listening on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@contextlib.contextmanager
def _serving(log_level: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """``serve --port 0`` running: (the process, the port its banner names); stopped after."""
    pytest.importorskip("torch")
    pytest.importorskip("uvicorn")
    proc = subprocess.Popen([*SERVE, "--port", "0", "--log-level", log_level],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        match = re.search(r"backend on http://127\.0\.0\.1:(\d+) ", banner)
        assert match, banner
        yield proc, int(match.group(1))
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SERVE, *args], capture_output=True, text=True, timeout=TIMEOUT,
                          check=False)


def test_serve_on_a_port_in_use_exits_2_with_one_line(busy_port: int) -> None:
    res = _run("--port", str(busy_port))
    assert res.returncode == 2, res.stderr
    assert res.stderr == f"promptcache: 127.0.0.1:{busy_port}: address already in use\n"
    assert res.stdout == ""


def test_serve_takes_an_ipv6_host_in_brackets() -> None:
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        sock.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with sock:
        sock.listen()
        port = sock.getsockname()[1]
        res = _run("--host", "[::1]", "--port", str(port))  # as in a URL
    assert res.returncode == 2, res.stderr
    assert res.stderr == f"promptcache: [::1]:{port}: address already in use\n"


def test_serve_on_a_host_that_does_not_resolve_exits_2_with_one_line() -> None:
    res = _run("--host", "999.1.1.1", "--port", "0")
    assert res.returncode == 2, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("promptcache: 999.1.1.1:0: "), res.stderr
    assert "Traceback" not in res.stderr and "backend on" not in res.stderr


def test_serve_bad_model_still_exits_2_with_one_line() -> None:
    res = _run("--model", "/no/such/checkpoint", "--port", "0")
    assert res.returncode == 2, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "cannot start the engine" in lines[0], res.stderr
    assert lines[0].startswith("promptcache: /no/such/checkpoint: ")


@pytest.mark.local
@pytest.mark.parametrize("log_level", ["info", "warning"])
def test_serve_port_0_banner_names_the_bound_port(log_level: str) -> None:
    with _serving(log_level) as (_proc, port):
        assert port != 0
        # the port is really the server's: /v1/models answers there
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models",
                                    timeout=TIMEOUT) as resp:
            assert resp.status == 200


@pytest.mark.local
def test_serve_stops_on_sigterm_while_a_generation_runs() -> None:
    """newuser7 bug 1: uvicorn's graceful shutdown waited for an endless non-streamed request,
    so SIGTERM could not stop ``serve``. Now in-flight requests get a short graceful timeout and
    are then cancelled with their generations. The request fits the context (no 400) and would
    decode for minutes; its client stays connected, so only the shutdown can end it."""
    import json
    import signal
    import time

    body = json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 20_000,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    with _serving("warning") as (proc, port), \
            socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\ncontent-type: application/json"
                  b"\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
        time.sleep(2)  # the generation is decoding
        assert proc.poll() is None
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        assert time.monotonic() - start < 15
        assert proc.returncode == -signal.SIGTERM  # as the module docstring says
