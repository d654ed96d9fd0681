"""Local speech-to-text with faster-whisper, always from a local model directory.

Why a local directory only: given a model NAME, faster-whisper asks the Hugging Face hub first, which hangs or fails
on an offline machine. Names are therefore resolved here to `<models_dir>/whisper-<name>` (what `voicecli models
install` writes), and a missing model is an error that says which install command fixes it.

Why decoding runs on one dedicated worker thread: CTranslate2 releases the GIL, so the event loop (microphone, TUI,
audio output) keeps running while Whisper works, and one worker keeps two decodes from fighting over the same cores.

Why short utterances are encoded in a shorter window: Whisper's encoder always sees 30 s of audio (the rest
zero-padded), and on CPU that fixed cost is most of a short turn's decode: tiny.en, 2 threads, a 2-3 s question,
~195 ms of ~280 ms. CTranslate2 accepts a shorter mel input (whisper.cpp calls this the audio context); a 10 s
window encodes ~3x faster, and on the espeak questions of the tests and the turns bench it transcribed as well or
better (measured: 280-340 ms -> 80-110 ms per question, same words). An utterance that does not fit the window, or
a multilingual model without a language, goes the standard way.

TurnTranscriber hides end-of-turn latency: it starts decoding at SpeechPaused (a short silence, ~250 ms) while the
endpointer's hang-over (~700 ms) is still running, and hands that result over at SpeechEnded when the user did not
resume, which the endpointer guarantees means the very same audio.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.rates import SPEECH_RATE
from voicecli.config import Config
from voicecli.listen.endpointing import SpeechEnded, SpeechPaused, SpeechResumed, SpeechStarted, TurnEvent

Audio = NDArray[np.float32]
_MODEL_FILES = ("model.bin", "config.json", "tokenizer.json")
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")


class WhisperModelMissing(FileNotFoundError):
    """The Whisper model directory is absent or incomplete; the message names the command that installs it."""


def whisper_model_dir(model: str | Path, models_dir: Path) -> Path:
    """Resolve "tiny.en" / "whisper-tiny.en" / "base" / a path to a complete local model directory."""
    candidate = Path(model).expanduser()
    if isinstance(model, Path) or os.sep in str(model) or candidate.is_dir():
        directory, install_name = candidate, None
    else:
        install_name = str(model) if str(model).startswith("whisper-") else f"whisper-{model}"
        directory = models_dir / install_name
    missing = [name for name in _MODEL_FILES if not (directory / name).is_file()]
    if missing:
        fix = (
            f"run `voicecli models install --only {install_name}`"
            if install_name
            else "point it at a faster-whisper (CTranslate2) model directory"
        )
        raise WhisperModelMissing(f"Whisper model not found in {directory} (missing {', '.join(missing)}): {fix}")
    return directory


@dataclass(frozen=True)
class Transcript:
    """One decoded utterance. `seconds` is decoding wall time; started_at/finished_at are monotonic stamps."""

    text: str
    seconds: float
    audio_seconds: float
    language: str
    started_at: float
    finished_at: float
    speculative: bool = False
    """True when this result was decoded at SpeechPaused, before the turn ended."""


def drop_repeats(text: str) -> str:
    """`text` without a sentence that repeats the one before it word for word ("What do bees make? What do bees
    make?" -> "What do bees make?"). Whisper pads a short utterance's leftover window this way: measured on the
    quality question set (`voicecli bench stt`), tiny.en in the short window repeated 1-4 of 36 questions whole,
    base with a prompt none; a person does not ask the same sentence twice in one breath. Sentences of one or two
    words are left alone ("No. No.")."""
    sentences = [part.strip() for part in _SENTENCE_END.split(text.strip()) if part.strip()]
    kept: list[str] = []
    for sentence in sentences:
        words = normalise(sentence).split()
        if not kept or len(words) < 3 or words != normalise(kept[-1]).split():  # "No. No." is said, and kept
            kept.append(sentence)
    return " ".join(kept) if len(kept) < len(sentences) else text.strip()


def normalise(text: str) -> str:
    """Lower case, punctuation dropped, single spaces: for comparing transcripts with expected words."""
    kept = "".join(ch.lower() if ch.isalnum() or ch == "'" else " " for ch in text)
    return " ".join(kept.split())


class Transcriber:
    """faster-whisper's WhisperModel behind an async interface; loads the model on construction (~0.5 s tiny.en)."""

    def __init__(
        self,
        model_dir_or_name: str | Path,
        beam_size: int = 5,
        device: str = "cpu",
        compute_type: str = "int8",
        threads: int = 2,
        language: str | None = "en",
        *,
        models_dir: Path | None = None,
        window_s: float = 10.0,
        initial_prompt: str = "",
    ) -> None:
        if models_dir is None:
            from voicecli.paths import default_models_dir

            models_dir = default_models_dir()
        self.model_dir = whisper_model_dir(model_dir_or_name, models_dir)
        self.beam_size = beam_size
        self.language = language
        from faster_whisper import WhisperModel

        self._model: Any = WhisperModel(
            str(self.model_dir), device=device, compute_type=compute_type, cpu_threads=threads, local_files_only=True
        )
        self.window_s = window_s
        """Encoder window for short utterances in seconds (0: always Whisper's standard 30 s)."""
        self.initial_prompt = initial_prompt
        """Text every decode is conditioned on (Whisper's previous-text prompt); "" for none."""
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="whisper")

    def prompt_for(self, context: str = "") -> str:
        """The decoder prompt: the configured initial prompt, then `context` (e.g. the conversation's last words)."""
        return " ".join(part.strip() for part in (self.initial_prompt, context) if part.strip())

    def transcribe_sync(self, audio16k: Audio, speculative: bool = False, context: str = "") -> Transcript:
        """Decode one utterance (16 kHz mono float32) on the calling thread; `context`: text said before it, which
        the decoder is conditioned on after the initial prompt (see prompt_for)."""
        prompt = self.prompt_for(context)
        samples = np.ascontiguousarray(np.asarray(audio16k, dtype=np.float32).reshape(-1))
        started = time.monotonic()
        if len(samples) == 0:
            return Transcript("", 0.0, 0.0, self.language or "", started, started, speculative)
        short = self._transcribe_short(samples, prompt)
        if short is not None:
            finished = time.monotonic()
            return Transcript(drop_repeats(short), finished - started, len(samples) / SPEECH_RATE,
                              self.language or "en", started, finished, speculative)
        segments, info = self._model.transcribe(
            samples,
            language=self.language,  # ignored by English-only models; None lets a multilingual one detect
            beam_size=self.beam_size,
            # One temperature: the fallback ladder re-decodes low-confidence audio up to 5 times, multiplying the
            # worst-case wait for a few better guesses on mumbles.
            temperature=0.0,
            # Each turn stands alone: conditioning on the previous text invites repeated hallucinations.
            condition_on_previous_text=False,
            without_timestamps=True,
            vad_filter=False,  # the endpointer already cut the utterance
            initial_prompt=prompt or None,
        )
        text = drop_repeats(" ".join(segment.text.strip() for segment in segments))
        finished = time.monotonic()
        return Transcript(
            text, finished - started, len(samples) / SPEECH_RATE, str(info.language), started, finished, speculative
        )

    def _transcribe_short(self, samples: Audio, prompt_text: str = "") -> str | None:
        """Decode an utterance that fits `window_s` with the encoder input cut to that window (see the module
        docstring); None when it does not apply. Same decoding options as the standard path: beam search at
        temperature 0, Whisper's non-speech tokens suppressed, no timestamps, and faster-whisper's rule that a
        window the model thinks is silence (no-speech probability > 0.6 and average log-probability < -1) is empty.
        One rule is added: a no-speech probability above 0.9 is empty whatever the score, because in the short
        window pure silence decodes to a confident "you" (seen: 0.99 / -0.65) where the standard path gave nothing;
        espeak questions measured 0.06-0.33. A prompt goes where Whisper (and the standard path) puts previous text:
        <|startofprev|> and its tokens (at most half the context) before the start-of-transcript sequence.
        """
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        model = self._model
        if self.window_s <= 0 or len(samples) > (self.window_s - 0.5) * SPEECH_RATE:
            return None
        if model.model.is_multilingual and not self.language:
            return None  # language detection is the standard path's job
        # Pad the AUDIO, not the features: Whisper's mel of silence is not zero, and its normalisation is relative
        # to the loudest frame, as in the standard path (which pads with 30 s of zeros).
        padded = np.zeros(round(self.window_s * SPEECH_RATE), dtype=np.float32)
        padded[: len(samples)] = samples
        frames = round(self.window_s * SPEECH_RATE / model.feature_extractor.hop_length)
        window = np.ascontiguousarray(model.feature_extractor(padded)[:, :frames], dtype=np.float32)
        tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe",
                              language=self.language if model.model.is_multilingual else "en")
        previous = tokenizer.encode(" " + prompt_text.strip())[-(model.max_length // 2 - 1):] if prompt_text else []
        prompt = [*([tokenizer.sot_prev, *previous] if previous else []), *tokenizer.sot_sequence,
                  tokenizer.no_timestamps]
        result = model.model.generate(
            model.encode(window), [prompt], beam_size=self.beam_size, max_length=model.max_length,
            return_scores=True, return_no_speech_prob=True, suppress_blank=True,
            suppress_tokens=get_suppressed_tokens(tokenizer, (-1,)),
        )[0]
        tokens = [t for t in result.sequences_ids[0] if t < tokenizer.eot]
        avg_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1)
        if result.no_speech_prob > 0.9 or (result.no_speech_prob > 0.6 and avg_logprob < -1.0):
            return ""
        return str(tokenizer.decode(tokens)).strip()

    async def transcribe(self, audio16k: Audio, speculative: bool = False, context: str = "") -> Transcript:
        """Decode one utterance on the Whisper worker thread, leaving the event loop free."""
        return await self.submit(audio16k, speculative, context)

    def submit(self, audio16k: Audio, speculative: bool = False, context: str = "") -> asyncio.Future[Transcript]:
        """Queue a decode on the worker thread now; await the returned future for the result."""
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._executor, self.transcribe_sync, audio16k, speculative, context)

    def warm_up(self) -> None:
        """Decode one second of silence: the first decode pays one-off setup that should not land on a user's turn."""
        self.transcribe_sync(np.zeros(SPEECH_RATE, dtype=np.float32))

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


