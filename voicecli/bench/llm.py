"""`voicecli bench llm`: the offline LLM's answers to the question sets' texts, right or wrong, and how fast.

Why: the local model is what answers when nothing else is reachable, and a model (or prompt, or sampling setting)
that answers faster but wrongly, or rightly but too slowly to keep the felt latency, is no improvement. Each
variant (model x system prompt x temperature x example turns, see VARIANTS) asks every question of a set in turn,
as one conversation the way the app keeps it (voicecli/llm/history.py, llm.history_turns: earlier questions and
answers are in the context of later ones), through the real backend (`create_llm`) with settings derived from the
user's config, in this one process. Why a conversation and not fresh one-turn questions: that is how the app asks,
and a small model can answer lone questions well yet copy an earlier answer once a few turns are in its context
(SmolLM2 with example turns at temperature 0 answered "The baby cat is a kitten." to every question after the third
in `bench turns`, while one-turn questions scored it best). Every variant's model is loaded at once (one llama.cpp
context each, so each keeps its own prompt cache) and the variants take turns question by question, each question
starting with the next variant: a slow minute on a shared machine falls on all of them alike, and their ratios are
measured side by side.

Per question it records the answer, whether it holds an accepted answer (voicecli.bench.scoring.holds_answer), the
time to the first token, the time to the first sentence as the pipeline would cut it for speech (the project's
Segmenter with the [segmentation] settings, as in bidi mode), the decode rate in tokens/s, and the total time.

The prompt cache is on, as in the app: llama.cpp keeps the evaluated prefix of the previous prompt, so after the
first question a variant's system prompt (and example turns) are cached and each question pays only for reading
itself. Before timing, each variant's model is loaded and answers one throwaway question (untimed): neither the
load nor the first reading of the system prompt is counted.

Questions come from a built-in set (voicecli/bench/question_sets.py: `quality` is tuned on, `holdout` never is)
or from `--questions DIR`'s questions.json (the texts and accepted answers; the WAV files are not listened to).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicecli.bench.charts import distribution_chart
from voicecli.bench.machine import finish_machine_info, machine_info
from voicecli.bench.progress import BenchProgress
from voicecli.bench.question_sets import SETS, TUNED_ON
from voicecli.bench.questions import read_manifest
from voicecli.bench.report import (
    BenchResult,
    Metric,
    Sample,
    default_name,
    machine_line,
    run_bench,
    summarize_samples,
)
from voicecli.bench.scoring import holds_answer
from voicecli.bench.target import BenchError, pick_named
from voicecli.config import Config, LlmSettings, SegmentationSettings, Value
from voicecli.converse.segmentation import Segmenter
from voicecli.converse.timeline import summarize
from voicecli.llm import LLM, ChatMessage, LLMError, StreamEnd, TextDelta, context_turns, create_llm
from voicecli.llm.history import Conversation
from voicecli.llm.local import LOCAL_MODELS

BEFORE_SYSTEM_PROMPT = ("You are a helpful voice assistant. Answer in two to four short spoken sentences, without "
                        "lists or markdown.")
"""llm.system_prompt as shipped before this bench tuned it: the baseline variants keep it, for comparison."""


@dataclass(frozen=True)
class Variant:
    """One way of answering: a local model and the settings (dotted config keys) laid over the user's config."""

    name: str
    model: str
    """A llm.local.model choice (voicecli/llm/local.py LOCAL_MODELS)."""
    overrides: Mapping[str, Value]
    description: str


