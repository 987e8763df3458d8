"""Input kinds: each source's parsing, positions (file:line:col) and the rules that read it.

Rule tests as data in the manner of sqlfluff's YAML cases: each table row is an input, the
codes it must produce and where.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from promptcache.lint import LintConfig, lint_paths, lint_request, lint_text
from promptcache.lint.sources.python_ast import analyze
from tests.cases import filler

STABLE = filler(80, "stable")


def lint(tmp_path: Path, name: str, text: str, **cfg: Any) -> list[tuple[str, int, int]]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = lint_paths([str(path)], LintConfig(**cfg))
    assert result.errors == [], result.errors
    return [(f.code, f.line, f.col) for f in result.findings]


# ------------------------------------------------------------------ templates
TEMPLATE_CASES = [
    # (file name, text, expected [(code, line, col)])
    ("a.j2", "Hello.\nToday is {{ current_date }}.\n" + STABLE, [("PC104", 2, 10)]),
    ("b.j2", "{% set t = now() %}\nIt is {{ t }}.\n" + STABLE, [("PC104", 2, 7)]),
    ("c.j2", "{{ examples | random }}\n" + STABLE, [("PC104", 1, 1)]),
    ("d.j2", "{{ request_id }} " + STABLE, [("PC104", 1, 1)]),
    ("e.j2", STABLE + "\nToday is {{ current_date }}.", []),  # after the stable text
    ("f.j2", "Hi {{ user_name }}\n" + STABLE, []),  # not volatile
    ("g.jinja2", "{# header #}\n  {{ now().strftime('%Y') }}\n" + STABLE, []),  # year: stable
    ("h.md", "Now: {current_time}\n" + STABLE, [("PC104", 1, 6)]),
    ("i.txt", "TODAY is {{$date}}\n" + STABLE, [("PC104", 1, 10)]),
    ("j.txt", "plain prompt without holes\n" + STABLE, []),
    ("k.yaml", "agent:\n  system_template: |\n    You are an agent.\n    Time: {{ datetime }}\n"
               "    " + STABLE + "\n  name: x\n", [("PC104", 4, 11)]),
    ("l.yaml", "system_prompt: \"Date {{current_date}} " + STABLE + "\"\n", [("PC104", 1, 22)]),
    ("m.yaml", "description: \"Date {{current_date}} " + STABLE + "\"\n", []),  # not a prompt key
    ("n.toml", "[command]\nprompt = \"\"\"\nIntro\nDate: {{ today }}\n" + STABLE + "\n\"\"\"\n",
     [("PC104", 4, 7)]),
    ("o.prompty", "---\nname: t\nmodel:\n  configuration:\n    name: gpt-4o\n---\nsystem:\n"
                  "Time is {{ now }}\n" + STABLE + "\nuser:\n{{question}}\n", [("PC104", 8, 9)]),
]


@pytest.mark.parametrize("name,text,expected", TEMPLATE_CASES, ids=[c[0] for c in TEMPLATE_CASES])
def test_templates(tmp_path: Path, name: str, text: str, expected: list[Any]) -> None:
    assert lint(tmp_path, name, text) == expected


def test_template_finding_details(tmp_path: Path) -> None:
    path = tmp_path / "t.j2"
    path.write_text("Today is {{ now().strftime('%Y-%m-%d') }}.\n" + STABLE, encoding="utf-8")
    [f] = lint_paths([str(path)]).findings
    assert f.severity.value == "info" and f.details["granularity"] == "day"
    assert f.details["stable_tokens_after"] >= 80 and f.path is None


# ------------------------------------------------------------------ Python source
PY_HEAD = "import datetime, json, random, uuid, time\nimport anthropic\nfrom openai import OpenAI\n" \
          "client = anthropic.Anthropic()\noai = OpenAI()\n"
PY_CASES = [
    ("fstring", "def f(q):\n    now = datetime.datetime.now()\n"
                "    return client.messages.create(system=f'It is {now}', messages=[])\n",
     [("PC101", 8, 11)]),
    ("helper", "def clock():\n    return time.strftime('%Y-%m-%d %H:%M')\n\n"
               "def build():\n    return 'Rules. ' + clock()\n\n"
               "def f(q):\n    s = build()\n    return client.messages.create(system=s, messages=[])\n",
     [("PC101", 8, 12)]),
    ("format", "def f(q):\n    sys = 'id {}'.format(uuid.uuid4())\n"
               "    return oai.chat.completions.create(messages=[{'role': 'system', 'content': sys},"
               " {'role': 'user', 'content': q}])\n", [("PC102", 8, 26)]),
    ("random", "EX = ['a', 'b']\ndef f(q):\n    pick = random.choice(EX)\n"
               "    return client.messages.create(system='Ex: ' + pick, messages=[])\n",
     [("PC103", 9, 12)]),
    ("set-tools", "TOOLS = {'a': 1}\ndef f(names):\n    tools = [TOOLS[n] for n in set(names)]\n"
                  "    return client.messages.create(tools=tools, messages=[])\n",
     [("PC201", 9, 32)]),
    ("sorted-set", "TOOLS = {'a': 1}\ndef f(names):\n    tools = [TOOLS[n] for n in sorted(set(names))]\n"
                   "    return client.messages.create(tools=tools, messages=[])\n", []),
    ("dumps", "def f(cfg):\n    s = 'Config: ' + json.dumps(cfg)\n"
              "    return client.messages.create(system=s, messages=[])\n", [("PC203", 8, 22)]),
    ("dumps-sorted", "def f(cfg):\n    s = 'Config: ' + json.dumps(cfg, sort_keys=True)\n"
                     "    return client.messages.create(system=s, messages=[])\n", []),
    ("cache-key", "def f(q):\n    return oai.responses.create(prompt_cache_key=str(uuid.uuid4()), "
                  "input=q)\n", [("PC403", 8, 54)]),
    ("newest-turn", "def f(q):\n    return client.messages.create(system='Rules', messages=["
                    "{'role': 'user', 'content': f'{q} at {datetime.datetime.now()}'}])\n", []),
    ("not-a-sink", "def f(q):\n    log = f'{datetime.datetime.now()} {q}'\n    print(log)\n", []),
    ("system-dict", "def f(q):\n    msgs = [{'role': 'system', 'content': f'Now {time.time()}'}]\n"
                    "    msgs.append({'role': 'user', 'content': q})\n    return msgs\n",
     [("PC101", 8, 50)]),
]


@pytest.mark.parametrize("label,body,expected", PY_CASES, ids=[c[0] for c in PY_CASES])
def test_python_taint(tmp_path: Path, label: str, body: str, expected: list[Any]) -> None:
    assert lint(tmp_path, "agent.py", PY_HEAD + "\n" + body) == expected


def test_python_flow_details() -> None:
    import ast

    src = PY_HEAD + "\ndef f(q):\n    d = datetime.date.today()\n" \
                    "    return client.messages.create(system=f'Day {d}', messages=[])\n"
    [flow] = analyze(ast.parse(src))
    assert flow.volatility.kind == "timestamp" and flow.volatility.granularity == "day"
    assert flow.sink == "system=" and flow.call == "client.messages.create()"
    findings = lint_text(src, "agent.py")
    assert [f.severity.value for f in findings] == ["info"]


MULTI_SINK = (
    "import datetime, anthropic\nclient = anthropic.Anthropic()\n"
    "now = datetime.datetime.now()\n"
    "client.messages.create(system=f'Time: {now}', messages=[])@4\n"
    "client.messages.create(system=[{'type': 'text', 'text': f'Time: {now}'}], messages=[])@5\n"
    "client.messages.create(system=f'Time: {now}', messages=[])@6\n"
)
IGNORE = "  # promptcache: ignore[PC101]"


@pytest.mark.parametrize("c4,c5,c6,sink_line", [
    ("", "", "", 4),
    (IGNORE, "", "", 5),
    (IGNORE, IGNORE, "", 6),
    (IGNORE, IGNORE, IGNORE, None),
    ("", "", IGNORE, 4),
    ("  # promptcache: ignore[PC102]", "", "", 4),  # another code silences nothing
    ("  # promptcache: ignore", "", "", 5),
])
def test_python_suppression_on_one_sink_keeps_the_others(tmp_path: Path, c4: str, c5: str,
                                                         c6: str, sink_line: int | None) -> None:
    import ast

    text = MULTI_SINK.replace("@4", c4).replace("@5", c5).replace("@6", c6)
    assert [f.sink_line for f in analyze(ast.parse(text))] == [4, 5, 6]
    path = tmp_path / "s.py"
    path.write_text(text, encoding="utf-8")
    findings = lint_paths([str(path)]).findings
    # still one finding per volatile value, naming its first call not suppressed
    if sink_line is None:
        assert findings == []
    else:
        [f] = findings
        assert (f.code, f.line, f.col, f.details["sink_line"]) == ("PC101", 3, 7, sink_line)
        assert f"(line {sink_line})" in f.message
        assert lint_text(text, "s.py") == [f.with_location("s.py", f.line, f.col)]
    # a suppression on the volatile source's own line silences all its calls
    path.write_text(text.replace("now()\n", "now()" + IGNORE + "\n"), encoding="utf-8")
    assert lint_paths([str(path)]).findings == []


def test_python_a_system_message_is_one_sink_at_its_content() -> None:
    import ast

    # the role=system dict inside messages= is one sink (reported at its content's line),
    # however its lines are laid out, so a suppression on that line silences all of it
    body = ("def f(q):\n    now = datetime.datetime.now()\n"
            "    return oai.chat.completions.create(\n        model='gpt-5',\n"
            "        messages=[\n            {\n                'role': 'system',\n"
            "                'content': f'Now {now}',@\n            },\n"
            "            {'role': 'user', 'content': q},\n        ],\n    )\n")
    src = PY_HEAD + "\n" + body
    assert [f.sink_line for f in analyze(ast.parse(src.replace("@", "")))] == [14]
    assert [f.code for f in lint_text(src.replace("@", ""), "agent.py")] == ["PC101"]
    assert lint_text(src.replace("@", "  # promptcache: ignore[PC101]"), "agent.py") == []
    msgs = ("def f(q):\n    now = datetime.datetime.now()\n"
            "    msgs = [{'role': 'system', 'content': f'Now {now}'}]\n"
            "    msgs.append({'role': 'user', 'content': q})\n"
            "    return oai.chat.completions.create(model='gpt-5', messages=msgs)\n")
    assert [f.sink_line for f in analyze(ast.parse(PY_HEAD + "\n" + msgs))] == [9]
    # one value in the prefix and in the routing key: two sinks, two rules
    key = ("def f(q):\n    now = datetime.datetime.now()\n"
           "    return oai.responses.create(instructions=f'{now}', prompt_cache_key=str(now), "
           "input=q)\n")
    assert [f.code for f in lint_text(PY_HEAD + "\n" + key, "agent.py")] == ["PC101", "PC403"]


# ------------------------------------------------------------------ request JSON / OpenAI prefix
def test_openai_automatic_prefix() -> None:
    req: dict[str, Any] = {"model": "gpt-4o", "messages": [
        {"role": "system", "content": "Session 7c1e2a90-4b3d-4f6e-9a21-5d8c0b7e3f44\n" + filler(1500)},
        {"role": "user", "content": "hi"}], "prompt_cache_key": "support"}
    [f] = lint_request(req)
    assert f.code == "PC102" and f.path == "messages[0].content"
    assert f.details["breakpoint_path"] is None and f.details["tokens_invalidated"] >= 1500
    req["messages"][0]["content"] = req["messages"][0]["content"][:60]  # under 1,024 tokens
    assert [f.code for f in lint_request(req)] == ["PC401"]


def test_bare_message_list_and_exchange_list(tmp_path: Path) -> None:
    msgs = [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]
    assert lint(tmp_path, "m.json", json.dumps(msgs)) == [("PC401", 1, 1)]
    body = {"model": "claude-sonnet-4-5", "system": [{"type": "text", "text": filler(1100),
            "cache_control": {"type": "ephemeral", "ttl": "5m"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "q",
                          "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]}
    ex = [{"request": {"method": "POST", "body": body}, "response": {"body": {"usage": {}}}}]
    got = lint(tmp_path, "rec.json", json.dumps(ex, indent=1))
    assert [c for c, _, _ in got] == ["PC304"]


def test_not_a_request_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "package.json"
    path.write_text('{"name": "x", "version": "1.0.0"}', encoding="utf-8")
    result = lint_paths([str(path)])
    assert result.exit_code == 0 and str(path) in result.skipped


# ------------------------------------------------------------------ logs (cross-request)
def _anthropic(system: list[dict[str, Any]], messages: list[dict[str, Any]],
               tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "system": system, "messages": messages}
    if tools is not None:
        body["tools"] = tools
    return body


def _log(tmp_path: Path, records: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    return lint(tmp_path, "log.jsonl", "\n".join(json.dumps(r) for r in records) + "\n")


def test_log_content_varies_before_breakpoint(tmp_path: Path) -> None:
    def req(n: int) -> dict[str, Any]:
        return _anthropic([{"type": "text", "text": f"Session {n} of the day.\n" + filler(600)},
                           {"type": "text", "text": filler(600, "b"),
                            "cache_control": {"type": "ephemeral"}}],
                          [{"role": "user", "content": "hi"}])
    got = _log(tmp_path, [req(1), req(2)])
    assert got == [("PC105", 2, 77)]  # the differing digit


def test_log_tool_order_and_key_order(tmp_path: Path) -> None:
    t1 = {"name": "a", "description": filler(400), "input_schema": {"type": "object", "properties": {}}}
    t2 = {"name": "b", "description": filler(400, "b"), "input_schema": {"type": "object"}}
    sysb = [{"type": "text", "text": filler(300), "cache_control": {"type": "ephemeral"}}]
    msgs = [{"role": "user", "content": "hi"}]
    got = _log(tmp_path, [_anthropic(sysb, msgs, [t1, t2]), _anthropic(sysb, msgs, [t2, t1])])
    assert [c for c, _, _ in got] == ["PC201"]
    t1b = {"name": "a", "input_schema": {"properties": {}, "type": "object"},
           "description": t1["description"]}
    got = _log(tmp_path, [_anthropic(sysb, msgs, [t1, t2]), _anthropic(sysb, msgs, [t1b, t2])])
    assert [c for c, _, _ in got] == ["PC203"]


def test_log_growing_conversation_is_clean(tmp_path: Path) -> None:
    sysb = [{"type": "text", "text": filler(1200), "cache_control": {"type": "ephemeral"}}]
    m1 = [{"role": "user", "content": [{"type": "text", "text": "q1",
                                        "cache_control": {"type": "ephemeral"}}]}]
    m2: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "q1"}]},
          {"role": "assistant", "content": "a1"},
          {"role": "user", "content": [{"type": "text", "text": "q2",
                                        "cache_control": {"type": "ephemeral"}}]}]
    usage = [{"cache_creation_input_tokens": 1210, "cache_read_input_tokens": 0},
             {"cache_creation_input_tokens": 10, "cache_read_input_tokens": 1210}]
    recs = [{"request": _anthropic(sysb, m), "usage": u}
            for m, u in zip([m1, m2], usage, strict=True)]
    assert _log(tmp_path, recs) == []


def test_log_hit_rate_stuck_at_zero(tmp_path: Path) -> None:
    sysb = [{"type": "text", "text": filler(1200), "cache_control": {"type": "ephemeral"}}]
    recs = [{"request": _anthropic(sysb, [{"role": "user", "content": f"q{i}"}]),
             "response": {"usage": {"input_tokens": 5, "cache_creation_input_tokens": 1200,
                                    "cache_read_input_tokens": 0}}} for i in range(4)]
    assert _log(tmp_path, recs) == [("PC501", 2, 13)]  # the second request object


# ------------------------------------------------------------------ positions, every input kind
def test_every_input_kind_points_at_the_value(tmp_path: Path) -> None:
    """For each input kind the finding's line:col is where the volatile text starts."""
    body = {"model": "claude-sonnet-4-5",
            "system": [{"type": "text", "text": "Now: 2026-01-02T03:04:05Z\n" + filler(1100),
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "hi"}]}
    inputs = {
        "r.json": json.dumps(body, indent=3),
        "l.jsonl": json.dumps({"meta": 1}) + "\n" + json.dumps({"request": body}) + "\n",
        "t.j2": "\n\n   {{ request_id }}\n" + STABLE,
        "p.yaml": "a:\n  b: 1\n  system: |\n    x\n    {{ uuid }}\n    " + STABLE + "\n",
        "p.toml": "[x]\nprompt = '''\nline\n  {{ nonce }}\n" + STABLE + "\n'''\n",
        "p.prompty": "---\nname: p\n---\nsystem:\n\t{{ session_id }}\n" + STABLE + "\n",
        "p.md": "# T\n\n- {trace_id}\n" + STABLE,
        "a.py": "import uuid\nimport anthropic\nc = anthropic.Anthropic()\n\ndef f():\n"
                "    i =   uuid.uuid4()\n    c.messages.create(system=f'{i}', messages=[])\n",
    }
    needles = {"r.json": "2026-01-02T03:04:05Z", "l.jsonl": "2026-01-02T03:04:05Z",
               "t.j2": "{{ request_id }}", "p.yaml": "{{ uuid }}", "p.toml": "{{ nonce }}",
               "p.prompty": "{{ session_id }}", "p.md": "{trace_id}", "a.py": "uuid.uuid4()"}
    for name, text in inputs.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        result = lint_paths([str(path)])
        assert result.errors == [] and result.findings, name
        f = result.findings[0]
        line = text.splitlines()[f.line - 1]
        assert line[f.col - 1:].startswith(needles[name]), (name, f.line, f.col, line)


