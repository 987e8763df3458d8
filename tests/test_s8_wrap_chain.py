"""The wrapper's live diff on Responses turns chained with ``previous_response_id``.

A chained turn's body holds only its new input (the server prepends the stored conversation),
so its body diverges from the previous request's at the first input item: the live diff used
to warn on every chained turn that "the cached prefix from there on is lost" while the turn
read the whole earlier prompt (new-user trial 12). Against the in-process local backend.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from promptcache.local.testing import SMALL_MODEL, LocalBackend
from promptcache.sdk import wrap
from promptcache.usage import UsageTracker

LONG = "You answer questions about ferns and their care in great detail. " * 120
TOOL = {"type": "function", "name": "care_sheet", "description": "Look up a care sheet.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(mode="fast", pool_mb=48, **SMALL_MODEL) as b:
        yield b


def _turns(backend: LocalBackend, caplog: pytest.LogCaptureFixture, second_tool: dict[str, Any]
           ) -> tuple[Any, list[str]]:
    client = wrap(backend.openai(), tracker=UsageTracker(), auto_cache=True, session="s1")
    first = client.responses.create(model="gpt-5.6", tools=[TOOL], input=[
        {"role": "developer", "content": LONG}, {"role": "user", "content": "hi"}],
        max_output_tokens=4)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="promptcache"):
        second = client.responses.create(model="gpt-5.6", tools=[second_tool],
                                         previous_response_id=first.id,
                                         input=[{"role": "user", "content": "and cacti?"}],
                                         max_output_tokens=4)
    return second, [r.getMessage() for r in caplog.records if "diverges" in r.getMessage()]


def test_a_chained_turn_is_not_reported_as_a_break(backend: LocalBackend,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    second, breaks = _turns(backend, caplog, TOOL)
    assert second.usage.input_tokens_details.cached_tokens > 1000  # it read the earlier prompt
    assert breaks == []


def test_a_chained_turn_that_changes_a_tool_is_still_reported(
        backend: LocalBackend, caplog: pytest.LogCaptureFixture) -> None:
    changed = {**TOOL, "description": "Look up a care sheet, now with prices."}
    second, breaks = _turns(backend, caplog, changed)
    assert second.usage.input_tokens_details.cached_tokens == 0  # the tools come first
    assert len(breaks) == 1 and "tool" in breaks[0]