VARIANTS: tuple[Variant, ...] = (
    Variant("smollm2-before", "smollm2",
            {"llm.system_prompt": BEFORE_SYSTEM_PROMPT, "llm.temperature": 0.7, "llm.local.few_shot": False},
            "SmolLM2-135M-Instruct as shipped before: the old system prompt, temperature 0.7"),
    Variant("smollm2-before-t0", "smollm2",
            {"llm.system_prompt": BEFORE_SYSTEM_PROMPT, "llm.temperature": 0.0, "llm.local.few_shot": False},
            "the old system prompt, greedy decoding"),
    Variant("smollm2-t0", "smollm2", {"llm.temperature": 0.0, "llm.local.few_shot": False,
                                      "llm.local.history_turns": 8},
            "the configured system prompt, greedy decoding, eight earlier exchanges kept as context"),
    Variant("smollm2-t0-h1", "smollm2", {"llm.temperature": 0.0, "llm.local.few_shot": False,
                                          "llm.local.history_turns": 1},
            "the configured system prompt, greedy decoding, one earlier exchange kept as context"),
    Variant("smollm2-t0-h2", "smollm2", {"llm.temperature": 0.0, "llm.local.few_shot": False,
                                          "llm.local.history_turns": 2},
            "the configured system prompt, greedy decoding, two earlier exchanges kept as context"),
    Variant("smollm2-t0-h2-rp1.1", "smollm2", {"llm.temperature": 0.0, "llm.local.few_shot": False,
                                               "llm.local.history_turns": 2, "llm.local.repeat_penalty": 1.1},
            "two earlier exchanges, greedy, repeat penalty 1.1 (against copying an earlier answer)"),
    Variant("smollm2-t0-h2-rp1.3", "smollm2", {"llm.temperature": 0.0, "llm.local.few_shot": False,
                                               "llm.local.history_turns": 2, "llm.local.repeat_penalty": 1.3},
            "two earlier exchanges, greedy, repeat penalty 1.3"),
    Variant("smollm2-t0-h8-rp1.3", "smollm2", {"llm.temperature": 0.0, "llm.local.few_shot": False,
                                               "llm.local.history_turns": 8, "llm.local.repeat_penalty": 1.3},
            "eight earlier exchanges, greedy, repeat penalty 1.3"),
    Variant("smollm2-t0.3", "smollm2", {"llm.temperature": 0.3, "llm.local.few_shot": False},
            "the configured system prompt, temperature 0.3"),
    Variant("smollm2-t0-shots", "smollm2", {"llm.temperature": 0.0, "llm.local.few_shot": True},
            "the configured system prompt and the example turns, greedy decoding"),
    Variant("gemma3-270m-t0", "gemma3-270m", {"llm.temperature": 0.0},
            "Gemma 3 270M base: completion prompt with the configured system prompt and examples, greedy"),
    Variant("gemma3-270m-t0.7", "gemma3-270m", {"llm.temperature": 0.7},
            "Gemma 3 270M base, temperature 0.7"),
    Variant("configured", "", {},
            "the effective configuration as it is (the shipped default unless the user's config changes it)"),
)
"""The variants `--variants` names (default: every one whose model is installed, `configured` included)."""
BY_NAME = {variant.name: variant for variant in VARIANTS}

WARM_QUESTION = "Hello, who are you?"
"""The untimed question each variant answers after loading: not a question of any set."""

TTFT = Metric("ttft_ms", "first token")
FIRST_SENTENCE = Metric("first_sentence_ms", "first sentence")
TOTAL = Metric("total_ms", "answer done")
TOKENS_PER_S = Metric("tokens_per_s", "tokens/s")
METRICS = (TTFT, FIRST_SENTENCE, TOTAL, TOKENS_PER_S)


@dataclass(frozen=True)
class Question:
    """One question's text and accepted answers (empty: timed, not scored)."""

    name: str
    text: str
    answers: tuple[str, ...]


def questions_from(args: argparse.Namespace) -> tuple[str, list[Question]]:
    """(where the questions come from, the questions): `--questions DIR`'s questions.json, or a built-in set."""
    if args.questions:
        directory = Path(args.questions)
        files = {path.name for path in directory.glob("*.wav")}
        known = read_manifest(directory, files)
        if not known:
            raise BenchError(f"--questions: {directory} has no questions.json naming what its WAV files ask; the LLM "
                             "bench reads the questions' text, not their audio")
        return str(directory), [Question(name, text, answers) for name, (text, answers) in sorted(known.items())]
    name = args.question_set or args.default_set
    return name, [Question(f"q{index:02d}", spec.text, spec.answers) for index, spec in enumerate(SETS[name])]


def variant_config(config: Config, variant: Variant) -> Config:
    """The user's config with the local backend, the variant's model and its settings (validated like any layer)."""
    values: dict[str, Value] = {"llm.backend": "local", **variant.overrides}
    if variant.model:
        values.update({"llm.local.model": variant.model, "llm.local.model_file": ""})
    return config.override(values, f"bench llm variant {variant.name}")


def model_installed(config: Config) -> bool:
    """Whether the model file the local backend would load is there."""
    local = config.llm.local
    path = Path(local.model_file).expanduser() if local.model_file else LOCAL_MODELS[local.model]
    return (config.models_dir / path).is_file()