def test_lint_request_reuses_a_rendered_view() -> None:
    from promptcache.prefix import render

    body = {"model": "claude-sonnet-4-5",
            "system": [{"type": "text", "text": "Now: 2026-01-02T03:04:05Z\n" + filler(1100),
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "hi"}]}
    direct = lint_request(body)
    reused = lint_request(body, view=render(body))
    assert [f.to_dict() for f in direct] == [f.to_dict() for f in reused]
    assert [f.code for f in lint_request(body, rules=["PC3"])] == []


def test_log_interleaved_agents_are_not_compared(tmp_path: Path) -> None:
    def agent(name: str, n: int) -> dict[str, Any]:
        return _anthropic([{"type": "text", "text": filler(900, name) + f"\nTurn {n}"},
                           {"type": "text", "text": filler(300, "tail"),
                            "cache_control": {"type": "ephemeral"}}],
                          [{"role": "user", "content": f"q{n}"}],
                          tools=[{"name": name, "description": "d", "input_schema": {}}])
    # two agents with different prompts and tools, interleaved, each one stable
    recs = [agent("a", 1), agent("b", 1), agent("a", 1), agent("b", 1)]
    assert _log(tmp_path, recs) == []
    # the same agent with a value that varies at character 0 is still reported
    body = [_anthropic([{"type": "text", "text": f"{n}f3a9 " + filler(900)},
                        {"type": "text", "text": filler(300, "t"), "cache_control": {"type": "ephemeral"}}],
                       [{"role": "user", "content": "q"}]) for n in (1, 2)]
    assert [c for c, _, _ in _log(tmp_path, body)] == ["PC105"]


