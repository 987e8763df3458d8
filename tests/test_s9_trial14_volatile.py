"""Regression tests for new-user trial 14, finding F6: PromptBuilder.volatile() no longer takes
a stable text that merely holds the same characters for the volatile value (raw substring
matching stopped the request from being built)."""

from __future__ import annotations

import pytest

from promptcache import PromptBuilder
from promptcache._errors import VolatileValueError

CLAUDE = "claude-sonnet-4-6"


def test_declared_before_a_system_prompt_that_mentions_the_same_characters() -> None:
    b = PromptBuilder(CLAUDE)
    uid = b.volatile(7, name="user id")
    b.system("You are support. Refunds are accepted within 7 days.")
    b.turn(f"Hi, I am user {uid}")
    assert "I am user 7" in str(b.to_anthropic()["messages"])
    b = PromptBuilder(CLAUDE)
    who = b.volatile("Bob", name="user name")
    b.system("Escalate billing issues to Bobby in finance.")
    b.turn(f"Hi, I am {who}")
    b.to_anthropic()


def test_a_formatted_value_is_still_caught_as_a_whole_word() -> None:
    b = PromptBuilder(CLAUDE)
    who = b.volatile("Bob", name="user name")
    greeting = f"You are talking to {who}."
    with pytest.raises(VolatileValueError, match="user name"):
        b.system(greeting)
    b = PromptBuilder(CLAUDE)
    who = b.volatile("Bob", name="user name")
    _ = f"{who}"
    b.system("Escalate billing issues to Bobby in finance.")  # not the word Bob
    b = PromptBuilder(CLAUDE)
    uid = b.volatile(7, name="user id")
    _ = f"{uid}"
    b.system("Refunds within 17 days.")
    with pytest.raises(VolatileValueError, match="user id"):
        b.document("Refunds within 7 days.")


def test_readme_loop_with_a_document_dated_today() -> None:
    """The README loop declares the date last (in the tail): a document or an earlier answer
    that happens to hold today's date does not stop the request."""
    b = PromptBuilder(CLAUDE)
    b.system("You are support.").document("## 1.4.0 - 2026-11-30\n- fixes",
                                          title="CHANGELOG.md")
    b.history({"role": "user", "content": "What day is it?"},
              {"role": "assistant", "content": "It is 2026-11-30."})
    b.turn("What changed?").tail(f"Now: {b.volatile('2026-11-30', name='now')}")
    out = b.to_anthropic()
    assert "Now: 2026-11-30" in str(out["messages"][-1])


def test_declared_after_the_authors_own_sections_still_raises() -> None:
    b = PromptBuilder(CLAUDE).system("Greet Ada Lovelace politely.")
    with pytest.raises(VolatileValueError, match="system"):
        b.volatile("Ada Lovelace")
    b = PromptBuilder(CLAUDE).system("Greet Ada Lovelaces politely.")
    b.volatile("Ada Lovelace")  # inside a longer word: another text


def test_a_text_declared_twice_is_watched_through_either_wrapper() -> None:
    # the second declaration replaced the first in the watch list, so text formatted from the
    # first wrapper passed into history unnoticed (review of the ninth session)
    from promptcache.builder import assistant, user

    b = PromptBuilder("claude-sonnet-4-6")
    first = b.volatile("u-4711")
    b.volatile("u-4711")
    b.system("You are a support agent.")
    with pytest.raises(VolatileValueError, match="u-4711"):
        b.history(user("hi"), assistant(f"user {first}"))
