"""The wrapper logs a usage anomaly once per kind (new-user trial 23): an agent that leaves
its Anthropic streams early (each one flagged ``stream_incomplete``) got one warning line per
call; the tracker's events keep every one."""

from __future__ import annotations

import logging

import pytest

from promptcache.local.testing import LocalBackend
from promptcache.sdk import wrap
from promptcache.usage import UsageTracker


def test_streams_left_early_log_the_anomaly_once(caplog: pytest.LogCaptureFixture) -> None:
    tracker = UsageTracker()
    with LocalBackend(mode="fast", hidden_size=32, layers=1, heads=2, kv_heads=1,
                      pool_mb=8) as backend:
        client = wrap(backend.anthropic(), tracker=tracker, lint="off")
        caplog.set_level(logging.WARNING, logger="promptcache")
        for i in range(3):
            stream = client.messages.create(
                model="claude-sonnet-4-6", max_tokens=16, stream=True,
                messages=[{"role": "user", "content": f"question {i}"}])
            for _event in stream:
                break  # left early: no message_delta, the output count is unknown
            stream.close()
    anomalies = [r for r in caplog.records if "usage_anomaly" in r.getMessage()]
    assert len(anomalies) == 1, [r.getMessage() for r in anomalies]
    assert "stream_incomplete" in anomalies[0].getMessage()
    assert "logged once per kind" in anomalies[0].getMessage()
    assert sum(e.kind == "usage_anomaly" for e in tracker.events) == 3
    assert len(tracker.records) == 3