def choose_variants(spec: str | None, config: Config, installed: Callable[[Config], bool] = model_installed
                    ) -> list[Variant]:
    """The variants `--variants` names (all of them must be installed), or every installed one by default."""
    if spec is None:
        chosen = [v for v in VARIANTS if installed(variant_config(config, v))]
        if not chosen:
            raise BenchError("no local LLM model is installed: voicecli models install --only smollm2")
        return chosen
    chosen = pick_named(spec, BY_NAME, "--variants")
    for variant in chosen:
        derived = variant_config(config, variant)
        if not installed(derived):
            model = derived.llm.local.model
            raise BenchError(f"variant {variant.name} needs the model {model}: voicecli models install --only {model}")
    return chosen


@dataclass(frozen=True)
class Answer:
    """One timed answer. Times in ms from the request; None where it was never reached."""

    text: str
    ttft_ms: float | None
    first_sentence_ms: float | None
    first_sentence: str
    total_ms: float
    tokens: int
    tokens_per_s: float | None
    """Decode rate after the first token: (tokens - 1) / (last token - first token)."""
    stop_reason: str


async def ask(llm: LLM, text: str, settings: LlmSettings, segmentation: SegmentationSettings,
              clock: Callable[[], float] = time.perf_counter, history: Conversation | None = None) -> Answer:
    """Ask `text` and time it as the pipeline's bidi mode would see it: within `history` as the app keeps it (the
    question and the answer join it, as a spoken turn's do), or as a fresh one-turn conversation without one."""
    segmenter = Segmenter(segmentation.first_fragment_words, segmentation.min_sentence_chars,
                          segmentation.first_phrase_words)
    pieces: list[str] = []
    first_token: float | None = None
    last_token: float | None = None
    first_sentence: tuple[float, str] | None = None
    stop_reason = "?"
    start = clock()
    messages = [ChatMessage("user", text)] if history is None else history.messages_with(text)
    stream = llm.stream(messages, system=settings.system_prompt, max_tokens=settings.max_tokens,
                        temperature=settings.temperature)
    async with aclosing(stream) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                now = clock()
                first_token = now if first_token is None else first_token
                last_token = now
                pieces.append(event.text)
                sentences = segmenter.feed(event.text)
                if sentences and first_sentence is None:
                    first_sentence = (now, sentences[0])
            elif isinstance(event, StreamEnd):
                stop_reason = event.stop_reason
                break
    end = clock()
    rest = segmenter.flush()
    if first_sentence is None and rest:
        first_sentence = (end, rest[0])
    if history is not None:
        history.add_user(text)
        history.add_assistant("".join(pieces).strip())
    tokens = len(pieces)
    rate = ((tokens - 1) / (last_token - first_token) if first_token is not None and last_token is not None
            and tokens > 1 and last_token > first_token else None)
    return Answer(
        text="".join(pieces).strip(),
        ttft_ms=None if first_token is None else (first_token - start) * 1000,
        first_sentence_ms=None if first_sentence is None else (first_sentence[0] - start) * 1000,
        first_sentence="" if first_sentence is None else first_sentence[1],
        total_ms=(end - start) * 1000,
        tokens=tokens,
        tokens_per_s=rate,
        stop_reason=stop_reason,
    )


def sample(variant: str, index: int, question: Question, answer: Answer) -> Sample:
    right = holds_answer(answer.text, question.answers) if question.answers else None
    return Sample(variant, 0.0, index,
                  {TTFT.key: answer.ttft_ms, FIRST_SENTENCE.key: answer.first_sentence_ms, TOTAL.key: answer.total_ms,
                   TOKENS_PER_S.key: answer.tokens_per_s},
                  {"question": question.name, "text": question.text, "accepted": list(question.answers),
                   "answer": answer.text, "right": right, "first_sentence": answer.first_sentence,
                   "tokens": answer.tokens, "stop_reason": answer.stop_reason})


def _p(values: list[float], which: str) -> float | None:
    summary = summarize(values)
    return None if summary is None else float(getattr(summary, which))


