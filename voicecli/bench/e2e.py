"""`voicecli bench e2e`: LLM + TTS through the real VoicePipeline, batch vs bidi, the post's end-to-end study.

The same typed prompts go through both modes, alternating turn by turn (batch, bidi, batch, bidi, ...). Generation
is greedy (temperature 0) and every turn starts from an empty history, so both modes speak the same answer and
the difference is the pipeline: batch waits for the whole answer and synthesizes it in one request; bidi sends
each sentence (the first one cut early) over the persistent WebSocket while the LLM keeps generating.

Reported per turn, from the pipeline's own TurnTimeline (all from the LLM request): LLM time to first token, time
to the first audio byte, time to first audio "played" (the audio sink here is a CollectingSink, so "played" is its
first write: decoded samples ready for a speaker, without device buffering), and time to the end of the turn.
The LLM is the configured backend: the embedded SmolLM2 by default, Bedrock or an OpenAI-compatible server when
configured. `--rtt-ms` puts the delay proxy in front of the endpoint, and in front of an OpenAI-compatible LLM on
this machine too; an embedded LLM has no network, and Bedrock already has its real one.
"""

from __future__ import annotations

import argparse
import contextlib
import urllib.parse
from pathlib import Path
from typing import Any

from voicecli.bench.charts import distribution_chart, rtt_chart
from voicecli.bench.delay_proxy import DelayProxy, is_loopback
from voicecli.bench.machine import finish_machine_info, machine_info
from voicecli.bench.measure import MeasureError, speak, wait_played
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
from voicecli.bench.texts import E2E_PROMPTS, E2E_SYSTEM_PROMPT
from voicecli.config import Config
from voicecli.converse.pipeline import PipelineEvent, TurnFailed, VoicePipeline
from voicecli.converse.session import llm_from_config, llm_label, pipeline_settings
from voicecli.errors import UserError
from voicecli.llm import LLM, ChatMessage, LLMError
from voicecli.llm.history import Conversation
from voicecli.playback.sinks import CollectingSink
from voicecli.tts.base import SpeechRequest, TransportError, TTSTransport
from voicecli.tts.http_batch import BatchHttpTransport
from voicecli.tts.websocket import WebSocketTransport
from voicecli.wire.playout import Playout

MODES: tuple[str, ...] = ("batch", "bidi")
BASELINE = "batch"
PLAYED = Metric("first_played_ms", "first audio played")
FIRST_BYTE = Metric("first_byte_ms", "first audio byte")
TTFT = Metric("llm_ttft_ms", "LLM TTFT")
LLM_DONE = Metric("llm_total_ms", "LLM done")
TOTAL = Metric("total_ms", "turn done")
METRICS = (PLAYED, FIRST_BYTE, TTFT, LLM_DONE, TOTAL)
POST_FIGURES = {"bidi_speedup_local": 2.4, "bidi_speedup_remote": 3.5}


def _proxied_openai(config: Config, proxy_port: int) -> Config:
    """The same config with llm.openai.base_url pointing at the delay proxy instead of the server."""
    parsed = urllib.parse.urlsplit(config.llm.openai.base_url)
    moved = parsed._replace(netloc=f"127.0.0.1:{proxy_port}").geturl()
    return config.override({"llm.openai.base_url": moved}, "bench delay proxy")


@contextlib.asynccontextmanager
async def _llm_route(config: Config, rtt: float, shared: LLM | None) -> Any:
    """The LLM to use at this RTT: the shared one, or for a loopback OpenAI-compatible server, one behind a proxy."""
    parsed = urllib.parse.urlsplit(config.llm.openai.base_url)
    proxied = (config.llm.backend == "openai" and rtt > 0 and parsed.hostname is not None
               and is_loopback(parsed.hostname))
    if not proxied:
        assert shared is not None
        yield shared, False
        return
    async with DelayProxy(parsed.port or 80, rtt, parsed.hostname or "127.0.0.1") as proxy:
        llm = llm_from_config(_proxied_openai(config, proxy.port))
        try:
            yield llm, True
        finally:
            await llm.aclose()


