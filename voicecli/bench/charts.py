"""PNG charts of bench results (matplotlib, headless Agg backend): distributions, TTFA vs RTT, load curves, the
spoken turn's waterfall.

Why distributions and not just bars of medians: on a shared CPU single runs can be several times the median, and
a reader has to see that spread to judge the ratios.

matplotlib is the optional `bench` extra. Without it each chart function returns its path without drawing, which a
bench says once before it starts (``missing_note``): a bench runs for minutes, and must not end in a traceback after
its work is done.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voicecli.bench.report import BenchResult

INSTALL_CHARTS = "pip install -e '.[bench]'"
"""How to get matplotlib: the `bench` extra of pyproject.toml."""


def _pyplot() -> Any | None:
    """matplotlib.pyplot on the headless Agg backend, or None without the `bench` extra (the one place it is
    imported)."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def missing_note() -> str | None:
    """One line to print before a bench starts when its charts will be skipped; None when they can be drawn."""
    if _pyplot() is not None:
        return None
    return f"charts skipped: matplotlib is not installed ({INSTALL_CHARTS}); results.json and results.md are written"


def distribution_chart(result: BenchResult, metric: str, label: str, variants: Sequence[str], path: Path) -> Path:
    """One panel per injected RTT: a box per variant with every run's value drawn on top."""
    plt = _pyplot()
    if plt is None:
        return path  # not drawn: missing_note said so before the bench started
    rtts = sorted({s.rtt_ms for s in result.samples})
    fig, axes = plt.subplots(1, len(rtts), figsize=(5.5 * len(rtts), 4.5), squeeze=False, sharey=True)
    for ax, rtt in zip(axes[0], rtts, strict=True):
        shown = [v for v in variants if any(s.variant == v and s.rtt_ms == rtt for s in result.samples)]
        data = [[x for s in result.samples if s.variant == v and s.rtt_ms == rtt
                 and (x := s.metrics.get(metric)) is not None] for v in shown]
        ax.boxplot([d or [float("nan")] for d in data], tick_labels=shown, showfliers=False)
        for position, values in enumerate(data, start=1):
            offsets = [position + 0.12 * ((i % 5) - 2) / 2 for i in range(len(values))]
            ax.scatter(offsets, values, s=14, alpha=0.7, zorder=3)
        ax.set_title(f"injected RTT {rtt:g} ms")
        ax.set_ylabel(f"{label} (ms)")
        ax.tick_params(axis="x", labelrotation=30)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"voicecli bench {result.kind}: {label} per variant")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def rtt_chart(result: BenchResult, metric: str, label: str, variants: Sequence[str], path: Path) -> Path:
    """p50 per variant against injected RTT, with a bar up to p95."""
    plt = _pyplot()
    if plt is None:
        return path  # not drawn: missing_note said so before the bench started
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for variant in variants:
        rows = sorted((r for r in result.summary if r.variant == variant and r.metric == metric),
                      key=lambda r: r.rtt_ms)
        if not rows:
            continue
        xs = [r.rtt_ms for r in rows]
        ax.errorbar(xs, [r.p50 for r in rows], yerr=[[0.0] * len(rows), [r.p95 - r.p50 for r in rows]],
                    marker="o", capsize=4, label=variant)
    values = [r.p50 for r in result.summary if r.metric == metric and r.p50 > 0]
    if values and max(values) / min(values) > 10:
        ax.set_yscale("log")  # batch can be 10x the bidi variants on a CPU: keep both readable
    ax.set_xlabel("injected round-trip time (ms)")
    ax.set_ylabel(f"{label} (ms): p50, bar to p95")
    ax.set_title(f"voicecli bench {result.kind}: {label} vs network distance")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def load_chart(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Time to first audio (p50, p95) and delivered audio rate against concurrent sessions."""
    plt = _pyplot()
    if plt is None:
        return path  # not drawn: missing_note said so before the bench started
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sessions = [int(r["sessions"]) for r in rows]
    ax.plot(sessions, [r["first_audio_p50_ms"] for r in rows], marker="o", label="first audio p50")
    ax.plot(sessions, [r["first_audio_p95_ms"] for r in rows], marker="o", linestyle="--", label="first audio p95")
    ax.set_xlabel("concurrent WebSocket sessions")
    ax.set_ylabel("time to first audio (ms)")
    ax.set_xticks(sessions)
    ax.grid(alpha=0.3)
    rate = ax.twinx()
    rate.plot(sessions, [r["audio_rate_x"] for r in rows], marker="s", color="tab:green",
              label="audio produced per wall second")
    rate.axhline(1.0, color="tab:green", alpha=0.3, linestyle=":")
    rate.set_ylabel("audio seconds per wall second (all sessions)")
    handles = ax.get_legend_handles_labels()[0] + rate.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize=8, loc="upper left")
    ax.set_title("voicecli bench load: first audio and throughput vs sessions")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def waterfall_chart(by_mode: dict[str, dict[str, Any]], stages: Sequence[str], path: Path) -> Path:
    """Per mode, the median time of each stage from speech end as a waterfall, and the felt latency below it.

    Each stage's bar runs from the previous stage's median to its own, so the widest bar is where the time goes;
    the felt latency (measured in the audio) is drawn from 0 with a whisker to its p95, to compare with the app's
    own first_audio_played.
    """
    plt = _pyplot()
    if plt is None:
        return path  # not drawn: missing_note said so before the bench started
    modes = [m for m, row in by_mode.items() if row.get("felt_latency_p50_ms") is not None
             or row.get("timeline_marks_p50_ms")]
    fig, axes = plt.subplots(len(modes) or 1, 1, figsize=(9, 1.2 + 0.55 * (len(stages) + 1) * max(1, len(modes))),
                             squeeze=False, sharex=True)
    for ax, mode in zip(axes[:, 0], modes, strict=False):
        row = by_mode[mode]
        marks: dict[str, float] = row.get("timeline_marks_p50_ms", {})
        labels: list[str] = []
        previous = 0.0
        for y, stage in enumerate(stages):
            labels.append(stage)
            if stage not in marks:
                continue
            end = marks[stage]
            ax.barh(y, max(end - previous, 0.0), left=min(previous, end), color="tab:blue", alpha=0.75)
            ax.text(end, y, f" {end:,.0f}", va="center", fontsize=8)
            previous = end
        felt, felt95 = row.get("felt_latency_p50_ms"), row.get("felt_latency_p95_ms")
        labels.append("felt latency (audio)")
        if felt is not None:
            y = len(stages)
            ax.barh(y, felt, color="tab:red", alpha=0.8,
                    xerr=[[0.0], [max((felt95 or felt) - felt, 0.0)]], capsize=4)
            ax.text(felt, y, f" p50 {felt:,.0f}" + (f" / p95 {felt95:,.0f}" if felt95 is not None else ""),
                    va="bottom", fontsize=8)
        drawn = [marks[s] for s in stages if s in marks] + [felt95 or 0.0, felt or 0.0, 1.0]
        ax.set_xlim(right=1.3 * max(drawn))  # room for the labels
        ax.set_yticks(range(len(labels)), labels)
        ax.invert_yaxis()
        ax.axvline(0.0, color="black", linewidth=0.8)
        ax.set_title(f"{mode}: {row.get('turns', 0)} questions, {row.get('premature_answers', 0)} premature",
                     fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("ms after the end of the question's speech (medians)")
    fig.suptitle("voicecli bench turns: where a spoken turn's time goes")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def cutoff_curve_chart(name: str, by_detector: dict[str, dict[str, Any]], targets: Sequence[float],
                       path: Path) -> Path:
    """End of turn (bench endpointing): per detector, the p50 wait after real ends against the rate of cutting
    speakers off at mid-sentence silences, as steps through its best points; dotted lines at the target rates."""
    plt = _pyplot()
    if plt is None:
        return path
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for detector, row in by_detector.items():
        xs = [p["cutoff_rate"] * 100 for p in row["curve"]]
        ys = [p["wait_p50_ms"] for p in row["curve"]]
        ax.step(xs, ys, where="post", marker="o", markersize=3, label=detector)
    for target in targets:
        ax.axvline(target * 100, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("cut-off rate (% of mid-sentence silences)")
    ax.set_ylabel("wait after the real end, p50 (ms)")
    ax.set_title(name)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
