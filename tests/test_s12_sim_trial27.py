"""Trial 27 (capacity planner): simulate's figures checked by hand on a small replay, and the
fixes: --adapters no longer changes the synthetic conversations, an empty --cache / --policy
and synthetic-only options with --replay are usage errors, a capacity of the largest request's
KV in whole blocks is accepted, and --plot with --capacity unlimited alone draws."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache.cli import main
from promptcache.sim.simulator import SimConfig, simulate
from promptcache.sim.workload import WorkloadConfig, generate_workload, read_replay

# A: 100 tokens; B shares A's first 64 (4 blocks of 16); C extends A to 120 tokens.
_A = list(range(100))
_B = list(range(64)) + list(range(1000, 1036))
_C = list(range(100)) + list(range(200, 220))


def _replay(tmp_path: Path) -> Path:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"arrival_s": t, "tokens": toks}) + "\n"
                            for t, toks in ((0, _A), (10, _B), (20, _C))))
    return path


def _results(output: str) -> list[tuple[str, int | None, int, float, int]]:
    return [(r["cache"], r["capacity_tokens"], r["cached_tokens"], r["hit_rate"],
             r["evicted_tokens"]) for r in json.loads(output)["results"]]


def test_replay_hit_rates_by_hand(tmp_path: Path) -> None:
    """Unlimited: block reads B's 4 blocks (64) and A's 6 full blocks for C (96): 160 / 320;
    radix reads 64 and 100: 164 / 320. At 128 tokens (8 blocks) LRU evicts A's block 5 while
    admitting B (A's tail first) and B's two blocks for C: C reads 80, 48 tokens evicted."""
    result = CliRunner().invoke(main, [
        "simulate", "--replay", str(_replay(tmp_path)), "--capacity", "128,unlimited",
        "--policy", "fcfs", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert _results(result.output) == [
        ("block", 128, 144, 0.45, 48), ("block", None, 160, 0.5, 0),
        ("radix", 128, 156, 0.4875, 36), ("radix", None, 164, 0.5125, 0)]


def test_capacity_of_the_largest_request_in_whole_blocks_is_accepted(tmp_path: Path) -> None:
    """C needs 120 tokens = 8 blocks of 16 = 128 tokens; 128 was refused as below '136 tokens
    incl. one block of rounding'. 127 (7 blocks) is still refused; radix alone takes 120."""
    replay = str(_replay(tmp_path))
    ok = CliRunner().invoke(main, ["simulate", "--replay", replay, "--capacity", "128",
                                   "--policy", "fcfs"])
    assert ok.exit_code == 0, ok.output
    low = CliRunner().invoke(main, ["simulate", "--replay", replay, "--capacity", "127",
                                    "--policy", "fcfs"])
    assert low.exit_code == 2 and "below the largest request's KV (128 tokens" in low.output
    radix = CliRunner().invoke(main, ["simulate", "--replay", replay, "--capacity", "120",
                                      "--cache", "radix", "--policy", "fcfs"])
    assert radix.exit_code == 0, radix.output
    # the API agrees: the block cache runs at 128 tokens
    workload = read_replay(replay)
    assert simulate(workload, SimConfig(capacity_tokens=128)).cached_tokens == 144


def test_adapters_change_only_the_labels() -> None:
    """--adapters 8 drew the adapter from the workload's generator, so every later draw moved:
    60 conversations were 247 requests with one adapter and 255 with eight, and the hit-rate
    drop mixed the split cache with a different workload."""
    one = generate_workload(WorkloadConfig(conversations=60), seed=0)
    eight = generate_workload(WorkloadConfig(conversations=60, adapters=8), seed=0)
    assert len(one.requests) == len(eight.requests) == 247
    for a, b in zip(one.requests, eight.requests, strict=True):
        assert (a.arrival_s, a.think_s, a.prompt_len, a.insert_len, a.stream) == (
            b.arrival_s, b.think_s, b.prompt_len, b.insert_len, b.stream)
    assert {r.adapter for r in eight.requests} == {f"adapter-{i}" for i in range(8)}
    assert {r.adapter for r in one.requests} == {""}


@pytest.mark.parametrize("option", ["--cache", "--policy"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_empty_cache_or_policy_is_a_usage_error(tmp_path: Path, option: str, fmt: str) -> None:
    """Text: a TypeError traceback from the empty table; JSON: exit 0 with no results."""
    result = CliRunner().invoke(main, ["simulate", "--replay", str(_replay(tmp_path)),
                                       option, " , ", "--format", fmt])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert f"Invalid value for {option}: no " in result.output


@pytest.mark.parametrize("args,named", [
    (["--adapters", "8"], "--adapters"),
    (["--conversations", "5", "--duration", "10"], "--conversations, --duration"),
])
def test_synthetic_options_with_replay_are_a_usage_error(tmp_path: Path, args: list[str],
                                                         named: str) -> None:
    """They were silently ignored: '--replay r.jsonl --adapters 8' simulated one adapter."""
    result = CliRunner().invoke(main, ["simulate", "--replay", str(_replay(tmp_path)), *args])
    assert result.exit_code == 2, result.output
    assert f"{named} shape the synthetic workload and do nothing with --replay" in result.output


def test_plot_with_unlimited_capacity_only(tmp_path: Path) -> None:
    """A log capacity axis with no finite capacity raised ValueError from matplotlib."""
    pytest.importorskip("matplotlib")
    plot = tmp_path / "unlimited.png"
    result = CliRunner().invoke(main, ["simulate", "--replay", str(_replay(tmp_path)),
                                       "--capacity", "unlimited", "--policy", "fcfs",
                                       "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_identical_policy_rows_get_a_note(tmp_path: Path) -> None:
    """Three requests 10 s apart never wait together: fcfs, lpm and lpm-ageing print the same
    rows (as on the default 400-conversation table), which read as 'scheduling does not
    matter'; a note now says why. A run where the policies differ has no note."""
    replay = str(_replay(tmp_path))
    same = CliRunner().invoke(main, ["simulate", "--replay", replay, "--capacity", "unlimited"])
    assert same.exit_code == 0, same.output
    assert "note: every policy gave the same figures" in same.output
    busy = CliRunner().invoke(main, ["simulate", "--conversations", "60", "--duration", "20",
                                     "--max-running", "2", "--capacity", "unlimited",
                                     "--cache", "radix"])
    assert busy.exit_code == 0, busy.output
    rows = [line for line in busy.output.splitlines() if line.startswith("radix")]
    assert len(set(line.split(None, 4)[4] for line in rows)) > 1  # the policies differ
    assert "note: every policy" not in busy.output
