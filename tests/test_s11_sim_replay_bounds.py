"""Review 18 finding 4: ``simulate --replay``: the values of a replay line were not bounded as
the options are (``arrival_s: 1e300`` ran to a makespan of 1e300 s; a huge ``int`` was an
OverflowError traceback; a deeply nested line a RecursionError traceback), and a replay whose
own largest request made the block pool too big was blamed on ``--replicas / --capacity /
--block-size``, which the user had not set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache._errors import InputError
from promptcache.cli import main
from promptcache.sim.workload import (
    MAX_ADAPTER_CHARS,
    MAX_DURATION_S,
    MAX_REQUEST_TOKENS,
    read_replay,
)

_GOOD = '{"arrival_s": 0, "tokens": [1, 2, 3]}'


@pytest.mark.parametrize(("line", "field"), [
    ('{"arrival_s": 1e300, "tokens": [1]}', "'arrival_s'"),
    (f'{{"arrival_s": {MAX_DURATION_S * 2}, "tokens": [1]}}', "'arrival_s'"),
    ('{"arrival_s": ' + "1" + "0" * 400 + ', "tokens": [1]}', "'arrival_s'"),  # int > float
    ('{"arrival_s": NaN, "tokens": [1]}', "'arrival_s'"),
    ('{"arrival_s": Infinity, "tokens": [1]}', "'arrival_s'"),
    ('{"arrival_s": -0.5, "tokens": [1]}', "'arrival_s'"),
    ('{"arrival_s": true, "tokens": [1]}', "'arrival_s'"),
    ('{"arrival_s": "1", "tokens": [1]}', "'arrival_s'"),
    ('{"arrival_s": null, "tokens": [1]}', "'arrival_s'"),
    ('{"tokens": [1]}', "'arrival_s'"),
    ('{"arrival_s": 0, "tokens": [1], "output_tokens": 1000000000000000}', "'output_tokens'"),
    ('{"arrival_s": 0, "tokens": [1], "output_tokens": 1e15}', "'output_tokens'"),
    (f'{{"arrival_s": 0, "tokens": [1], "output_tokens": {MAX_REQUEST_TOKENS + 1}}}',
     "'output_tokens'"),
    (f'{{"arrival_s": 0, "tokens": [1, 2], "output_tokens": {MAX_REQUEST_TOKENS - 1}}}',
     "'output_tokens'"),  # prompt + output over the bound
    ('{"arrival_s": 0, "tokens": [1], "output_tokens": NaN}', "'output_tokens'"),
    ('{"arrival_s": 0, "tokens": [1], "output_tokens": -1}', "'output_tokens'"),
    ('{"arrival_s": 0, "tokens": [1], "output_tokens": 2.5}', "'output_tokens'"),
    ('{"arrival_s": 0, "tokens": [1], "output_tokens": false}', "'output_tokens'"),
    ('{"arrival_s": 0, "tokens": [1], "output_tokens": "8"}', "'output_tokens'"),
    ('{"arrival_s": 0, "tokens": [1, 4294967296]}', "'tokens'"),
    ('{"arrival_s": 0, "tokens": [1, -1]}', "'tokens'"),
    ('{"arrival_s": 0, "tokens": [1, 2.0]}', "'tokens'"),
    ('{"arrival_s": 0, "tokens": "1 2"}', "'tokens'"),
    ('{"arrival_s": 0, "tokens": [1], "reply_tokens": [true]}', "'reply_tokens'"),
    ('{"arrival_s": 0, "text": "a\\ud800b"}', "'text'"),
    ('{"arrival_s": 0, "text": 5}', "'text'"),
    ('{"arrival_s": 0, "tokens": [1], "reply": "x\\udc00"}', "'reply'"),
    ('{"arrival_s": 0, "tokens": [1], "adapter": 7}', "'adapter'"),
    ('{"arrival_s": 0, "tokens": [1], "adapter": "a\\ud800"}', "'adapter'"),
    ('{"arrival_s": 0, "tokens": [1], "adapter": "' + "a" * (MAX_ADAPTER_CHARS + 1) + '"}',
     "'adapter'"),
])
def test_a_bad_replay_value_is_an_input_error_naming_line_and_field(
        tmp_path: Path, line: str, field: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(_GOOD + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_replay(path)
    assert info.value.file == f"{path}:2"
    assert info.value.reason.startswith(field), info.value.reason


def test_a_deeply_nested_line_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(_GOOD + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(InputError) as info:
        read_replay(path)
    assert info.value.file == f"{path}:2"
    assert "invalid JSON" in info.value.reason


def test_values_at_the_bounds_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([
        _GOOD,
        json.dumps({"arrival_s": MAX_DURATION_S, "tokens": [1], "adapter": "a" * MAX_ADAPTER_CHARS,
                    "output_tokens": MAX_REQUEST_TOKENS - 1}),
        json.dumps({"arrival_s": 1.7e9, "tokens": [1, 2**32 - 1], "output_tokens": 8.0}),
    ]) + "\n")
    w = read_replay(path)
    assert [r.output_tokens for r in w.requests] == [0, 8, MAX_REQUEST_TOKENS - 1]
    assert w.requests[-1].arrival_s == MAX_DURATION_S


def _simulate(path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["simulate", "--replay", str(path), "--policy", "fcfs",
                                       *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_cli_huge_output_names_the_file_not_the_options(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"arrival_s": 0, "tokens": [1,2,3], "output_tokens": 1000000000000000}\n')
    code, out = _simulate(path, "--cache", "block", "--capacity", "unlimited")
    assert code == 2
    assert f"{path}:1: 'output_tokens'" in out
    assert "--replicas" not in out and "--block-size" not in out


def test_cli_far_arrival_is_refused_not_simulated(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(_GOOD + '\n{"arrival_s": 1e300, "tokens": [1,2,3]}\n')
    code, out = _simulate(path, "--cache", "radix", "--capacity", "unlimited",
                          "--format", "json")
    assert code == 2
    assert f"{path}:2: 'arrival_s'" in out
    assert "makespan" not in out


def test_cli_pool_the_replay_sizes_is_blamed_on_the_replay(tmp_path: Path) -> None:
    """A legal but large request: with --capacity unlimited the pool is the replay's own need,
    so the refusal names the file and the request's line, not --replicas/--capacity."""
    path = tmp_path / "r.jsonl"
    path.write_text(_GOOD + '\n{"arrival_s": 1, "tokens": [1,2,3], "output_tokens": 900000000}\n')
    code, out = _simulate(path, "--cache", "block", "--capacity", "unlimited")
    assert code == 2
    assert out.startswith(f"promptcache: {path}: ")
    assert "line 2" in out and "MAX_POOL_BLOCKS" in out
    assert "Invalid value for" not in out


def test_cli_pool_the_options_size_is_still_blamed_on_the_options(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(_GOOD + "\n")
    code, out = _simulate(path, "--cache", "block", "--capacity", "1000M", "--replicas", "2")
    # a replay this small never fills 1000M: the pool is capped at its need and runs
    assert code == 0, out
    path.write_text(_GOOD + '\n{"arrival_s": 1, "tokens": [1,2,3], "output_tokens": 900000000}\n')
    code, out = _simulate(path, "--cache", "block", "--capacity", "1000M", "--replicas", "2")
    assert code == 2
    assert "--replicas / --capacity / --block-size" in out