def summary_by_variant(samples: Sequence[Sample], variants: Sequence[str]) -> dict[str, dict[str, Any]]:
    """results.json's summary_by_variant: answers right and the latency percentiles, per variant."""
    out: dict[str, dict[str, Any]] = {}
    for variant in variants:
        mine = [s for s in samples if s.variant == variant]

        def values(key: str, mine: list[Sample] = mine) -> list[float]:
            return [v for s in mine if (v := s.metrics.get(key)) is not None]

        scored = [s for s in mine if s.detail.get("right") is not None]
        out[variant] = {
            "questions": len(mine),
            "answers_right": sum(1 for s in scored if s.detail["right"]),
            "answers_scored": len(scored),
            "ttft_p50_ms": _p(values(TTFT.key), "p50"),
            "ttft_p95_ms": _p(values(TTFT.key), "p95"),
            "first_sentence_p50_ms": _p(values(FIRST_SENTENCE.key), "p50"),
            "first_sentence_p95_ms": _p(values(FIRST_SENTENCE.key), "p95"),
            "total_p50_ms": _p(values(TOTAL.key), "p50"),
            "tokens_per_s_p50": _p(values(TOKENS_PER_S.key), "p50"),
        }
    return out


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split()) or "–"


def _num(value: float | None, unit: str = "") -> str:
    return "–" if value is None else f"{value:,.0f}{unit}"


