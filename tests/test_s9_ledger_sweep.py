"""The local backend's cache ledger forgot an expired entry only when the same prefix was
looked up again: a long-running server kept every prefix ever written, and the entries gauge
counted dead ones (review 14, F12)."""

from __future__ import annotations

from promptcache.local.accounting import CacheLedger


def test_expired_entries_are_swept_and_not_counted() -> None:
    ledger = CacheLedger()
    for i in range(30):
        ledger.put(bytes([i]), 100, "5m", now=0.0)
    assert len(ledger) == 30
    ledger.put(b"fresh", 100, "5m", now=7200.0)  # 2 h later: the 30 expired long ago
    assert len(ledger) == 1
    assert len(ledger._entries) == 1  # forgotten, not only uncounted
    assert ledger.get(b"fresh", now=7200.0) is not None


def test_a_live_entry_survives_the_sweep_and_the_count_follows_the_clock() -> None:
    ledger = CacheLedger()
    ledger.put(b"a", 10, "1h", now=0.0)
    ledger.put(b"b", 10, "5m", now=0.0)
    ledger.put(b"c", 10, "5m", now=600.0)  # b expired at 300
    assert len(ledger) == 2 and ledger.get(b"a", now=600.0) is not None