def transcriber_from_config(config: Config) -> Transcriber:
    """The [stt] section as a Transcriber (loads the model: blocking, ~0.5 s for tiny.en)."""
    return Transcriber(
        config.stt.model,
        beam_size=config.stt.beam_size,
        device=config.stt.device,
        compute_type=config.stt.compute_type,
        threads=config.stt.threads,
        language=config.stt.language or None,
        models_dir=config.models_dir,
        window_s=config.stt.window_s,
        initial_prompt=config.stt.initial_prompt,
    )


class TurnTranscriber:
    """Follows the endpointer's events and produces one Transcript per turn, decoding speculatively at pauses.

    Call observe() with every event; for SpeechEnded it returns the future of that turn's transcript, for
    SpeechPaused the future of the speculative one (the app answers it speculatively and reads it to choose the
    hang-over). A speculative decode is reused only for the same turn and the same number of samples (no speech
    since the pause); otherwise it is dropped (its thread finishes but the result is ignored) and the final audio is
    decoded.
    """

    def __init__(self, transcriber: Transcriber, speculate: bool = True) -> None:
        self._transcriber = transcriber
        self._speculate = speculate
        self._speculation: tuple[SpeechPaused, asyncio.Future[Transcript]] | None = None
        self.reused = 0
        self.discarded = 0

    def observe(self, event: TurnEvent) -> asyncio.Future[Transcript] | None:
        if isinstance(event, SpeechPaused):
            self._drop()
            if not self._speculate:
                return None
            future = self._transcriber.submit(event.audio, speculative=True)
            self._speculation = (event, future)
            return future
        if isinstance(event, SpeechResumed | SpeechStarted):
            self._drop()
            return None
        if isinstance(event, SpeechEnded):
            if self._speculation is not None:
                paused, future = self._speculation
                if paused.turn == event.turn and paused.audio.shape == event.audio.shape:
                    self._speculation = None
                    self.reused += 1
                    return future
                self._drop()
            return self._transcriber.submit(event.audio)
        return None

    def _drop(self) -> None:
        if self._speculation is None:
            return
        _, future = self._speculation
        self._speculation = None
        self.discarded += 1
        future.cancel()  # dequeues it if it has not started; a running decode just finishes unobserved
        future.add_done_callback(_consume)


def _consume(future: asyncio.Future[Transcript]) -> None:
    if not future.cancelled():
        future.exception()