# ------------------------------------------------------------------ volatile scan windows
def test_next_digit_matches_a_regex_search() -> None:
    """The memchr-based digit finder answers what ``re.search("[0-9]")`` would."""
    import re

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from promptcache.lint.volatile import _next_digit

    @settings(max_examples=500, deadline=None)
    @given(st.text(alphabet="ab 0123456789é٣\n", max_size=80), st.integers(0, 90))
    def check(text: str, pos: int) -> None:
        m = re.compile(r"[0-9]").search(text, pos)
        assert _next_digit(text, pos, len(text)) == (m.start() if m else -1)

    check()


def test_scan_finds_a_timestamp_deep_in_prose() -> None:
    from promptcache.lint.volatile import scan_text

    text = "plain words without any number " * 2000 + "Now: 2026-01-02 03:04:05. " + "x " * 99
    [match] = scan_text(text)
    assert match.granularity == "second" and text[match.start:match.end] == match.match
    assert match.match == "2026-01-02 03:04:05"


def test_python_suppression_on_the_call_or_element_line(tmp_path: Path) -> None:
    """Review of the per-call suppression (4th session): a comment on the first line of a
    multi-line call, or of a multi-line system message dict, silences that call only."""
    multi = ("import datetime, anthropic, openai\nclient = anthropic.Anthropic()\n"
             "oai = openai.OpenAI()\nnow = datetime.datetime.now()\n"
             "client.messages.create(@call\n    model='claude-sonnet-4-6',\n"
             "    system=f'Time: {now}',\n    messages=[{'role': 'user', 'content': 'hi'}],\n)\n"
             "oai.chat.completions.create(\n    model='gpt-4o',\n    messages=[\n"
             "        {'role': 'system',@elt\n         'content': f'Time: {now}'},\n"
             "        {'role': 'user', 'content': 'hi'},\n    ],\n)\n")
    plain = multi.replace("@call", "").replace("@elt", "")
    [f] = lint_text(plain, "s.py")
    assert f.details["sink_line"] == 7  # the first call: its system= argument
    silenced_call = multi.replace("@call", IGNORE).replace("@elt", "")
    [g] = lint_text(silenced_call, "s.py")
    assert g.details["sink_line"] == 14  # the other call is still reported, at its content
    both = multi.replace("@call", IGNORE).replace("@elt", IGNORE)
    assert lint_text(both, "s.py") == []


