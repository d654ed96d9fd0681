"""PNG charts of bench results (matplotlib, headless Agg backend): distributions, TTFA vs RTT, load curves.

Why distributions and not just bars of medians: on a shared CPU single runs can be several times the median, and
a reader has to see that spread to judge the ratios.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voicecli.bench.report import BenchResult


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def distribution_chart(result: BenchResult, metric: str, label: str, variants: Sequence[str], path: Path) -> Path:
    """One panel per injected RTT: a box per variant with every run's value drawn on top."""
    plt = _pyplot()
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
