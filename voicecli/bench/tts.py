"""`voicecli bench tts`: the AWS post's TTS-only study (batch vs bidi time to first audio) on voicecli's own code.

Variants, interleaved run by run (A B C D E A B C D E ...) so that a burst of competing load hits all of them:
  batch                 the whole paragraph in one POST /invocations (BatchHttpTransport): first audio when the
                        whole answer is synthesized and sent.
  bidi-first-sentence   only the first sentence over the persistent WebSocket: the post's isolated test.
  bidi-streamed         every sentence pipelined on the one connection; time to the first sentence's audio.
  bidi-fast-fragment    only the first clause, cut where the Segmenter cuts it (segmentation.first_fragment_words).
  floor                 the same first sentence synthesized in this process with no transport (see floor.py).
TTFA is measured from just before the send to the first audio byte the transport hands over (for batch that is
when the whole body has arrived: the non-streamed POST sends it only after synthesis). Synthesis dominates on a
CPU, so runs are few: N=5 by default (about 30 s a round on 2 shared cores; raise --runs on a GPU).
"""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicecli.bench.charts import distribution_chart, rtt_chart
from voicecli.bench.floor import Floor
from voicecli.bench.machine import finish_machine_info, machine_info
from voicecli.bench.measure import MeasureError, Trace, check_exact, speak, wait_played
from voicecli.bench.progress import BenchProgress
from voicecli.bench.report import (
    BenchResult,
    Metric,
    Sample,
    default_name,
    machine_line,
    run_bench,
    summarize_samples,
    variant_table,
)
from voicecli.bench.target import BenchError, Target, endpoint_stats, parse_rtts, resolve_target, route
from voicecli.bench.texts import TEXT_SETS, paragraph
from voicecli.config import Config
from voicecli.converse.segmentation import Segmenter
from voicecli.converse.timeline import summarize
from voicecli.errors import UserError
from voicecli.tts.base import SpeechRequest, TransportError, TTSTransport
from voicecli.tts.http_batch import BatchHttpTransport
from voicecli.tts.websocket import WebSocketTransport

VARIANTS: tuple[str, ...] = ("batch", "bidi-first-sentence", "bidi-streamed", "bidi-fast-fragment", "floor")
BASELINE = "batch"
TTFA = Metric("ttfa_ms", "TTFA")
TOTAL = Metric("total_ms", "last audio")
POST_FIGURES = {"batch_ttfa_ms": 329.3, "first_sentence_ttfa_ms": 156.7, "ratio": 0.476}
"""The AWS post's TTS-only means (ml.g5.xlarge GPU): whole text vs first sentence only."""


@dataclass(frozen=True)
class TtsPlan:
    sentences: tuple[str, ...]
    voice: str
    speed: float
    first_fragment_words: int
    min_sentence_chars: int

    @property
    def paragraph(self) -> str:
        return paragraph(self.sentences)

    @property
    def fragment(self) -> str:
        """The first piece the Segmenter would send, fed the whole paragraph."""
        segmenter = Segmenter(self.first_fragment_words, self.min_sentence_chars)
        pieces = segmenter.feed(self.paragraph) + segmenter.flush()
        return pieces[0]

    def texts(self, variant: str) -> list[str]:
        if variant == "batch":
            return [self.paragraph]
        if variant == "bidi-streamed":
            return list(self.sentences)
        if variant == "bidi-fast-fragment":
            return [self.fragment]
        return [self.sentences[0]]


def _sample(variant: str, rtt: float, run: int, trace: Trace) -> Sample:
    problems = check_exact(trace)
    if problems:
        raise MeasureError(f"{variant} run {run + 1}: " + "; ".join(problems))
    first = trace.requests[0]
    return Sample(variant, rtt, run, {"ttfa_ms": trace.ttfa_ms, "total_ms": trace.total_ms},
                  {"requests": len(trace.requests), "audio_s": round(trace.audio_s, 3),
                   "bytes": sum(r.bytes for r in trace.requests),
                   "server_first_request_ms": first.server_synthesis_ms,
                   "server_queue_ms": first.server_queue_ms,
                   "server_first_audio_ms": first.server_first_audio_ms,
                   "wire_ms": (None if first.server_first_audio_ms is None or trace.ttfa_ms is None
                               else trace.ttfa_ms - first.server_first_audio_ms)})


async def _speak_variant(transport: TTSTransport, plan: TtsPlan, variant: str, rtt: float, run: int) -> Sample:
    """One variant, as one turn: the next starts once its audio would have played (measure.wait_played)."""
    requests = [SpeechRequest(f"{variant}-{rtt:g}-{run}-{i}", text, plan.voice, plan.speed, "mp3")
                for i, text in enumerate(plan.texts(variant))]
    trace = await speak(transport, requests)
    await wait_played(trace.playout())
    return _sample(variant, rtt, run, trace)


