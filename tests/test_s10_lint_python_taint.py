"""Regression tests for new-user trial 15 (Python lint taint): finding 4 (``int()``,
``round()``, ``hash()``... no longer clear a volatile value; epoch seconds are reported at
second granularity), finding 6 (a value after the last breakpoint of a literal ``system=``
list is outside the cached prefix) and finding 13 (a developer message is named as one)."""

from __future__ import annotations

from promptcache.lint.api import lint_text
from promptcache.lint.finding import Finding

HEAD = ("import math, random, time\nfrom datetime import datetime\nfrom openai import OpenAI\n"
        "BASE = 'You are a research agent. ' * 500\nclient = OpenAI()\n")


def _system(expr: str, role: str = "system") -> str:
    return (HEAD + "def ask(q):\n"
            f"    v = {expr}\n"
            "    return client.chat.completions.create(model='gpt-5', messages=["
            f"{{'role': '{role}', 'content': f'v={{v}} ' + BASE}}, "
            "{'role': 'user', 'content': q}])\n")


def _lint(src: str) -> list[Finding]:
    return lint_text(src, "app.py")


def _one(expr: str) -> Finding:
    found = _lint(_system(expr))
    assert len(found) == 1, [f.message for f in found]
    return found[0]


def test_epoch_seconds_are_a_second_granularity_clock() -> None:
    for expr in ("int(time.time())", "int(datetime.now().timestamp())", "round(time.time())",
                 "math.floor(time.time())"):
        f = _one(expr)
        assert f.code == "PC101", expr
        assert f.details["granularity"] == "second", expr
        assert "every second" in f.message, expr


def test_rounded_to_the_hour_is_an_hour_clock() -> None:
    f = _one("int(time.time() // 3600)")
    assert f.code == "PC101" and f.details["granularity"] == "hour"


def test_float_format_without_decimals_is_seconds() -> None:
    f = _one("f'{time.time():.0f}'")
    assert f.code == "PC101" and f.details["granularity"] == "second"


def test_numeric_builtins_keep_the_value() -> None:
    assert _one("float(time.time())").code == "PC101"
    assert _one("abs(time.time())").code == "PC101"
    assert _one("hash(time.time())").code == "PC101"
    assert _one("max(time.time(), 0)").code == "PC101"
    assert _one("int(random.random() * 10)").code == "PC103"


def test_functions_whose_result_cannot_hold_the_value_still_clear_it() -> None:
    assert _lint(_system("len(str(time.time()))")) == []
    assert _lint(_system("isinstance(time.time(), float)")) == []
    assert _lint(_system("bool(random.random())")) == []


ANTHROPIC = ("from datetime import datetime\nimport anthropic\nc = anthropic.Anthropic()\n"
             "STABLE = 'You are a helpful assistant. ' * 400\nCC = {'type': 'ephemeral'}\n")


def _anthropic(system: str, messages: str = "[{'role': 'user', 'content': 'Hi'}]",
               extra: str = "") -> list[Finding]:
    return _lint(ANTHROPIC + "def ask(q, history):\n"
                 "    return c.messages.create(model='claude-sonnet-4-6', max_tokens=5,\n"
                 f"        system={system},\n        messages={messages}{extra})\n")


AFTER = ("[{'type': 'text', 'text': STABLE, 'cache_control': {'type': 'ephemeral'}}, "
         "{'type': 'text', 'text': f'Current time: {datetime.now()}'}]")


def test_clock_after_the_last_breakpoint_of_a_system_list_is_not_reported() -> None:
    assert _anthropic(AFTER) == []


def test_clock_before_or_at_a_breakpoint_is_still_reported() -> None:
    inside = ("[{'type': 'text', 'text': f'Current time: {datetime.now()}'}, "
              "{'type': 'text', 'text': STABLE, 'cache_control': CC}]")
    assert [f.code for f in _anthropic(inside)] == ["PC101"]
    marked = ("[{'type': 'text', 'text': STABLE}, "
              "{'type': 'text', 'text': f'Current time: {datetime.now()}', 'cache_control': CC}]")
    assert [f.code for f in _anthropic(marked)] == ["PC101"]


def test_a_later_breakpoint_in_messages_puts_the_clock_back_in_the_prefix() -> None:
    later = ("[{'role': 'user', 'content': [{'type': 'text', 'text': q, "
             "'cache_control': CC}]}]")
    assert [f.code for f in _anthropic(AFTER, later)] == ["PC101"]


def test_unknown_messages_or_automatic_caching_keep_the_finding() -> None:
    assert [f.code for f in _anthropic(AFTER, "history")] == ["PC101"]
    assert [f.code for f in _anthropic(AFTER, "[*history, {'role': 'user', 'content': q}]")] \
        == ["PC101"]
    assert [f.code for f in _anthropic(AFTER, extra=", cache_control=CC")] == ["PC101"]


def test_no_breakpoint_at_all_is_reported_as_before() -> None:
    unmarked = ("[{'type': 'text', 'text': STABLE}, "
                "{'type': 'text', 'text': f'Current time: {datetime.now()}'}]")
    assert [f.code for f in _anthropic(unmarked)] == ["PC101"]


