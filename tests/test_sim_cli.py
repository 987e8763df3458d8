"""``promptcache simulate``: text and JSON output, the plot, and exit code 2 on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache.cli import main
from promptcache.sim.cli import parse_capacity

SMALL = ["--conversations", "12", "--duration", "60"]


def test_text_table_has_a_row_per_cache_capacity_and_policy() -> None:
    result = CliRunner().invoke(main, ["simulate", *SMALL, "--capacity", "30%,unlimited"])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith(("block", "radix"))]
    assert len(rows) == 2 * 2 * 3
    assert "F(n, m) = 2P(n - m) + 2 L h d (n^2 - m^2)" in result.output
    assert "peak 989 TFLOP/s" in result.output and "MFU 0.4" in result.output
    assert any("unlimited" in r and "lpm-ageing" in r for r in rows)


def test_json_output_and_byte_capacity(tmp_path: Path) -> None:
    plot = tmp_path / "out.png"
    result = CliRunner().invoke(main, [
        "simulate", *SMALL, "--capacity", "2GiB", "--cache", "radix", "--policy", "fcfs,lpm",
        "--model", "qwen2.5-7b", "--format", "json", "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["model"]["kv_bytes_per_token"] == 57_344
    assert [r["policy"] for r in doc["results"]] == ["fcfs", "lpm"]
    assert doc["results"][0]["capacity_tokens"] == 2 * 2**30 // 57_344
    assert 0 <= doc["results"][0]["hit_rate"] <= 1
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name,reason", [
    ("out.txt", "suffix '.txt'"), ("out", "no suffix"), ("nodir/out.png", "does not exist")])
def test_a_plot_target_that_cannot_be_written_exits_2_before_the_run(
        tmp_path: Path, name: str, reason: str) -> None:
    target = tmp_path / name
    result = CliRunner().invoke(main, ["simulate", *SMALL, "--plot", str(target)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    [line] = result.output.splitlines()  # no table printed first, no traceback
    assert line.startswith(f"promptcache: {target}: ") and reason in line


def test_plot_format_follows_the_suffix(tmp_path: Path) -> None:
    plot = tmp_path / "out.svg"
    result = CliRunner().invoke(main, ["simulate", *SMALL, "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    assert b"<svg" in plot.read_bytes()[:500]


def test_replay_file(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    lines = [{"arrival_s": i * 0.5, "tokens": [*range(200), i], "output_tokens": 5}
             for i in range(6)]
    path.write_text("\n".join(json.dumps(line) for line in lines))
    result = CliRunner().invoke(main, ["simulate", "--replay", str(path), "--cache", "radix",
                                       "--capacity", "unlimited", "--policy", "fcfs",
                                       "--format", "json"])
    assert result.exit_code == 0, result.output
    (run,) = json.loads(result.output)["results"]
    assert run["requests"] == 6
    assert run["cached_tokens"] == 5 * 200  # every later request reuses the shared 200 tokens


def test_bad_replay_line_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"arrival_s": 0, "tokens": [1]}\n{"arrival_s": "soon", "tokens": [1]}\n')
    result = CliRunner().invoke(main, ["simulate", "--replay", str(path)])
    assert result.exit_code == 2
    assert f"{path}:2" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args", [
    ["--policy", "sjf"], ["--cache", "lru"], ["--capacity", "12 parsecs"], ["--capacity", "10"],
    ["--model", "gpt-9"], ["--max-running", "0"], ["--max-running", "lots"],
])
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(main, ["simulate", *SMALL, *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_parse_capacity_forms() -> None:
    assert parse_capacity("unlimited", working_set=1000, kv_bytes_per_token=10) is None
    assert parse_capacity("5%", working_set=1000, kv_bytes_per_token=10) == 50
    assert parse_capacity("1KiB", working_set=1000, kv_bytes_per_token=16) == 64
    assert parse_capacity("20k", working_set=1000, kv_bytes_per_token=16) == 20_000
    with pytest.raises(ValueError):
        parse_capacity("0.01%", working_set=1000, kv_bytes_per_token=10)


def test_replay_of_a_small_log_with_default_capacities(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A short replay log: the default capacity shares fall below one request's KV and are
    raised to the smallest capacity that admits every request (no error)."""
    import json

    from click.testing import CliRunner

    from promptcache.sim.cli import simulate_command

    log = tmp_path / "replay.jsonl"
    text = "You are a helpful assistant for Forgehouse. " * 40
    log.write_text("".join(json.dumps({"arrival_s": i * 0.5, "text": text + f" question {i}",
                                       "output_tokens": 20}) + "\n" for i in range(10)))
    out = CliRunner().invoke(simulate_command, ["--replay", str(log), "--format", "json"])
    assert out.exit_code == 0, out.output


def test_default_max_running_is_the_memory_bound_decode_batch() -> None:
    """A 70B model at batch 1 queues every request behind the last (TTFT of minutes); the
    default runs the batch a vLLM-style server would, bounded where decode stays memory-bound."""
    from promptcache.sim.cli import VLLM_MAX_NUM_SEQS
    from promptcache.sim.costs import CostModel, get_hardware, get_shape

    shape, hw = get_shape("llama-3-70b"), get_hardware("h100-sxm")
    by_hand = shape.weight_bytes * hw.peak_flops * 0.4 / (2 * shape.params * hw.hbm_bytes_per_s)
    assert CostModel(shape, hw, 0.4).memory_bound_batch() == int(by_hand) == 119
    assert VLLM_MAX_NUM_SEQS == 256
    args = ["simulate", "--conversations", "40", "--duration", "600", "--model", "llama-3-70b",
            "--cache", "radix", "--policy", "fcfs", "--capacity", "unlimited", "--format", "json"]
    default = CliRunner().invoke(main, args)
    assert default.exit_code == 0, default.output
    doc = json.loads(default.output)
    assert doc["server"]["max_running"] == 119
    batch1 = json.loads(CliRunner().invoke(main, [*args, "--max-running", "1"]).output)
    assert batch1["server"]["max_running"] == 1
    (run,) = doc["results"]
    (slow,) = batch1["results"]
    assert slow["mean_ttft_s"] > 60  # queued behind minutes of 70B decode
    assert run["mean_wait_s"] == 0 and run["mean_ttft_s"] == pytest.approx(run["mean_prefill_s"])
    assert run["p99_ttft_s"] < 2
    l4 = CostModel(get_shape("llama-3-8b"), get_hardware("l4"), 1.0)
    assert l4.memory_bound_batch() > VLLM_MAX_NUM_SEQS
    capped = CliRunner().invoke(main, [*args, "--model", "llama-3-8b", "--hardware", "l4",
                                       "--mfu", "1"])
    assert json.loads(capped.output)["server"]["max_running"] == VLLM_MAX_NUM_SEQS


def test_a_bad_replay_file_is_one_line_in_the_shared_error_format(tmp_path: Path) -> None:
    """Every command reports bad input as ``promptcache: FILE: reason`` (simulate said
    ``error: ...``)."""
    path = tmp_path / "r.jsonl"
    path.write_text("{not json\n")
    result = CliRunner().invoke(main, ["simulate", "--replay", str(path)])
    assert result.exit_code == 2
    [line] = result.output.splitlines()
    assert line.startswith(f"promptcache: {path}:1: invalid JSON"), line