def test_python_baseline_matches_the_one_finding_per_value(tmp_path: Path) -> None:
    """Review (4th session): the baseline is applied after the one-finding-per-value step, so
    a baseline written from unchanged code silences a value that reaches two different
    calls (their messages differ, so their fingerprints do)."""
    from promptcache.lint import LintConfig

    src = ("import datetime\nclient = object()\nnow = datetime.datetime.now()\n"
           "client.messages.create(model='claude-sonnet-4-6', system=f'Time: {now}', "
           "messages=[{'role': 'user', 'content': 'hi'}])\n"
           "client.chat.completions.create(model='gpt-4o', messages=[{'role': 'system', "
           "'content': f'Time: {now}'}, {'role': 'user', 'content': 'hi'}])\n")
    path = tmp_path / "b.py"
    path.write_text(src, encoding="utf-8")
    [f] = lint_paths([str(path)]).findings
    assert f.details["sink_line"] == 4
    config = LintConfig(baseline=frozenset({f.fingerprint}))
    assert lint_paths([str(path)], config).findings == []
    assert lint_text(src, str(path), config) == []


# ------------------------------------------------------------------ positions in characters
def _col_of(text: str, line: int, needle: str) -> int:
    """1-based character column of ``needle`` on 1-based ``line`` of ``text``."""
    return text.split("\n")[line - 1].index(needle) + 1