WARM_PROMPT = "(warm-up)"
"""The untimed request before each timed turn: the same system prompt, a user text no timed prompt starts with."""


async def warm_llm(llm: LLM, prompt: str = WARM_PROMPT, system: str = "") -> None:
    """A tiny untimed generation that leaves the LLM's prompt cache as a real conversation leaves it.

    Why before EVERY turn, and why not with the turn's own prompt: llama.cpp reuses the evaluated prefix of its
    previous prompt. In a conversation that prefix is the system prompt and the history, never the user's new
    question, so a real turn pays for evaluating the question. Warming with the system prompt and a different user
    text makes every timed turn pay exactly that, in both modes (warming with the turn's own prompt would make the
    timed turn's LLM time to first token a cache hit of ~1 ms, which no user ever gets). For a remote LLM it is
    just one more short request.

    The app itself does not warm at start-up, though it would spare the first turn ~300 ms of prompt reading: with
    the prompt read in two pieces instead of one, SmolLM2-135M's first answer to "What is the capital of France?"
    turned from "Capital of France is Paris." into a run of degenerate French (reproducible, same seed).
    """
    stream = llm.stream([ChatMessage("user", prompt)], system=system, max_tokens=1, temperature=0.0)
    async with contextlib.aclosing(stream) as events:
        async for _ in events:
            pass


def _metrics(timeline: Any) -> dict[str, float | None]:
    return {
        "first_played_ms": timeline.ms("llm_request", "first_audio_played"),
        "first_byte_ms": timeline.ms("llm_request", "first_audio_byte"),
        "llm_ttft_ms": timeline.ms("llm_request", "llm_first_token"),
        "llm_total_ms": timeline.ms("llm_request", "llm_done"),
        "total_ms": timeline.ms("llm_request", "turn_done"),
    }


async def run_e2e(config: Config, target: Target, llm: LLM, rtts: list[float], runs: int, prompts: list[str],
                  bar: BenchProgress | None = None) -> list[Sample]:
    """`runs` turns per mode at every RTT, modes alternating, prompt i % len(prompts) for turn pair i."""
    samples: list[Sample] = []
    settings = pipeline_settings(config)
    settings.system_prompt = E2E_SYSTEM_PROMPT
    settings.temperature = 0.0
    settings.stall_timeout_s = 600.0  # batch sends nothing until the whole answer is synthesized: minutes on a busy CPU
    failures: list[str] = []

    def on_event(event: PipelineEvent) -> None:
        if isinstance(event, TurnFailed):
            failures.append(event.message)

    for rtt in rtts:
        async with route(target, rtt) as url, _llm_route(config, rtt, llm) as (turn_llm, _):
            transports: dict[str, TTSTransport] = {
                "bidi": WebSocketTransport(url, target.token, connect_timeout_s=60.0),
                "batch": BatchHttpTransport(url, target.token, timeout_s=600.0),
            }
            pipeline = VoicePipeline(turn_llm, transports, CollectingSink(), settings, Conversation(), on_event)
            async with contextlib.AsyncExitStack() as stack:
                for transport in transports.values():
                    await stack.enter_async_context(transport)
                    await speak(transport, [SpeechRequest(f"warm-{transport.name}-{rtt:g}", "Warm up.",
                                                          settings.voice, settings.speed)])
                await warm_llm(turn_llm, system=settings.system_prompt)
                for run in range(runs):
                    prompt = prompts[run % len(prompts)]
                    for mode in MODES:
                        if bar is not None:
                            bar.describe(f"RTT {rtt:g} ms, run {run + 1}/{runs}, {mode}")
                        settings.mode = mode
                        pipeline.history = Conversation()
                        sink = CollectingSink()
                        pipeline.sink = sink
                        failures.clear()
                        await warm_llm(turn_llm, system=settings.system_prompt)
                        timeline = await pipeline.turn(prompt)
                        if failures:
                            raise MeasureError(f"{mode} turn {run + 1} failed: {failures[0]}")
                        listener = Playout()  # then the next turn, once this answer has played
                        for sentence in timeline.sentences:
                            if sentence.first_byte is not None:
                                listener.add(sentence.first_byte, sentence.audio_s)
                        await wait_played(listener)
                        samples.append(Sample(mode, rtt, run, _metrics(timeline), {
                            "prompt": prompt,
                            "sentences": [s.text for s in timeline.sentences],
                            "audio_s": round(sum(s.audio_s for s in timeline.sentences), 3),
                        }))
                        if bar is not None:
                            bar.step()
    return samples


