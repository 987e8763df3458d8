"""examples/_common.py on a real API that fails: one line on stderr and exit 1, no traceback.

With ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY`` set, the examples call the real API. A wrong key
(the API's 401) or no network (the SDK's ``APIConnectionError``) used to end the script with the
SDK's traceback (new-user trial 25). Here the SDK client is bound to a mock transport in place
of the network.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def common() -> Iterator[ModuleType]:
    """examples/_common.py imported as the scripts import it (their folder on sys.path)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield importlib.import_module("_common")
    finally:
        sys.path.remove(str(EXAMPLES))
        sys.modules.pop("_common", None)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("status", [401, None])  # a refused key; no network (None)
def test_real_api_error_is_one_line_exit_1(common: ModuleType, provider: str,
                                           status: int | None,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    import anthropic
    import httpx2
    import openai

    def handler(request: httpx2.Request) -> httpx2.Response:
        if status is None:
            raise httpx2.ConnectError("connection refused", request=request)
        return httpx2.Response(status, json={"type": "error", "error": {
            "type": "authentication_error", "message": "invalid x-api-key"}})

    def bound(sdk: Any) -> Any:
        class Bound(sdk):  # type: ignore[misc,valid-type]
            def __init__(self, *, api_key: str) -> None:
                super().__init__(api_key=api_key, max_retries=0, http_client=httpx2.Client(
                    transport=httpx2.MockTransport(handler)))
        return Bound

    monkeypatch.setattr(anthropic, "Anthropic", bound(anthropic.Anthropic))
    monkeypatch.setattr(openai, "OpenAI", bound(openai.OpenAI))
    args = common.make_parser("test").parse_args(["--provider", provider])
    env = {common.KEY_ENV[provider]: "sk-wrong"}
    with pytest.raises(SystemExit) as exc, common.open_target(args, env=env) as target:
        assert not target.local
        if provider == "anthropic":
            target.client.messages.create(model=target.model, max_tokens=8,
                                          messages=[{"role": "user", "content": "hi"}])
        else:
            target.client.chat.completions.create(model=target.model, max_completion_tokens=8,
                                                  messages=[{"role": "user", "content": "hi"}])
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: the {provider} API: ") and err.count("\n") == 1
    assert common.KEY_ENV[provider] in err
    assert ("401" in err) if status else ("Connection" in err)


def test_local_backend_errors_are_not_swallowed(common: ModuleType) -> None:
    """Only the real-API branch turns API errors into exit 1: on the local backend a 400 (a
    bug in an example) still raises the SDK's exception."""
    pytest.importorskip("torch")
    import anthropic

    args = common.make_parser("test").parse_args(["--small-model"])
    with pytest.raises(anthropic.BadRequestError), common.open_target(args, env={}) as target:
        target.client.messages.create(model=target.model, max_tokens=8, messages=[])