def test_python_columns_count_characters_not_utf8_bytes(tmp_path: Path) -> None:
    src = ("from datetime import datetime\nimport anthropic\n\nclient = anthropic.Anthropic()\n\n"
           "\ndef go():\n    return client.messages.create(\n"
           "        system=f\"Vous êtes un assistant — 日本語 {datetime.now()} ok\",\n"
           "        model=\"claude-sonnet-4-5\",\n"
           "        messages=[{\"role\": \"user\", \"content\": \"hi\"}],\n    )\n")
    col = _col_of(src, 9, "datetime.now")
    assert col == 48  # the UTF-8 byte column would be 57
    assert lint(tmp_path, "u.py", src) == [("PC101", 9, col)]
    [flow] = analyze(ast.parse(src), src)
    assert (flow.line, flow.col) == (9, col)


def test_toml_same_key_in_two_tables_points_at_its_own_table(tmp_path: Path) -> None:
    text = ("[a]\nsystem_template = \"Plain stable text.\"\n\n"
            "[b]\nsystem_template = \"Now {current_time}. " + STABLE + "\"\n")
    assert lint(tmp_path, "dup.toml", text) == [("PC104", 5, _col_of(text, 5, "{current_time}"))]
    # A multi-line string in the second table, the first one also multi-line; escapes and a
    # line-ending backslash before the hole; array-of-tables and inline tables.
    text = ("[a]\nsystem_template = \"\"\"\nPlain {stable} text.\n\"\"\"\n\n"
            "[b]\nsystem_template = \"\"\"\nIntro \\\"q\\\" \\u00e9 \\\n"
            "   joined {current_time} here.\n" + STABLE + "\n\"\"\"\n"
            "[[agents]]\nprompt = 'plain'\n[[agents]]\nprompt = '{request_id} " + STABLE + "'\n"
            "[c]\nd = { system_prompt = \"é — {current_date} " + STABLE + "\" }\n")
    assert lint(tmp_path, "dup2.toml", text) == [
        ("PC104", 9, _col_of(text, 9, "{current_time}")),
        ("PC104", 15, _col_of(text, 15, "{request_id}")),
        ("PC104", 17, _col_of(text, 17, "{current_date}")),
    ]