def headline(result: BenchResult) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for rtt in sorted({s.rtt_ms for s in result.samples}):
        row: dict[str, Any] = {"rtt_ms": rtt}
        for metric in (PLAYED, FIRST_BYTE):
            bidi = result.row("bidi", metric.key, rtt)
            batch = result.row("batch", metric.key, rtt)
            row[f"batch_over_bidi_{metric.key}_p50"] = batch.p50 / bidi.p50 if bidi and batch and bidi.p50 else None
            row[f"batch_over_bidi_{metric.key}_mean"] = (batch.mean / bidi.mean if bidi and batch and bidi.mean
                                                         else None)
        rows.append(row)
    return rows


def _same_answers(samples: list[Sample]) -> tuple[int, int]:
    """(turn pairs whose batch and bidi answers were the same text, turn pairs)."""
    by_key: dict[tuple[float, int], dict[str, str]] = {}
    for s in samples:
        by_key.setdefault((s.rtt_ms, s.run), {})[s.variant] = " ".join(s.detail.get("sentences", []))
    pairs = [v for v in by_key.values() if len(v) == 2]
    return sum(1 for v in pairs if v["batch"] == v["bidi"]), len(pairs)


def render_markdown(result: BenchResult) -> str:
    settings = result.settings
    lines = [
        f"# voicecli bench e2e: {result.name}",
        "",
        f"Measured {result.created} on {machine_line(result.machine)}.",
        f"LLM: {settings['llm']}; {settings['runs']} turns per mode and RTT, modes alternating turn by turn; "
        f"voice {settings['voice']}.",
        "",
        variant_table(result, list(MODES), PLAYED, [FIRST_BYTE, TTFT, LLM_DONE, TOTAL]),
        "**Against the AWS post** (Bedrock LLM + Kokoro on GPU: bidi 2.4x faster than batch on a local container, "
        "3.5x on AgentCore Runtime)",
        "",
        "| injected RTT | batch / bidi, first audio played (p50) | (mean) | batch / bidi, first audio byte (p50) |",
        "|---:|---:|---:|---:|",
    ]
    for row in result.tables.get("headline", []):
        def fmt(value: float | None) -> str:
            return "–" if value is None else f"{value:.2f}x"

        lines.append(f"| {row['rtt_ms']:g} ms | {fmt(row['batch_over_bidi_first_played_ms_p50'])} | "
                     f"{fmt(row['batch_over_bidi_first_played_ms_mean'])} | "
                     f"{fmt(row['batch_over_bidi_first_byte_ms_p50'])} |")
    lines += ["", f"System prompt: \"{settings['system_prompt']}\"", "",
              "Prompts: " + "; ".join(f"\"{p}\"" for p in settings["prompts"]), "",
              *[f"- {note}" for note in result.notes], "",
              "![first audio per mode](first_audio_distribution.png)", "",
              "![first audio vs RTT](first_audio_vs_rtt.png)", ""]
    return "\n".join(lines)


