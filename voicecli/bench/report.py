"""Bench results: raw samples -> p50/p95 per variant and ratios to the baseline, as JSON and a markdown table.

Why keep every raw sample in the JSON: medians of a noisy shared machine are only trustworthy when the spread is
visible, and a later reader may want a statistic we did not compute. Ratios are taken between variants measured
side by side (interleaved run by run), because on a machine shared with other work only ratios are stable.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import shutil
import statistics
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from voicecli.converse.timeline import summarize
from voicecli.errors import UserError

LATEST = "latest"
"""results/bench/latest/<kind>/ always holds a copy of the most recent run of each bench."""


@dataclass(frozen=True)
class Metric:
    key: str
    label: str


@dataclass
class Sample:
    """One measurement: a variant at an injected RTT in one run; metrics in milliseconds (None: not reached)."""

    variant: str
    rtt_ms: float
    run: int
    metrics: dict[str, float | None]
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SummaryRow:
    rtt_ms: float
    variant: str
    metric: str
    n: int
    p50: float
    p95: float
    mean: float
    ratio_p50: float | None
    """variant p50 / baseline p50 at the same RTT (the post's 0.476 is this ratio, on means)."""
    ratio_mean: float | None


@dataclass
class BenchResult:
    kind: str
    name: str
    settings: dict[str, Any]
    machine: dict[str, Any]
    samples: list[Sample] = field(default_factory=list)
    summary: list[SummaryRow] = field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Extra tabular results (the load bench's per-N rows)."""
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    """Bench-specific top-level sections of results.json (the turns bench's summary_by_mode)."""
    created: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "created": self.created,
            "settings": self.settings,
            "machine": self.machine,
            "notes": self.notes,
            "summary": [_rounded(asdict(row)) for row in self.summary],
            "tables": self.tables,
            "samples": [_rounded(asdict(sample)) for sample in self.samples],
            **{key: _rounded(value) for key, value in self.extra.items()},
        }

    def row(self, variant: str, metric: str, rtt_ms: float) -> SummaryRow | None:
        return next((r for r in self.summary if (r.variant, r.metric, r.rtt_ms) == (variant, metric, rtt_ms)), None)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def default_name(kind: str) -> str:
    return f"{kind}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def summarize_samples(samples: Sequence[Sample], metrics: Sequence[Metric], variants: Sequence[str],
                      baseline: str) -> list[SummaryRow]:
    """p50/p95/mean per (RTT, variant, metric) over the samples that reached the metric, plus ratios to baseline."""
    rtts = sorted({s.rtt_ms for s in samples})
    stats: dict[tuple[float, str, str], tuple[int, float, float, float]] = {}
    for rtt in rtts:
        for variant in variants:
            for metric in metrics:
                values = [v for s in samples if s.rtt_ms == rtt and s.variant == variant
                          and (v := s.metrics.get(metric.key)) is not None]
                pct = summarize(values)
                if pct is not None:
                    stats[(rtt, variant, metric.key)] = (pct.count, pct.p50, pct.p95, statistics.fmean(values))
    rows: list[SummaryRow] = []
    for (rtt, variant, key), (n, p50, p95, mean) in stats.items():
        base = stats.get((rtt, baseline, key))
        rows.append(SummaryRow(rtt, variant, key, n, p50, p95, mean,
                               p50 / base[1] if base and base[1] > 0 else None,
                               mean / base[3] if base and base[3] > 0 else None))
    return rows


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def variant_table(result: BenchResult, variants: Sequence[str], headline: Metric, others: Sequence[Metric],
                  labels: dict[str, str] | None = None) -> str:
    """One markdown table per injected RTT: the headline metric's p50/p95 and ratios, other metrics' p50."""
    labels = labels or {}
    lines: list[str] = []
    for rtt in sorted({r.rtt_ms for r in result.summary}):
        lines.append(f"**Injected RTT {rtt:g} ms** (ms; ratio = variant p50 / batch p50; speed-up = its inverse)")
        lines.append("")
        header = ["variant", "n", f"{headline.label} p50", "p95", "mean", "ratio (p50)", "speed-up"]
        header += [f"{m.label} p50" for m in others]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for variant in variants:
            row = result.row(variant, headline.key, rtt)
            if row is None:
                continue
            speedup = f"{1 / row.ratio_p50:.2f}x" if row.ratio_p50 else "–"
            cells = [labels.get(variant, variant), str(row.n), _ms(row.p50), _ms(row.p95), _ms(row.mean),
                     _ratio(row.ratio_p50), speedup]
            for metric in others:
                other = result.row(variant, metric.key, rtt)
                cells.append(_ms(None if other is None else other.p50))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def machine_line(machine: dict[str, Any]) -> str:
    endpoint = machine.get("endpoint", {})
    return (f"{machine.get('cpu_model')} ({machine.get('cpus_usable')} usable cores, load "
            f"{'/'.join(str(x) for x in machine.get('load_average_1_5_15', []))}), Python {machine.get('python')}, "
            f"engine {endpoint.get('engine', '?')} on {endpoint.get('device', '?')} with "
            f"{endpoint.get('workers', 1)} worker(s) x {endpoint.get('threads', '?')} thread(s), "
            f"commit {machine.get('git_commit')}{end_note(machine)}")


def end_note(machine: dict[str, Any]) -> str:
    """"; load at the end L; CPU steal during the run X s", as far as they were recorded (bench/machine.py's
    finish_machine_info; results saved before it have neither)."""
    note = ""
    end = machine.get("load_average_end_1_5_15")
    if end:
        note += f"; load at the end {'/'.join(str(x) for x in end)}"
    steal = machine.get("cpu_steal_s_during")
    if isinstance(steal, int | float):
        note += (f"; CPU steal during the run {steal:.1f} s (time the VM's host took: runs with more are slower "
                 "for it)")
    return note


ChartWriter = Callable[[BenchResult, Path], list[Path]]


def write_result(result: BenchResult, markdown: str, out_root: Path, charts: ChartWriter | None = None) -> Path:
    """Write results.json, results.md and the charts to out_root/<name>/, then copy them to out_root/latest/<kind>/."""
    directory = out_root / result.name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "results.json").write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    (directory / "results.md").write_text(markdown, encoding="utf-8")
    if charts is not None:
        charts(result, directory)
    latest = out_root / LATEST / result.kind
    if latest.exists():
        shutil.rmtree(latest)
    shutil.copytree(directory, latest)
    return directory


def run_bench(
    bench: Coroutine[Any, Any, BenchResult],
    out_root: Path,
    render: Callable[[BenchResult], str],
    charts: ChartWriter,
    errors: tuple[type[Exception], ...],
) -> BenchResult:
    """Run one benchmark, turn its expected failures into one-line CLI errors, then write and print its report."""

    try:
        result = asyncio.run(bench)
    except errors as exc:
        raise UserError(str(exc)) from exc
    markdown = render(result)
    directory = write_result(result, markdown, out_root, charts)
    print(markdown)
    print(f"results: {directory} (and {out_root / LATEST / result.kind})")
    return result
