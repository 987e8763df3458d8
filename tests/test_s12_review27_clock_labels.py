"""Review 27 of 0558302 (lint: a clock word in an earlier sentence does not name a later time;
a time in a range is a schedule): the sentence cut also cut at a bare line break and at an
abbreviation's period, and a time with its UTC offset read as a range, so these clocks, all
flagged before 0558302, went unreported (a prompt that changes every minute, PC1xx silent)."""

from __future__ import annotations

import pytest

from promptcache.lint.volatile import scan_text


@pytest.mark.parametrize("text, match", [
    ("Current time:\n14:32\nAnswer briefly.", "14:32"),      # label on its own line
    ("## Current time\n14:32", "14:32"),                     # markdown heading
    ("Current time: Oct. 2, 14:32", "14:32"),                # month abbreviation
    ("Current time: 14:32-05:00. Answer briefly.", "14:32"),  # UTC offset, not a range
])
def test_clock_still_found(text: str, match: str) -> None:
    assert [h.match for h in scan_text(text) if h.kind == "timestamp"][:1] == [match]


@pytest.mark.parametrize("text", [
    "Support hours 09:00-17:00.",
    "Open 9:00am-5:00pm today.",
    "Support hours 9:00 AM - 5:00 PM, 9:00 to 17:00 on Fridays.",
    "All times are UTC. Support opens at 09:00.",
    "All times are UTC.\nSupport opens at 09:00.",
])
def test_schedules_and_earlier_sentences_stay_quiet(text: str) -> None:
    assert [h.match for h in scan_text(text) if h.kind == "timestamp"] == []


@pytest.mark.parametrize("name", ["auth.uid", "request.auth.uid", "account.uid", "me.uid",
                                  "firebase_uid", "member.uid"])
def test_a_uid_of_an_account_is_per_user(name: str) -> None:
    """0558302 kept ``uid`` alone or of a user/customer only: Firebase's ``auth.uid`` and an
    account's uid, per-user values flagged before it, went unreported."""
    from promptcache.lint.volatile import classify_name

    assert classify_name(name) == ("id", None)


@pytest.mark.parametrize("name", ["card.uid", "rev_uid", "doc.uid"])
def test_a_uid_of_a_thing_stays_quiet(name: str) -> None:
    from promptcache.lint.volatile import classify_name

    assert classify_name(name) is None
