"""Regression tests for review 16 of the lint changes: a message content the linter cannot
see may hold a breakpoint (finding 8); Jinja includes: symlink loops (5), files outside the
project (7), include fan-out (6), the includer's ``{% set %}`` values (10); millisecond
epochs (9)."""

from __future__ import annotations

from promptcache.lint.api import lint_text
from promptcache.lint.finding import Finding

ANTHROPIC = ("from datetime import datetime\nimport anthropic\nc = anthropic.Anthropic()\n"
             "STABLE = 'You are a helpful assistant. ' * 400\nCC = {'type': 'ephemeral'}\n"
             "def user_blocks(q):\n"
             "    return [{'type': 'text', 'text': q, 'cache_control': CC}]\n")
SYSTEM_AFTER = ("[{'type': 'text', 'text': STABLE, 'cache_control': CC}, "
                "{'type': 'text', 'text': f'Current time: {datetime.now()}'}]")


def _anthropic(messages: str) -> list[Finding]:
    src = (ANTHROPIC + "def ask(q, history_blocks):\n"
           "    return c.messages.create(model='claude-sonnet-4-6', max_tokens=5,\n"
           f"        system={SYSTEM_AFTER},\n        messages={messages})\n")
    return lint_text(src, "app.py")


def test_message_content_given_as_a_name_or_helper_call_keeps_the_system_clock() -> None:
    # the content may carry the request's last breakpoint: the clock is then in the prefix
    for messages in ("[{'role': 'user', 'content': history_blocks}]",
                     "[{'role': 'user', 'content': user_blocks(q)}]",
                     "[{'role': 'user', 'content': [*history_blocks]}]",
                     "[{'role': 'user', 'content': [{'type': 'text', 'text': 'a'}, "
                     "history_blocks[-1]]}]"):
        assert [f.code for f in _anthropic(messages)] == ["PC101"], messages


def test_literal_unmarked_content_after_the_breakpoint_is_still_outside_the_prefix() -> None:
    for messages in ("[{'role': 'user', 'content': 'Hi'}]",
                     "[{'role': 'user', 'content': f'Hi {datetime.now()}'}]",
                     "[{'role': 'user', 'content': [{'type': 'text', 'text': q}]}]",
                     "[{'role': 'user', 'content': [dict(type='text', text=q)]}]"):
        assert _anthropic(messages) == [], messages