def charts(result: BenchResult, directory: Path) -> list[Path]:
    return [distribution_chart(result, PLAYED.key, "time to first audio played", list(MODES),
                               directory / "first_audio_distribution.png"),
            rtt_chart(result, PLAYED.key, "time to first audio played", list(MODES),
                      directory / "first_audio_vs_rtt.png")]


def build_result(name: str, samples: list[Sample], config: Config, runs: int, rtts: list[float],
                 prompts: list[str], machine: dict[str, Any], target: Target) -> BenchResult:
    result = BenchResult(
        kind="e2e", name=name,
        settings={"runs": runs, "rtt_ms": rtts, "modes": list(MODES), "llm": llm_label(config),
                  "llm_backend": config.llm.backend, "system_prompt": E2E_SYSTEM_PROMPT,
                  "temperature": 0.0, "max_tokens": config.llm.max_tokens, "prompts": prompts,
                  "voice": config.tts.voice, "endpoint": target.url,
                  "first_fragment_words": config.segmentation.first_fragment_words,
                  "llm_prompt_cache": "system prompt cached, each question evaluated in its timed turn",
                  "post_figures": POST_FIGURES},
        machine=machine, samples=samples)
    result.summary = summarize_samples(samples, METRICS, list(MODES), BASELINE)
    result.tables["headline"] = headline(result)
    same, pairs = _same_answers(samples)
    backend = config.llm.backend
    result.notes = [
        "All times from the pipeline's llm_request mark (a typed turn: no speech recognition in the loop).",
        "Each turn starts once the previous answer would have played at real time as its audio arrived, as "
        "the next question would: the endpoint takes a request while its listener still plays as a continuation.",
        "Before every timed turn the LLM answers an untimed warm-up with the same system prompt and another user "
        "text, so each timed turn finds the system prompt cached (as in a conversation) and pays for evaluating "
        "its question, in both modes: LLM TTFT is what a real turn pays, not a prompt-cache hit.",
        "first audio played = the CollectingSink's first write (decoded samples ready for a speaker; no device "
        "buffer), first audio byte = the first encoded byte from the transport.",
        f"Greedy decoding and a fresh history per turn: {same} of {pairs} batch/bidi turn pairs spoke the same "
        "answer.",
        "Injected RTT applies to the TTS endpoint" + (
            " and to the LLM server" if backend == "openai" else
            "; the embedded LLM runs in this process (no network)" if backend == "local" else
            "; Bedrock is reached over the real network (not delayed)") + ".",
        "The LLM and the TTS endpoint share the same CPU cores here, as they would in the offline default.",
        "Other work shared the CPU cores while this ran: compare ratios measured side by side, not absolute ms.",
    ]
    return result


async def _bench(args: argparse.Namespace, config: Config) -> BenchResult:
    rtts = parse_rtts(args.rtt_ms)
    prompts = list(args.prompt or E2E_PROMPTS)
    with BenchProgress(len(rtts) * args.runs * len(MODES), "bench e2e") as bar:
        target = await resolve_target(config, bar.note)
        llm: LLM | None = None
        try:
            stats = await endpoint_stats(target)
            bar.describe(f"loading the LLM ({llm_label(config)})")
            llm = llm_from_config(config)
            load = getattr(llm, "load", None)
            if load is not None:
                await load()
            machine = machine_info(stats)
            samples = await run_e2e(config, target, llm, rtts, args.runs, prompts, bar)
            finish_machine_info(machine)
        finally:
            if llm is not None:
                with contextlib.suppress(Exception):
                    await llm.aclose()
            target.close()
    return build_result(args.name or default_name("e2e"), samples, config, args.runs, rtts, prompts, machine,
                        target)


def run(args: argparse.Namespace, config: Config) -> int:
    from voicecli.tts.local_endpoint import EndpointStartError

    if args.runs < 1:
        raise UserError("--runs must be at least 1")
    run_bench(_bench(args, config), Path(args.out), render_markdown, charts,
                       (BenchError, TransportError, MeasureError, EndpointStartError, LLMError))
    return 0

