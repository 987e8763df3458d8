"""The local backend's OpenAI routes never reported ``service_tier`` (new-user trial 22): a Flex
request came back with ``service_tier`` absent (None in the SDK), so the wrapper's tracker
priced it at the standard rate, while the hosted API reports the tier it served ("the response
body will include the service_tier value based on the processing mode actually used",
openai-python ``ChatCompletion.service_tier``) and the catalog prices ``flex`` at 50 %. The
backend now echoes the tier (``auto`` / none -> ``default``, ``fast`` -> ``priority``) on Chat
Completions (body and every stream chunk) and Responses, and rejects a value outside the enum
with OpenAI's ``invalid_value`` 400. Likewise a ``prompt_cache_retention`` outside
``in_memory`` / ``24h`` is ``invalid_value``, not "not supported with this model"."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

import promptcache
from promptcache.local.testing import SMALL_MODEL, LocalBackend
from promptcache.usage import UsageTracker

MSGS = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=4.0, **SMALL_MODEL) as b:
        yield b


@pytest.mark.parametrize(("sent", "reported"), [
    (None, "default"), ("auto", "default"), ("default", "default"), ("flex", "flex"),
    ("priority", "priority"), ("fast", "priority"),
])
def test_chat_and_responses_report_the_served_tier(backend: LocalBackend, sent: str | None,
                                                   reported: str) -> None:
    client = backend.openai()
    extra = {"service_tier": sent} if sent else {}
    chat = client.chat.completions.create(model="gpt-5", max_completion_tokens=1,
                                          messages=MSGS, **extra)  # type: ignore[arg-type]
    assert chat.service_tier == reported
    chunks = list(client.chat.completions.create(
        model="gpt-5", max_completion_tokens=1, messages=MSGS, stream=True,
        stream_options={"include_usage": True}, **extra))  # type: ignore[arg-type]
    assert chunks and {c.service_tier for c in chunks} == {reported}
    resp = client.responses.create(model="gpt-5", max_output_tokens=16, input="hi",
                                   **extra)  # type: ignore[arg-type]
    assert resp.service_tier == reported
    events = list(client.responses.create(model="gpt-5", max_output_tokens=16, input="hi",
                                          stream=True, **extra))  # type: ignore[arg-type]
    assert events[-1].response.service_tier == reported  # type: ignore[union-attr]


def test_a_flex_request_is_recorded_with_its_tier(backend: LocalBackend) -> None:
    tracker = UsageTracker()
    client = promptcache.wrap(backend.openai(), tracker=tracker, lint="off")
    client.chat.completions.create(model="gpt-5", max_completion_tokens=1, messages=MSGS,
                                   service_tier="flex")
    assert [r.service_tier for r in tracker.records] == ["flex"]


@pytest.mark.parametrize("value", ["cheap", 5])
def test_a_service_tier_outside_the_enum_is_a_400(backend: LocalBackend,
                                                  value: object) -> None:
    with pytest.raises(openai.BadRequestError) as exc:
        backend.openai().chat.completions.create(model="gpt-5", max_completion_tokens=1,
                                                 messages=MSGS, extra_body={"service_tier": value})
    assert exc.value.param == "service_tier"
    assert exc.value.code == ("invalid_value" if isinstance(value, str) else "invalid_type")


@pytest.mark.parametrize(("value", "code"), [("forever", "invalid_value"),
                                             ("in-memory", "invalid_value"),
                                             (24, "invalid_type")])
def test_a_retention_outside_the_enum_is_invalid_value_not_a_model_limit(
        backend: LocalBackend, value: object, code: str) -> None:
    """'forever' on gpt-5 was answered "'forever' is not supported with this model (gpt-5)",
    as if another model took it; OpenAI answers an enum miss with invalid_value."""
    with pytest.raises(openai.BadRequestError) as exc:
        backend.openai().chat.completions.create(
            model="gpt-5", max_completion_tokens=1, messages=MSGS,
            extra_body={"prompt_cache_retention": value})
    assert exc.value.param == "prompt_cache_retention" and exc.value.code == code
    assert "this model" not in exc.value.message


def test_a_retention_the_model_lacks_still_names_the_model(backend: LocalBackend) -> None:
    with pytest.raises(openai.BadRequestError) as exc:
        backend.openai().chat.completions.create(
            model="gpt-4o", max_completion_tokens=1, messages=MSGS, prompt_cache_retention="24h")
    assert exc.value.param == "prompt_cache_retention" and "(gpt-4o)" in exc.value.message
