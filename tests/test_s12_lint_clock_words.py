"""Regression tests for new-user trial 21: a date or clock time in stable prose was reported
as a volatile timestamp (PC101, "lose caching every minute") when a clock word appeared only
inside another word ("know", "Sometimes", "runtime", "Candidates", "locale") or when the only
word before it was "at" / "on" (a schedule: "the standup starts at 10:30")."""

from __future__ import annotations

import json

from promptcache.lint.api import lint_text
from promptcache.lint.volatile import scan_text

STABLE = [
    "The daily standup starts at 10:30 every weekday.",
    "Our office closes at 17:00 on Fridays.",
    "The refund policy changed on 2024-03-01.",
    "If you do not know the answer before 12:00, escalate.",
    "Sometimes customers ask about the 2023-11-15 outage.",
    "Candidates who applied 2024-01-10 get priority.",
    "The runtime was upgraded 2024-02-02.",
    "Use the locale setting from 2024-05-01 onwards.",
]
VOLATILE = [
    ("Current time: 14:03", "14:03"),
    ("The time is now 14:03.", "14:03"),
    ("Message sent at 14:03:22", "14:03:22"),
    ("Session started at epoch 1764540000.", "1764540000"),
    ('{"current_date": "2025-05-04"}', "2025-05-04"),
    ('{"createdAt": "05/04/2025"}', "05/04/2025"),
    ("sentAt=1764540000", "1764540000"),
    ("Today's date is 2025-05-04.", "2025-05-04"),
    ("TIME: 14:03", "14:03"),
    ("Snapshot at 14:03:27 of the queue", "14:03:27"),
]


def test_stable_prose_holds_no_timestamp() -> None:
    for text in STABLE:
        assert scan_text(text) == [], text


def test_clock_values_next_to_a_clock_word_are_still_found() -> None:
    for text, value in VOLATILE:
        assert [m.match for m in scan_text(text)] == [value], text


def test_a_schedule_in_a_system_prompt_is_no_finding() -> None:
    rules = "Answer billing questions politely and cite the invoice number. " * 200
    request = {"model": "claude-sonnet-4-6", "max_tokens": 100,
               "system": [{"type": "text", "cache_control": {"type": "ephemeral"},
                           "text": "The daily standup starts at 10:30 every weekday.\n" + rules}],
               "messages": [{"role": "user", "content": "hi"}]}
    assert lint_text(json.dumps(request), "request.json") == []
    request["system"][0]["text"] = "Current time: 10:30\n" + rules
    assert [f.code for f in lint_text(json.dumps(request), "request.json")] == ["PC101"]