def test_first_message_after_a_system_breakpoint_is_outside_the_prefix() -> None:
    system = "[{'type': 'text', 'text': STABLE, 'cache_control': CC}]"
    msgs = ("[{'role': 'user', 'content': f'Now {datetime.now()}'}, "
            "{'role': 'assistant', 'content': 'ok'}, {'role': 'user', 'content': 'Hi'}]")
    assert _anthropic(system, msgs) == []
    assert [f.code for f in _anthropic("STABLE", msgs)] == ["PC101"]  # no breakpoint: as before


JSON_HEAD = ("import json\nimport anthropic\nclient = anthropic.Anthropic()\n"
             "RULES = 'Rules. ' * 2000\n")


def test_set_joined_into_text_suggests_sorted_not_sort_keys() -> None:
    found = _lint(JSON_HEAD + "def run(tags, q):\n    listing = ', '.join(set(tags))\n"
                  "    return client.messages.create(model='claude-sonnet-4-6', max_tokens=5,"
                  " system='Tags: ' + listing + RULES, messages=[{'role': 'user', 'content': q}])\n")
    assert [f.code for f in found] == ["PC203"]
    assert "sorted(" in found[0].fix and "sort_keys" not in found[0].fix


def test_unsorted_json_dumps_keeps_the_sort_keys_fix() -> None:
    found = _lint(JSON_HEAD + "def run(profile, q):\n"
                  "    return client.messages.create(model='claude-sonnet-4-6', max_tokens=5,"
                  " system=json.dumps(profile) + RULES, messages=[{'role': 'user', 'content': q}])\n")
    assert [f.code for f in found] == ["PC203"] and "sort_keys=True" in found[0].fix


def test_json_round_trip_is_not_a_key_order_change() -> None:
    tool = "[{'name': 'x', 'description': 'd', 'input_schema': json.loads(json.dumps(schema))}]"
    found = _lint(JSON_HEAD + "def run(schema, q):\n"
                  "    return client.messages.create(model='claude-sonnet-4-6', max_tokens=5,"
                  f" system=RULES, tools={tool}, messages=[{{'role': 'user', 'content': q}}])\n")
    assert found == []


def test_developer_message_is_named_as_one() -> None:
    for role in ("developer", "system"):
        found = _lint(HEAD + "def ask(q):\n"
                      f"    msg = {{'role': '{role}', 'content': f'Now {{time.time()}} ' + BASE}}\n"
                      "    return client.chat.completions.create(model='gpt-5', "
                      "messages=[msg, {'role': 'user', 'content': q}])\n")
        # reported through the call that sends the message (trial 21), never as a system one
        assert len(found) == 1 and "client.chat.completions.create()" in found[0].message, role
        assert role == "system" or "role=system" not in found[0].message


def test_helper_returning_messages_takes_the_call_site_argument() -> None:
    found = _lint(HEAD + "def build(v, q):\n"
                  "    return [{'role': 'system', 'content': f'v={v} ' + BASE}, "
                  "{'role': 'user', 'content': q}]\n"
                  "def ask(q):\n"
                  "    return client.chat.completions.create(model='gpt-5', "
                  "messages=build(datetime.now(), q))\n"
                  "def ask_stable(q):\n"
                  "    return client.chat.completions.create(model='gpt-5', "
                  "messages=build('v1', q))\n")
    assert [(f.code, f.line) for f in found] == [("PC101", 9)]
    assert found[0].details["sink_line"] == 9


AGENT = ("from datetime import datetime\nimport uuid\nfrom anthropic import Anthropic\n"
         "BASE = 'You are a research agent. ' * 500\n"
         "class Agent:\n"
         "    def __init__(self):\n"
         "        self.client = Anthropic()\n"
         "        self.system_prompt = f'Started {datetime.now().isoformat()}\\n{BASE}'\n"
         "        self.stable = BASE\n"
         "    def step(self, messages):\n"
         "        return self.client.messages.create(model='claude-sonnet-4-6', max_tokens=9,"
         " system=self.system_prompt, messages=messages)\n"
         "    def calm(self, messages):\n"
         "        return self.client.messages.create(model='claude-sonnet-4-6', max_tokens=9,"
         " system=self.stable, messages=messages)\n"
         "class Other:\n"
         "    def step(self, client, messages):\n"
         "        return client.messages.create(model='claude-sonnet-4-6', max_tokens=9,"
         " system=self.system_prompt, messages=messages)\n")


def test_self_attribute_set_in_another_method_is_followed() -> None:
    found = _lint(AGENT)
    assert [(f.code, f.line, f.details["sink_line"]) for f in found] == [("PC101", 8, 11)]


def test_per_instance_prompt_cache_key_is_not_a_key_per_request() -> None:
    src = ("import uuid\nfrom openai import OpenAI\nclass Chat:\n"
           "    def __init__(self):\n        self.key = str(uuid.uuid4())\n"
           "        self.client = OpenAI()\n"
           "    def ask(self, q):\n"
           "        return self.client.responses.create(model='gpt-5', input=q, "
           "prompt_cache_key=self.key)\n")
    assert [f.code for f in _lint(src)] == []