async def run_tts(target: Target, rtts: list[float], runs: int, plan: TtsPlan, floor: Floor | None,
                  bar: BenchProgress | None = None) -> list[Sample]:
    """Every variant `runs` times at every RTT, interleaved; returns the raw samples."""
    samples: list[Sample] = []
    variants = [v for v in VARIANTS if v != "floor" or floor is not None]
    for rtt in rtts:
        async with route(target, rtt) as url:
            transports: dict[str, TTSTransport] = {
                "bidi": WebSocketTransport(url, target.token, connect_timeout_s=60.0),
                "batch": BatchHttpTransport(url, target.token, timeout_s=600.0),
            }
            async with contextlib.AsyncExitStack() as stack:
                for transport in transports.values():
                    await stack.enter_async_context(transport)
                    # One untimed request each, so no variant pays for a first-use cost in run 1.
                    await speak(transport, [SpeechRequest(f"warm-{transport.name}-{rtt:g}", "Warm up.",
                                                           plan.voice, plan.speed)])
                for run in range(runs):
                    for variant in variants:
                        if bar is not None:
                            bar.describe(f"RTT {rtt:g} ms, run {run + 1}/{runs}, {variant}")
                        if variant == "floor":
                            assert floor is not None
                            result = await floor.ameasure(plan.sentences[0], plan.voice, plan.speed)
                            samples.append(Sample("floor", rtt, run, {"ttfa_ms": result.ms, "total_ms": None},
                                                  {"g2p_ms": result.g2p_ms, "inference_ms": result.inference_ms,
                                                   "encode_ms": result.encode_ms, "first_piece": result.first_piece}))
                        else:
                            transport = transports["batch" if variant == "batch" else "bidi"]
                            samples.append(await _speak_variant(transport, plan, variant, rtt, run))
                        if bar is not None:
                            bar.step()
    return samples


def _wire_p50(result: BenchResult, rtt: float) -> float | None:
    """p50 of client TTFA minus the endpoint's own receipt-to-first-audio time, for bidi-first-sentence: what the
    connection, framing and client cost, free of the synthesis noise that swamps the floor comparison."""
    values = [w for s in result.samples if s.variant == "bidi-first-sentence" and s.rtt_ms == rtt
              and (w := s.detail.get("wire_ms")) is not None]
    pct = summarize(values)
    return None if pct is None else pct.p50


def headline(result: BenchResult) -> list[dict[str, Any]]:
    """The figures the post reports, per RTT: ratios to batch and the transport overhead over the floor."""
    rows: list[dict[str, Any]] = []
    for rtt in sorted({s.rtt_ms for s in result.samples}):
        def get(variant: str, rtt: float = rtt) -> Any:
            return result.row(variant, "ttfa_ms", rtt)

        first, fragment, streamed, floor = (get("bidi-first-sentence"), get("bidi-fast-fragment"),
                                            get("bidi-streamed"), get("floor"))
        rows.append({
            "rtt_ms": rtt,
            "first_sentence_vs_batch_p50": first.ratio_p50 if first else None,
            "first_sentence_vs_batch_mean": first.ratio_mean if first else None,
            "fast_fragment_vs_batch_p50": fragment.ratio_p50 if fragment else None,
            "streamed_vs_batch_p50": streamed.ratio_p50 if streamed else None,
            "transport_overhead_ms_p50": (first.p50 - floor.p50) if first and floor else None,
            "transport_overhead_ms_mean": (first.mean - floor.mean) if first and floor else None,
            "wire_ms_p50": _wire_p50(result, rtt),
        })
    return rows