YAML_POSITION_CASES = [
    # (label, text, (line, needle)) — the hole past the scalar's first line
    ("folded", "p:\n  system_prompt: >\n    Intro line.\n    Now {{ now }}. " + STABLE + "\n",
     (4, "{{ now }}")),
    ("folded-blank-and-more-indented",
     "p:\n  system_prompt: >-\n    Intro.\n\n      indented\n    Now {{ now }}. " + STABLE + "\n",
     (6, "{{ now }}")),
    ("plain", "p:\n  system_prompt: Intro line\n    Now {{ now }}. " + STABLE + "\n",
     (3, "{{ now }}")),
    ("double-quoted", "p:\n  system_prompt: \"Intro \\\"x\\\" —\\t日本\n    Now \\\n"
                      "    {{ now }}. " + STABLE + "\"\n", (4, "{{ now }}")),
    ("single-quoted", "p:\n  system_prompt: 'It''s\n    — {{ now }}. " + STABLE + "'\n",
     (3, "{{ now }}")),
    # An escaped line break, then empty lines (each a kept line break), then the indent.
    ("double-quoted-escaped-break-then-empty-line",
     "p:\n  system_prompt: \"a\\\n\n  Now {{ now }} " + STABLE + "\"\n", (4, "{{ now }}")),
    ("double-quoted-escaped-break-then-blank-lines-crlf",
     "p:\r\n  system_prompt: \"a\\\r\n  \r\n\r\n  \tNow {{ now }} " + STABLE + "\"\r\n",
     (5, "{{ now }}")),
    # Explicit indentation indicators: the content is indented by the key's column plus N,
    # the more-indented first line keeps its extra spaces.
    ("literal-indent-indicator",
     "p:\n  system_prompt: |2\n      indented\n    Now {{ now }} " + STABLE + "\n",
     (4, "{{ now }}")),
    ("literal-indent-indicator-strip",
     "p:\n  system_prompt: |2-\n\n      indented\n    Now {{ now }} " + STABLE + "\n",
     (5, "{{ now }}")),
    ("literal-strip-then-indent-indicator",
     "p:\n  system_prompt: |-2\n      indented\n    Now {{ now }} " + STABLE + "\n",
     (4, "{{ now }}")),
    ("literal-indent-indicator-top-level",
     "system_prompt: |2\n    indented\n  Now {{ now }} " + STABLE + "\n", (3, "{{ now }}")),
    ("literal-indent-indicator-in-sequence",
     "system_prompts:\n  - |1\n      indented\n   Now {{ now }} " + STABLE + "\n",
     (4, "{{ now }}")),
    ("literal-indent-indicator-after-anchor-line",
     "p:\n  system_prompt: &x\n    |2\n      indented\n    Now {{ now }} " + STABLE + "\n",
     (5, "{{ now }}")),
    ("folded-indent-indicator",
     "p:\n  system_prompt: >2\n      indented\n    Now {{ now }} " + STABLE + "\n",
     (4, "{{ now }}")),
]