def render_markdown(result: BenchResult) -> str:
    settings = result.settings
    names = [v["name"] for v in settings["variants"]]
    by_variant: dict[str, dict[str, Any]] = result.extra["summary_by_variant"]
    tuned = "tuned on" if settings["tuned_on"] else "NEVER tuned on (holdout)"
    lines = [
        f"# voicecli bench llm: {result.name}",
        "",
        f"Measured {result.created} on {machine_line(result.machine)}.",
        f"Questions: {settings['questions']} ({settings['question_count']} questions, {tuned}), asked in turn as one "
        "conversation per variant, kept as the app keeps it (voicecli.llm.context_turns). Each variant's model was "
        "loaded and answered one throwaway question before timing (load time and the first reading of the system "
        "prompt are not counted); then the prompt cache holds the system prompt (and example turns, and the "
        "conversation so far) and each question pays for reading itself, as a turn in the app does.",
        "",
        "| variant | answers right | first token p50 (ms) | first sentence p50 (ms) | p95 | answer done p50 (ms) "
        "| tokens/s p50 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        row = by_variant[name]
        lines.append(f"| {name} | {row['answers_right']}/{row['answers_scored']} | {_num(row['ttft_p50_ms'])} | "
                     f"{_num(row['first_sentence_p50_ms'])} | {_num(row['first_sentence_p95_ms'])} | "
                     f"{_num(row['total_p50_ms'])} | {_num(row['tokens_per_s_p50'])} |")
    lines += ["", "Variants:", ""]
    for variant in settings["variants"]:
        lines.append(f"- **{variant['name']}**: {variant['description']} (model {variant['model']}, temperature "
                     f"{variant['temperature']:g}, example turns {'yes' if variant['examples'] else 'no'}, max_tokens "
                     f"{variant['max_tokens']}, {variant['threads']} thread(s)); system prompt: "
                     f"\"{variant['system_prompt']}\"")
    lines += ["", "## Answers", "", "✓ holds an accepted answer, ✗ does not, · not scored.", "",
              "| question | accepted | " + " | ".join(names) + " |",
              "|---|---|" + "---|" * len(names)]
    questions = list(dict.fromkeys(str(s.detail["question"]) for s in result.samples))
    for question in questions:
        row_samples = {s.variant: s for s in result.samples if s.detail["question"] == question}
        first = next(iter(row_samples.values()))
        cells = [_cell(str(first.detail["text"])), _cell(", ".join(first.detail["accepted"]))]
        for name in names:
            s = row_samples.get(name)
            if s is None:
                cells.append("–")
                continue
            mark = {True: "✓", False: "✗", None: "·"}[s.detail["right"]]
            cells.append(f"{mark} {_cell(str(s.detail['answer']))}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *[f"- {note}" for note in result.notes], "",
              "![first sentence per variant](first_sentence_distribution.png)", ""]
    return "\n".join(lines)


def charts(result: BenchResult, directory: Path) -> list[Path]:
    names = [v["name"] for v in result.settings["variants"]]
    return [distribution_chart(result, FIRST_SENTENCE.key, "time to the first sentence", names,
                               directory / "first_sentence_distribution.png")]


def describe(variant: Variant, config: Config) -> dict[str, Any]:
    """A variant's effective settings, as results.json records them."""
    llm = config.llm
    return {"name": variant.name, "description": variant.description, "model": llm.local.model_file or llm.local.model,
            "system_prompt": llm.system_prompt, "temperature": llm.temperature, "max_tokens": llm.max_tokens,
            "examples": llm.local.few_shot or llm.local.model == "gemma3-270m", "threads": llm.local.threads,
            "context_tokens": llm.local.context_tokens}


def build_result(name: str, source: str, questions: list[Question], described: list[dict[str, Any]],
                 samples: list[Sample], config: Config, machine: dict[str, Any]) -> BenchResult:
    names = [v["name"] for v in described]
    result = BenchResult(
        kind="llm", name=name,
        settings={"questions": source, "question_count": len(questions), "tuned_on": source in TUNED_ON,
                  "variants": described, "segmentation": {
                      "first_fragment_words": config.segmentation.first_fragment_words,
                      "first_phrase_words": config.segmentation.first_phrase_words,
                      "min_sentence_chars": config.segmentation.min_sentence_chars},
                  "llm_prompt_cache": "on: each variant's system prompt cached after its warm-up question"},
        machine=machine, samples=samples)
    result.summary = summarize_samples(samples, METRICS, names, names[0])
    result.extra["summary_by_variant"] = summary_by_variant(samples, names)
    result.notes = [
        "Times from the request: first token = the first text delta; first sentence = when the pipeline's "
        "Segmenter (the [segmentation] settings, bidi mode) released the first piece for speech, or the end of "
        "the answer if it never did; tokens/s = the decode rate after the first token.",
        "All variants were loaded at once, each with its own llama.cpp context and prompt cache, and took turns "
        "question by question (each question starting with the next variant), in one process on the same cores: "
        "compare them within this run.",
        "Temperature above 0 samples with a random seed: those variants' answers change from run to run.",
        "An answer counts as right when it holds an accepted answer as a whole word or phrase "
        "(voicecli.bench.scoring); \"I don't know\" counts as wrong, as does an answer without the fact.",
    ]
    return result


async def _bench(args: argparse.Namespace, config: Config) -> BenchResult:
    source, questions = questions_from(args)
    variants = choose_variants(args.variants, config)
    derived = [variant_config(config, variant) for variant in variants]
    described = [describe(variant, cfg) for variant, cfg in zip(variants, derived, strict=True)]
    samples: list[Sample] = []
    # No TTS endpoint here: the "endpoint" block says what ran the models instead (machine_line prints it).
    machine = machine_info({"engine": "llama.cpp", "device": "cpu", "workers": 1,
                            "threads": derived[0].llm.local.threads})
    llms: list[LLM] = []
    # One conversation per variant, kept as the app keeps it (llm.history_turns): a small model that answers a lone
    # question well may copy an earlier answer once a few turns are in its context (measured: SmolLM2 with example
    # turns repeated its third answer for every later question at temperature 0).
    conversations = [Conversation(max_turns=context_turns(cfg.llm)) for cfg in derived]
    with BenchProgress(len(variants) * len(questions), "bench llm") as bar:
        try:
            for variant, cfg in zip(variants, derived, strict=True):
                bar.describe(f"loading and warming {variant.name}")
                llm = create_llm(cfg.llm, models_dir=cfg.models_dir)
                llms.append(llm)
                load = getattr(llm, "load", None)
                if load is not None:
                    await load()
                await ask(llm, WARM_QUESTION, cfg.llm, cfg.segmentation)
            for index, question in enumerate(questions):
                bar.describe(question.text)
                for turn in range(len(variants)):
                    which = (index + turn) % len(variants)  # each question starts with the next variant
                    cfg = derived[which]
                    answer = await ask(llms[which], question.text, cfg.llm, cfg.segmentation,
                                       history=conversations[which])
                    samples.append(sample(variants[which].name, index, question, answer))
                    bar.step()
        finally:
            for llm in llms:
                with contextlib.suppress(Exception):
                    await llm.aclose()
    finish_machine_info(machine)
    samples.sort(key=lambda s: (s.run, [v.name for v in variants].index(s.variant)))
    return build_result(args.name or default_name("llm"), source, questions, described, samples, config, machine)


def run(args: argparse.Namespace, config: Config) -> int:
    run_bench(_bench(args, config), Path(args.out), render_markdown, charts, (BenchError, LLMError))
    return 0