def render_markdown(result: BenchResult) -> str:
    settings = result.settings
    lines = [
        f"# voicecli bench tts: {result.name}",
        "",
        f"Measured {result.created} on {machine_line(result.machine)}.",
        f"{settings['runs']} runs per variant and RTT, variants interleaved run by run; voice {settings['voice']}.",
        "",
        variant_table(result, [v for v in VARIANTS if any(s.variant == v for s in result.samples)], TTFA, [TOTAL]),
        "**Against the AWS post** (TTS only, GPU, means: whole text 329.3 ms -> first sentence 156.7 ms, "
        "ratio 0.476)",
        "",
        "| injected RTT | first sentence / batch (p50) | (mean) | fast fragment / batch (p50) | "
        "streamed / batch (p50) | transport overhead over floor, p50 (mean) | client TTFA - server first "
        "audio, p50 |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result.tables.get("headline", []):
        def fmt(value: float | None) -> str:
            return "–" if value is None else f"{value:.3f}"

        overhead = row["transport_overhead_ms_p50"]
        mean = row["transport_overhead_ms_mean"]
        lines.append(f"| {row['rtt_ms']:g} ms | {fmt(row['first_sentence_vs_batch_p50'])} | "
                     f"{fmt(row['first_sentence_vs_batch_mean'])} | {fmt(row['fast_fragment_vs_batch_p50'])} | "
                     f"{fmt(row['streamed_vs_batch_p50'])} | "
                     f"{'–' if overhead is None else f'{overhead:.0f} ms'}"
                     f"{'' if mean is None else f' ({mean:.0f} ms)'} | "
                     f"{'–' if row.get('wire_ms_p50') is None else f'{row['wire_ms_p50']:.1f} ms'} |")
    lines += ["", "Texts:", ""]
    for label, text in settings["texts"].items():
        lines.append(f"- {label}: \"{text}\"")
    lines += ["", *[f"- {note}" for note in result.notes], ""]
    lines += ["![TTFA per variant](ttfa_distribution.png)", "", "![TTFA vs RTT](ttfa_vs_rtt.png)", ""]
    return "\n".join(lines)


def charts(result: BenchResult, directory: Path) -> list[Path]:
    variants = [v for v in VARIANTS if any(s.variant == v for s in result.samples)]
    return [distribution_chart(result, "ttfa_ms", "time to first audio", variants,
                               directory / "ttfa_distribution.png"),
            rtt_chart(result, "ttfa_ms", "time to first audio", variants, directory / "ttfa_vs_rtt.png")]


def build_result(name: str, samples: list[Sample], plan: TtsPlan, runs: int, rtts: list[float],
                 machine: dict[str, Any], target: Target, floor: Floor | None) -> BenchResult:
    variants = [v for v in VARIANTS if any(s.variant == v for s in samples)]
    result = BenchResult(
        kind="tts", name=name,
        settings={"runs": runs, "rtt_ms": rtts, "variants": variants, "voice": plan.voice, "speed": plan.speed,
                  "first_fragment_words": plan.first_fragment_words, "endpoint": target.url,
                  "texts": {"paragraph (batch)": plan.paragraph, "first sentence": plan.sentences[0],
                            "fast fragment": plan.fragment},
                  "sentences": list(plan.sentences), "post_figures": POST_FIGURES},
        machine=machine, samples=samples)
    result.summary = summarize_samples(samples, [TTFA, TOTAL], variants, BASELINE)
    result.tables["headline"] = headline(result)
    result.notes = [
        "TTFA: from just before the request is sent to the first audio byte the client transport hands over.",
        "batch: one POST /invocations with the whole paragraph (not streamed): audio comes when all is synthesized.",
        "floor: G2P + inference of the first piece's first part (a turn's first piece is decoded in parts) + MP3 "
        "encoding, for the first sentence, in the bench process "
        f"({'engine ' + floor.engine_name + f', {floor.threads} thread(s)' if floor else 'not measured'}); "
        "transport overhead = bidi-first-sentence minus floor.",
        "The endpoint already cuts the first sentence at its first clause before synthesis (chunking.py), so "
        "bidi-first-sentence and bidi-fast-fragment wait for the same first piece; the client-side fragment pays "
        "off end to end, where the LLM need not finish the sentence first.",
        "Each WebSocket variant is a turn: the bench waits until its audio would have played at real time before "
        "the next, so each starts a turn at the endpoint (served first, its first piece in parts).",
        "Injected RTT: a delay proxy adds RTT/2 to every chunk each way (voicecli/bench/delay_proxy.py); both "
        "transports keep one connection open, so handshakes are not part of any timing.",
        "client TTFA - server first audio: the client's TTFA minus the endpoint's own receipt-to-first-audio time "
        "(reported in synthesis_complete): the connection, framing and client cost, measured on each request.",
        "Other work shared the CPU cores while this ran: compare ratios measured side by side, not absolute ms.",
    ]
    return result


async def _bench(args: argparse.Namespace, config: Config) -> BenchResult:
    rtts = parse_rtts(args.rtt_ms)
    plan = TtsPlan(TEXT_SETS[args.texts], config.tts.voice, config.tts.speed,
                   config.segmentation.first_fragment_words,
                   config.segmentation.min_sentence_chars)
    variants = len(VARIANTS) - (1 if args.no_floor else 0)
    with BenchProgress(len(rtts) * args.runs * variants, "bench tts") as bar:
        target = await resolve_target(config, bar.note)
        try:
            stats = await endpoint_stats(target)
            floor: Floor | None = None
            if not args.no_floor:
                bar.describe("loading the in-process engine for the floor")
                floor = await Floor.load(str(stats.get("engine") or config.endpoint.local.engine),
                                         config.models_dir,
                                         # a lone first piece runs on the all-cores session (sizing.py)
                                         int(stats.get("solo_threads") or stats.get("threads")
                                             or config.endpoint.local.threads or 1))
            machine = machine_info(stats)
            samples = await run_tts(target, rtts, args.runs, plan, floor, bar)
            finish_machine_info(machine)
        finally:
            target.close()
    return build_result(args.name or default_name("tts"), samples, plan, args.runs, rtts, machine, target, floor)


def run(args: argparse.Namespace, config: Config) -> int:
    from voicecli.tts.local_endpoint import EndpointStartError

    if args.runs < 1:
        raise UserError("--runs must be at least 1")
    run_bench(_bench(args, config), Path(args.out), render_markdown, charts,
                       (BenchError, TransportError, MeasureError, EndpointStartError, FileNotFoundError))
    return 0

