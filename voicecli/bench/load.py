"""`voicecli bench load`: N concurrent WebSocket sessions, each pipelining M sentences, with exact accounting.

Why: one endpoint serves many chat sessions, and its scheduler shares one inference worker between them fairly
(round robin across sessions). This measures what a user of one session then waits for its first audio as N
grows, how much audio the machine produces per wall-clock second, and checks that under load every request
completes exactly once and in order per session (nothing lost, nothing duplicated, no audio of one request
inside another's).

"Saturated" is reported as the smallest N at which the sessions together get less than real time each (the
audio produced per wall second divided by N falls below 1.0: a listener of every session would hear gaps),
and the throughput column shows where adding sessions stops adding audio.
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
from voicecli.bench.machine import machine_info
from voicecli.bench.measure import MeasureError, Trace, check_exact, speak
from voicecli.bench.progress import BenchProgress
from voicecli.bench.report import BenchResult, Sample, default_name, machine_line, run_bench
from voicecli.bench.target import BenchError, Target, endpoint_stats, parse_counts, resolve_target
from voicecli.bench.texts import LOAD_SENTENCES
from voicecli.config import Config
from voicecli.timeline import summarize
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
    try:
        await asyncio.gather(*(t.connect() for t in transports))
        started = time.monotonic()

        async def one(index: int, transport: WebSocketTransport) -> SessionOutcome:
            requests = [SpeechRequest(f"s{index}-r{i}", text, voice, 1.0, "mp3")
                        for i, text in enumerate(session_texts(index, sentences, pool))]
            trace = await speak(transport, requests, started=started)
            return SessionOutcome(index, trace, check_exact(trace))

        outcomes = await asyncio.gather(*(one(i, t) for i, t in enumerate(transports)))
        return LoadRound(sessions, run, time.monotonic() - started, list(outcomes))
    finally:
        for transport in transports:
            with contextlib.suppress(Exception):
                await transport.aclose()


def summarize_rounds(rounds: list[LoadRound]) -> list[dict[str, Any]]:
    """One row per N: accounting totals, first audio p50/p95 over sessions, gaps, throughput."""
    rows: list[dict[str, Any]] = []
    for n in sorted({r.sessions for r in rounds}):
        group = [r for r in rounds if r.sessions == n]
        firsts = [ms for r in group for o in r.outcomes if (ms := o.trace.ttfa_ms) is not None]
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
            "wall_s": wall / len(group),
            "audio_s": audio / len(group),
            "audio_rate_x": rate,
            "per_session_rate_x": rate / n,
        })
    return rows


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
        "gap p50 | p95 | audio/s (all) | per session |",
        "|---:|---:|---:|---:|---:|:---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        def ms(value: float | None) -> str:
            return "–" if value is None else f"{value:,.0f}"

        lines.append(f"| {r['sessions']} | {r['requests']} | {r['completed']} | {r['lost']} | {r['duplicated']} | "
                     f"{'yes' if r['in_order'] else 'NO'} | {ms(r['first_audio_p50_ms'])} | "
                     f"{ms(r['first_audio_p95_ms'])} | {ms(r['gap_p50_ms'])} | {ms(r['gap_p95_ms'])} | "
                     f"{r['audio_rate_x']:.2f}x | {r['per_session_rate_x']:.2f}x |")
    sat = saturation(rows)
    plateau = throughput_plateau(rows)
    lines += [
        "",
        "first audio: from the common start to the session's first audio byte (ms). gap: from one sentence's "
        "last audio byte to the next one's first (ms; negative would mean it was already waiting). audio/s: "
        "seconds of speech produced per wall-clock second, all sessions together; per session: that divided by N.",
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
    rows = summarize_rounds(rounds)
    samples = [Sample(f"sessions={r.sessions}", 0.0, r.run, {"first_audio_ms": o.trace.ttfa_ms,
                                                             "total_ms": o.trace.total_ms},
                      {"session": o.session, "problems": o.problems, "audio_s": round(o.trace.audio_s, 3)})
               for r in rounds for o in r.outcomes]
    result = BenchResult(
        kind="load", name=name,
        settings={"sessions": sorted({r.sessions for r in rounds}), "sentences": sentences, "runs": runs,
                  "voice": voice, "endpoint": target.url, "saturates_at": saturation(rows),
                  "throughput_plateau_at": throughput_plateau(rows)},
        machine=machine, samples=samples)
    result.tables["load"] = rows
    result.notes = [
        "The endpoint runs one inference at a time, shared round robin between sessions: with N sessions the "
        "first sentence of each can wait for up to N-1 others, and total throughput grows only while extra "
        "sessions fill the inference worker's idle moments (G2P, encoding and sending happen off it).",
        "Other work shared the CPU cores while this ran.",
    ]
    return result


async def _bench(args: argparse.Namespace, config: Config) -> BenchResult:
    counts = parse_counts(args.sessions, "1,2,4,8", "--sessions")
    voice = config.get_str("tts.voice")
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
        finally:
            target.close()
    return build_result(args.name or default_name("load"), rounds, args.sentences, args.runs, machine, target,
                        voice)


def run(args: argparse.Namespace, config: Config) -> int:
    from voicecli.cli import UserError
    from voicecli.local_endpoint import EndpointStartError

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

