"""`voicecli bench load`: N concurrent WebSocket sessions, each pipelining M sentences, with exact accounting.

Why: one endpoint serves many chat sessions, and its scheduler shares its inference workers between them (first
pieces of turns first, then the session closest to running dry). This measures what a user of one session then
waits for its first audio as N grows, how long a real-time listener of each session would sit in silence once its
answer has started (stall time, `voicecli.wire.playout`), how much audio the machine produces per wall-clock second and
how much CPU the endpoint used for it, and checks that under load every request completes exactly once and in order
per session (nothing lost, nothing duplicated, no audio of one request inside another's).

`scaling_x` is the throughput at the largest N over the throughput of one session, measured in the same run:
the ratio survives a machine that is busier or quieter than usual, where the absolute figures do not.
"Saturated" is reported as the smallest N at which the sessions together get less than real time each (the
audio produced per wall second divided by N falls below 1.0).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voicecli.bench.charts import load_chart
from voicecli.bench.machine import finish_machine_info, machine_info
from voicecli.bench.measure import MeasureError, Trace, check_exact, speak
from voicecli.bench.progress import BenchProgress
from voicecli.bench.report import BenchResult, Sample, default_name, machine_line, run_bench
from voicecli.bench.target import BenchError, Target, endpoint_cpu_s, endpoint_stats, parse_counts, resolve_target
from voicecli.bench.texts import LOAD_SENTENCES
from voicecli.config import Config
from voicecli.converse.timeline import summarize
from voicecli.errors import UserError
from voicecli.tts.base import SpeechRequest, TransportError
from voicecli.tts.websocket import WebSocketTransport


@dataclass
class SessionOutcome:
    session: int
    trace: Trace
    problems: list[str]


@dataclass
class LoadRound:
    """One round: N sessions started together."""

    sessions: int
    run: int
    wall_s: float
    outcomes: list[SessionOutcome] = field(default_factory=list)
    endpoint_cpu_s: float | None = None
    """CPU seconds the endpoint process used during the round (None: it does not report them)."""

    @property
    def requests(self) -> int:
        return sum(len(o.trace.requests) for o in self.outcomes)

    @property
    def completed(self) -> int:
        return sum(1 for o in self.outcomes for r in o.trace.requests if r.dones >= 1)

    @property
    def exact(self) -> bool:
        return all(not o.problems for o in self.outcomes)


def session_texts(session: int, sentences: int, pool: tuple[str, ...] = LOAD_SENTENCES) -> list[str]:
    return [pool[(session + i) % len(pool)] for i in range(sentences)]


async def run_round(url: str, token: str, sessions: int, sentences: int, run: int, voice: str,
                    pool: tuple[str, ...] = LOAD_SENTENCES) -> LoadRound:
    """Connect N sessions, then start them all at once; each sends its M sentences back to back."""
    transports = [WebSocketTransport(url, token, connect_timeout_s=60.0) for _ in range(sessions)]
    async with contextlib.AsyncExitStack() as stack:
        # Connected side by side; every connect is awaited before an error goes on, so none is left half-open.
        entered = await asyncio.gather(*(stack.enter_async_context(t) for t in transports), return_exceptions=True)
        for failure in entered:
            if isinstance(failure, BaseException):
                raise failure
        cpu_before = await endpoint_cpu_s(url)
        started = time.monotonic()

        async def one(index: int, transport: WebSocketTransport) -> SessionOutcome:
            requests = [SpeechRequest(f"s{index}-r{i}", text, voice, 1.0, "mp3")
                        for i, text in enumerate(session_texts(index, sentences, pool))]
            trace = await speak(transport, requests, started=started)
            return SessionOutcome(index, trace, check_exact(trace))

        outcomes = await asyncio.gather(*(one(i, t) for i, t in enumerate(transports)))
        wall = time.monotonic() - started
        cpu_after = await endpoint_cpu_s(url)
        cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
        return LoadRound(sessions, run, wall, list(outcomes), cpu)


def summarize_rounds(rounds: list[LoadRound], cpus: int | None = None) -> list[dict[str, Any]]:
    """One row per N: accounting totals, first audio and stall p50/p95 over sessions, gaps, throughput, CPU.

    `cpus`: the endpoint's usable cores, for its CPU utilisation (None: only the cores' worth it used).
    """
    rows: list[dict[str, Any]] = []
    for n in sorted({r.sessions for r in rounds}):
        group = [r for r in rounds if r.sessions == n]
        firsts = [ms for r in group for o in r.outcomes if (ms := o.trace.ttfa_ms) is not None]
        listeners = [o.trace.playout() for r in group for o in r.outcomes]
        stall = summarize([p.stalled_s * 1000 for p in listeners])
        cpu_rounds = [r for r in group if r.endpoint_cpu_s is not None]
        cores_used = (sum(r.endpoint_cpu_s or 0.0 for r in cpu_rounds) / sum(r.wall_s for r in cpu_rounds)
                      if cpu_rounds else None)
        gaps = [(b.first_byte - a.done) * 1000 for r in group for o in r.outcomes
                for a, b in itertools.pairwise(o.trace.requests)
                if a.done is not None and b.first_byte is not None]
        audio = sum(o.trace.audio_s for r in group for o in r.outcomes)
        wall = sum(r.wall_s for r in group)
        first = summarize(firsts)
        gap = summarize(gaps)
        rate = audio / wall if wall else 0.0
        rows.append({
            "sessions": n,
            "rounds": len(group),
            "requests": sum(r.requests for r in group),
            "completed": sum(r.completed for r in group),
            "lost": sum(1 for r in group for o in r.outcomes for q in o.trace.requests if q.dones == 0),
            "duplicated": sum(1 for r in group for o in r.outcomes for q in o.trace.requests
                              if q.starts > 1 or q.dones > 1),
            "in_order": all(o.trace.done_order == [q.request_id for q in o.trace.requests]
                            for r in group for o in r.outcomes),
            "exact": all(r.exact for r in group),
            "first_audio_p50_ms": first.p50 if first else None,
            "first_audio_p95_ms": first.p95 if first else None,
            "gap_p50_ms": gap.p50 if gap else None,
            "gap_p95_ms": gap.p95 if gap else None,
            "stall_ms_p50": stall.p50 if stall else None,
            "stall_ms_p95": stall.p95 if stall else None,
            "stall_ms_max": max(p.stalled_s for p in listeners) * 1000 if listeners else None,
            "sessions_stalled": sum(1 for p in listeners if p.stalls),
            "endpoint_cpu_cores": cores_used,
            "endpoint_cpu_util": cores_used / cpus if cores_used is not None and cpus else None,
            "wall_s": wall / len(group),
            "audio_s": audio / len(group),
            "audio_rate_x": rate,
            "per_session_rate_x": rate / n,
        })
    return rows


def scaling(rows: list[dict[str, Any]]) -> tuple[int, float] | None:
    """(N, throughput at the largest N / throughput of 1 session) from the same run; None without both rows."""
    single = next((r for r in rows if r["sessions"] == 1), None)
    top = rows[-1] if rows else None
    if single is None or top is None or top is single or not single["audio_rate_x"]:
        return None
    return int(top["sessions"]), top["audio_rate_x"] / single["audio_rate_x"]


def saturation(rows: list[dict[str, Any]]) -> int | None:
    """The smallest N whose sessions each got audio slower than real time, None if none did."""
    return next((int(r["sessions"]) for r in rows if r["per_session_rate_x"] < 1.0), None)


def throughput_plateau(rows: list[dict[str, Any]], gain: float = 0.10) -> int | None:
    """The smallest measured N after which the next measured N adds less than `gain` (10%) to total audio/s."""
    for current, following in itertools.pairwise(rows):
        if following["audio_rate_x"] < current["audio_rate_x"] * (1 + gain):
            return int(current["sessions"])
    return None


def render_markdown(result: BenchResult) -> str:
    rows = result.tables["load"]
    settings = result.settings
    lines = [
        f"# voicecli bench load: {result.name}",
        "",
        f"Measured {result.created} on {machine_line(result.machine)}.",
        f"Each session pipelines {settings['sentences']} short sentences on its own WebSocket; all sessions start "
        f"together; {settings['runs']} round(s) per N.",
        "",
        "| sessions | requests | completed | lost | duplicated | in order | first audio p50 | p95 | "
        "stall p50 | p95 | sessions stalled | gap p50 | p95 | audio/s (all) | per session | endpoint CPU |",
        "|---:|---:|---:|---:|---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def ms(value: float | None) -> str:
        return "–" if value is None else f"{value:,.0f}"

    for r in rows:
        cpu = ("–" if r.get("endpoint_cpu_cores") is None else
               f"{r['endpoint_cpu_cores']:.2f} cores" + (f" ({r['endpoint_cpu_util']:.0%})"
                                                         if r.get("endpoint_cpu_util") is not None else ""))
        lines.append(f"| {r['sessions']} | {r['requests']} | {r['completed']} | {r['lost']} | {r['duplicated']} | "
                     f"{'yes' if r['in_order'] else 'NO'} | {ms(r['first_audio_p50_ms'])} | "
                     f"{ms(r['first_audio_p95_ms'])} | {ms(r['stall_ms_p50'])} | {ms(r['stall_ms_p95'])} | "
                     f"{r['sessions_stalled']}/{r['sessions'] * r['rounds']} | {ms(r['gap_p50_ms'])} | "
                     f"{ms(r['gap_p95_ms'])} | {r['audio_rate_x']:.2f}x | {r['per_session_rate_x']:.2f}x | {cpu} |")
    sat = saturation(rows)
    plateau = throughput_plateau(rows)
    scaled = scaling(rows)
    lines += [
        "",
        "first audio: from the common start to the session's first audio byte (ms). stall: the time a listener "
        "playing each session in real time from its first audio would sit in silence waiting for more, summed over "
        "the session (ms). gap: from one sentence's last audio byte to the next one's first (ms). audio/s: "
        "seconds of speech produced per wall-clock second, all sessions together; per session: that divided by N. "
        "endpoint CPU: the endpoint process's CPU time over the round's wall time (and as a share of its usable "
        "cores).",
        "",
        (f"Scaling: {scaled[0]} sessions produced {scaled[1]:.2f}x the audio per second of one session "
         f"(`scaling_x`)." if scaled else "Scaling: needs a 1-session row and a larger one."),
        "",
        (f"Saturation: from {sat} concurrent session(s) on, each session gets less than real-time audio (a "
         "listener would hear gaps between sentences)." if sat else
         "Saturation: every N measured kept each session at or above real time."),
        "",
        (f"Throughput: adding sessions beyond {plateau} adds less than 10% audio per second." if plateau else
         "Throughput: still growing by 10% or more at the largest N measured."),
        "",
        *[f"- {note}" for note in result.notes],
        "",
        "![load](load.png)",
        "",
    ]
    return "\n".join(lines)


def charts(result: BenchResult, directory: Path) -> list[Path]:
    return [load_chart(result.tables["load"], directory / "load.png")]


def build_result(name: str, rounds: list[LoadRound], sentences: int, runs: int, machine: dict[str, Any],
                 target: Target, voice: str) -> BenchResult:
    endpoint = machine.get("endpoint", {})
    rows = summarize_rounds(rounds, endpoint.get("cpus"))
    scaled = scaling(rows)
    samples = [Sample(f"sessions={r.sessions}", 0.0, r.run, {"first_audio_ms": o.trace.ttfa_ms,
                                                             "total_ms": o.trace.total_ms},
                      {"session": o.session, "problems": o.problems, "audio_s": round(o.trace.audio_s, 3)})
               for r in rounds for o in r.outcomes]
    result = BenchResult(
        kind="load", name=name,
        settings={"sessions": sorted({r.sessions for r in rounds}), "sentences": sentences, "runs": runs,
                  "voice": voice, "endpoint": target.url, "saturates_at": saturation(rows),
                  "throughput_plateau_at": throughput_plateau(rows),
                  "scaling_x": None if scaled is None else round(scaled[1], 3),
                  "scaling_sessions": None if scaled is None else scaled[0]},
        machine=machine, samples=samples)
    result.tables["load"] = rows
    result.notes = [
        f"The endpoint ran {endpoint.get('workers', '?')} inference worker(s) of {endpoint.get('threads', '?')} "
        "thread(s) each; one session has one inference running at a time, so one session uses at most one worker "
        "and N sessions share min(N, workers). First pieces of turns go first, then the session whose listener has "
        "the least audio buffered.",
        "The load averages above (before the run, and at its end) count the bench itself and the endpoint.",
    ]
    return result


async def _bench(args: argparse.Namespace, config: Config) -> BenchResult:
    counts = parse_counts(args.sessions, "1,2,4,8", "--sessions")
    voice = config.tts.voice
    with BenchProgress(len(counts) * args.runs, "bench load") as bar:
        target = await resolve_target(config, bar.note)
        try:
            machine = machine_info(await endpoint_stats(target))
            rounds: list[LoadRound] = []
            for run in range(args.runs):
                for n in counts:
                    bar.describe(f"round {run + 1}/{args.runs}, {n} session(s) x {args.sentences} sentences")
                    rounds.append(await run_round(target.url, target.token, n, args.sentences, run, voice))
                    bar.step()
            finish_machine_info(machine)
        finally:
            target.close()
    return build_result(args.name or default_name("load"), rounds, args.sentences, args.runs, machine, target,
                        voice)


def run(args: argparse.Namespace, config: Config) -> int:
    from voicecli.tts.local_endpoint import EndpointStartError

    if args.runs < 1 or args.sentences < 1:
        raise UserError("--runs and --sentences must be at least 1")
    result = run_bench(_bench(args, config), Path(args.out), render_markdown, charts,
                       (BenchError, TransportError, MeasureError, EndpointStartError))
    bad = [r for r in result.tables["load"] if not r["exact"]]
    if bad:
        print(f"voicecli: error: accounting failed for N={', '.join(str(r['sessions']) for r in bad)}; "
              "see results.json samples[].detail.problems", file=sys.stderr)
        return 1
    return 0

