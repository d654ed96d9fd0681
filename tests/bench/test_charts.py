"""Charts without matplotlib (the optional `bench` extra): a bench says so in one line before it starts and writes
everything else, instead of failing at the chart step after minutes of work."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from voicecli.bench import charts, e2e, load, tts, turns
from voicecli.bench.report import BenchResult, write_result
from voicecli.cli import build_parser
from voicecli.config import Config


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the `bench` extra were not installed: importing matplotlib raises ImportError."""
    for name in [name for name in sys.modules if name == "matplotlib" or name.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def test_no_note_when_matplotlib_is_installed() -> None:
    pytest.importorskip("matplotlib")
    assert charts.missing_note() is None


@pytest.mark.usefixtures("no_matplotlib")
def test_the_note_is_one_line_that_says_how_to_get_the_charts() -> None:
    note = charts.missing_note()
    assert note is not None and "\n" not in note
    assert "matplotlib" in note and "pip install -e '.[bench]'" in note


@pytest.mark.usefixtures("no_matplotlib")
def test_every_bench_writes_its_results_without_charts(tmp_path: Path) -> None:
    for bench in (tts, e2e, load, turns):
        result = BenchResult(bench.__name__.rsplit(".", 1)[-1], "run", {}, {}, tables={"load": []},
                             extra={"summary_by_mode": {}})
        directory = write_result(result, "# results\n", tmp_path, bench.charts)
        assert sorted(path.name for path in directory.iterdir()) == ["results.json", "results.md"]
        assert json.loads((directory / "results.json").read_text(encoding="utf-8"))["kind"] == result.kind


@pytest.mark.usefixtures("no_matplotlib")
@pytest.mark.parametrize("bench", ["tts", "e2e", "load", "turns"])
def test_the_note_comes_before_the_bench_starts(
    bench: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    said_before: list[str] = []

    def run(args: argparse.Namespace, config: Config) -> int:
        said_before.append(capsys.readouterr().err)
        return 0

    monkeypatch.setattr(f"voicecli.bench.{bench}.run", run)
    args = build_parser().parse_args(["bench", bench])
    assert args.handler(args, Config.load(env={}, config_path=None)) == 0
    (err,) = said_before
    assert err.startswith("charts skipped: matplotlib is not installed") and err.count("\n") == 1
