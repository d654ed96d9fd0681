"""`voicecli bench` as a user runs it, against the session's real endpoint: tiny runs, checked for the structure
of what they write (JSON, markdown, PNG charts, the latest copy) and for exact accounting under load.

No timing thresholds: the numbers themselves are measured by the real benches (results/bench/), not asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunningServer
from voicecli.cli import build_parser

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def bench(server: RunningServer, out: Path, *args: str, env: dict[str, str] | None = None,
          timeout: float = 900) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "voicecli", "--endpoint", server.http_url, "bench", *args,
               "--out", str(out), "--name", "run"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})}, check=False)
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result


def outputs(out: Path, kind: str, charts: list[str]) -> tuple[dict[str, Any], str]:
    directory = out / "run"
    for name in ["results.json", "results.md", *charts]:
        assert (directory / name).is_file(), name
        assert (out / "latest" / kind / name).read_bytes() == (directory / name).read_bytes(), name
    for chart in charts:
        assert (directory / chart).read_bytes()[:8] == PNG_MAGIC
    data = json.loads((directory / "results.json").read_text(encoding="utf-8"))
    assert data["kind"] == kind and data["name"] == "run"
    machine = data["machine"]
    for key in ("cpu_model", "cpus_usable", "python", "packages", "load_average_1_5_15", "endpoint",
                "load_average_end_1_5_15", "cpu_steal_s_during"):  # the end of the run too: steal is taken then
        assert key in machine, key
    assert machine["endpoint"]["engine"] == "onnx"
    assert machine["endpoint"]["workers"] == 2 and machine["endpoint"]["threads"] == 1
    assert machine["endpoint"]["solo_threads"] >= 1  # threads of a lone piece (and of the tts floor)
    markdown = (directory / "results.md").read_text(encoding="utf-8")
    assert "CPU steal during the run" in markdown
    return data, markdown


@pytest.mark.parametrize("command", [["bench"], ["bench", "tts"], ["bench", "e2e"], ["bench", "load"],
                                     ["bench", "turns"]])
def test_every_bench_command_has_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*command, "--help"])
    assert exited.value.code == 0
    if command != ["bench"]:
        assert "--out" in capsys.readouterr().out


def test_bench_needs_a_sub_command() -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["bench"])
    assert exited.value.code == 2


@pytest.mark.slow
def test_tts_bench_writes_every_variant_with_ratios_to_batch(server: RunningServer, tmp_path: Path) -> None:
    result = bench(server, tmp_path, "tts", "--runs", "1", "--texts", "quick")
    data, markdown = outputs(tmp_path, "tts", ["ttfa_distribution.png", "ttfa_vs_rtt.png"])
    variants = ["batch", "bidi-first-sentence", "bidi-streamed", "bidi-fast-fragment", "floor"]
    assert data["settings"]["variants"] == variants and data["settings"]["runs"] == 1
    assert [s["variant"] for s in data["samples"]] == variants  # one run: the interleaving order itself
    assert all(s["metrics"]["ttfa_ms"] > 0 for s in data["samples"])
    ttfa = {row["variant"]: row for row in data["summary"] if row["metric"] == "ttfa_ms"}
    assert set(ttfa) == set(variants)
    assert ttfa["batch"]["ratio_p50"] == 1.0
    assert all(row["n"] == 1 and row["p50"] == row["p95"] for row in ttfa.values())
    streamed = next(s for s in data["samples"] if s["variant"] == "bidi-streamed")
    assert streamed["detail"]["requests"] == 3  # every sentence of the quick paragraph, pipelined
    (headline,) = data["tables"]["headline"]
    assert headline["rtt_ms"] == 0 and headline["transport_overhead_ms_p50"] is not None
    assert headline["wire_ms_p50"] is not None
    for variant in variants:
        assert f"| {variant} |" in markdown
    assert "Against the AWS post" in markdown and "0.476" in markdown
    assert "| batch |" in result.stdout  # the table is printed too


@pytest.mark.slow
def test_e2e_bench_runs_both_modes_on_the_same_answer(server: RunningServer, tmp_path: Path) -> None:
    bench(server, tmp_path, "e2e", "--runs", "1", "--prompt", "Say hello.",
          env={"VOICECLI_LLM__MAX_TOKENS": "24", "VOICECLI_LLM__BACKEND": "local"})
    data, markdown = outputs(tmp_path, "e2e", ["first_audio_distribution.png", "first_audio_vs_rtt.png"])
    assert [s["variant"] for s in data["samples"]] == ["batch", "bidi"]
    batch, bidi = data["samples"]
    assert batch["detail"]["prompt"] == bidi["detail"]["prompt"] == "Say hello."
    assert " ".join(batch["detail"]["sentences"]) == " ".join(bidi["detail"]["sentences"])  # greedy: same answer
    for sample in data["samples"]:
        metrics = sample["metrics"]
        assert 0 < metrics["llm_ttft_ms"] <= metrics["first_byte_ms"] <= metrics["first_played_ms"]
        assert metrics["first_played_ms"] <= metrics["total_ms"]
    assert {row["metric"] for row in data["summary"]} >= {"first_played_ms", "first_byte_ms", "llm_ttft_ms"}
    assert "| bidi |" in markdown and "2.4x" in markdown


@pytest.mark.slow
def test_load_bench_accounts_for_every_request_exactly(server: RunningServer, tmp_path: Path) -> None:
    bench(server, tmp_path, "load", "--sessions", "4", "--sentences", "10", "--runs", "1")
    data, markdown = outputs(tmp_path, "load", ["load.png"])
    (row,) = data["tables"]["load"]
    assert row["sessions"] == 4 and row["requests"] == 40
    assert row["completed"] == 40 and row["lost"] == 0 and row["duplicated"] == 0
    assert row["in_order"] is True and row["exact"] is True
    assert len(data["samples"]) == 4
    assert sorted(s["detail"]["session"] for s in data["samples"]) == [0, 1, 2, 3]
    assert all(s["detail"]["problems"] == [] and s["detail"]["audio_s"] > 0 for s in data["samples"])
    assert "| 4 | 40 | 40 | 0 | 0 | yes |" in markdown
    assert row["stall_ms_p95"] >= 0 and row["first_audio_p95_ms"] > 0 and 0 <= row["sessions_stalled"] <= 4
    assert row["endpoint_cpu_cores"] > 0
    assert data["settings"]["scaling_x"] is None  # no 1-session row to compare with