@pytest.mark.parametrize("label,text,where", YAML_POSITION_CASES,
                         ids=[c[0] for c in YAML_POSITION_CASES])
def test_yaml_multiline_scalars_point_at_the_hole(tmp_path: Path, label: str, text: str,
                                                  where: tuple[int, str]) -> None:
    line, needle = where
    assert lint(tmp_path, label + ".yaml", text) == [("PC104", line, _col_of(text, line, needle))]


def test_yaml_merge_key_and_alias_report_the_value_once(tmp_path: Path) -> None:
    # The merged mapping is reached through its anchor and again through ``<<``; an alias
    # reaches its value a second time: one finding, at the anchored value.
    text = ("base: &b\n  system_prompt: 'A {{ now }} " + STABLE + "'\n"
            "other:\n  <<: *b\n  name: x\n"
            "again:\n  system_prompt: *b\n")
    assert lint(tmp_path, "merge.yaml", text) == [("PC104", 2, _col_of(text, 2, "{{ now }}"))]
    text = ("x: &s 'A {{ now }} " + STABLE + "'\nsystem_prompt: *s\nuser_prompt: *s\n")
    assert lint(tmp_path, "alias.yaml", text) == [("PC104", 1, _col_of(text, 1, "{{ now }}"))]
    # A mapping that merges itself is valid YAML (PyYAML loads it): lint it, once.
    text = ("b: &b\n  system_prompt: 'A {{ now }} " + STABLE + "'\n  <<: *b\n"
            "l: &l [*l, 'x']\n")
    assert lint(tmp_path, "self.yaml", text) == [("PC104", 2, _col_of(text, 2, "{{ now }}"))]


def test_yaml_nested_aliases_are_walked_once_not_expanded(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A "billion laughs" file (each level aliases the one before twice) costs its size: every
    collection is entered once, so 16 levels visit about 32 sequence items, not 2**16."""
    import yaml

    from promptcache.lint.sources import prompt_files

    lines = ['a: &a ["Now {{ now }} and more words"]']
    for i in range(1, 17):
        prev = "a" if i == 1 else f"l{i - 1}"
        lines.append(f"l{i}: &l{i} [*{prev}, *{prev}]")
    lines.append("system_prompt: *l16")
    text = "\n".join(lines) + "\n"
    visits = 0
    real = prompt_files._yaml_dash_column

    def counting(buf: str, item: Any, default: int) -> int:
        nonlocal visits
        visits += 1
        return real(buf, item, default)

    monkeypatch.setattr(prompt_files, "_yaml_dash_column", counting)
    found = list(prompt_files._yaml_scalars(yaml.compose(text), [], text))
    assert len(found) == 1  # the one string, where it is anchored
    assert visits <= 2 * 17
