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

TurnTranscriber hides end-of-turn latency: it starts decoding at SpeechStopped (the first silent VAD window after
speech, ~32 ms in) or else at SpeechPaused (a short silence, audio.speculate_ms) while the endpointer's hang-over
(~700 ms) is still running, and hands that result over at SpeechPaused and SpeechEnded when no speech window came
since (the events' `voiced` is unchanged) and the windows added since are no louder than the silent window the stop
was called on. The audio then differs only in trailing silence (a stop's 32 ms against a pause's ~96 ms), and the
short window pads the audio with zeros to 10 s anyway, so Whisper hears the same. The loudness check is needed:
Silero already hears silence in the closure of a word-final plosive, and the burst after it is in the pause's audio
only (measured: espeak-ng "...in a week?", the burst at -39 dBFS after a -64 dBFS stop window, was heard as "...we
that we?" at the stop and "...we that week?" at the pause; the 7 other latency questions decoded the same). While
the user speaks it can also decode the utterance so far for display (`partial`), only when no other decode is
queued or running, so at most one such draft can stand between a stop and its decode.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.levels import rms_dbfs
from voicecli.audio.rates import SPEECH_RATE
from voicecli.config import Config
from voicecli.listen.endpointing import (
    WINDOW,
    SpeechEnded,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    SpeechStopped,
    TurnEvent,
)

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
        self._jobs: dict[concurrent.futures.Future[Transcript], tuple[asyncio.Future[Transcript], threading.Event]] = {}
        """Decodes queued or running, with the future submit() returned for each; one leaves on the worker thread
        when it is done, before that future's result reaches the event loop (see submit)."""

    def prompt_for(self, context: str = "") -> str:
        """The decoder prompt: the configured initial prompt, then `context` (e.g. the conversation's last words)."""
        return " ".join(part.strip() for part in (self.initial_prompt, context) if part.strip())

    def transcribe_sync(self, audio16k: Audio, speculative: bool = False, context: str = "",
                        beam_size: int | None = None, abandon: threading.Event | None = None) -> Transcript:
        """Decode one utterance (16 kHz mono float32) on the calling thread; `context`: text said before it, which
        the decoder is conditioned on after the initial prompt (see prompt_for); `beam_size`: this decode's beam
        instead of the configured one (a draft of the words so far is greedy: it is only shown); `abandon`: once
        set, the decode gives up with an empty text after its encoder pass (see withdraw)."""
        prompt = self.prompt_for(context)
        beam = beam_size or self.beam_size
        samples = np.ascontiguousarray(np.asarray(audio16k, dtype=np.float32).reshape(-1))
        started = time.monotonic()
        if len(samples) == 0:
            return Transcript("", 0.0, 0.0, self.language or "", started, started, speculative)
        short = self._transcribe_short(samples, prompt, beam, abandon)
        if short is not None:
            finished = time.monotonic()
            return Transcript(drop_repeats(short), finished - started, len(samples) / SPEECH_RATE,
                              self.language or "en", started, finished, speculative)
        segments, info = self._model.transcribe(
            samples,
            language=self.language,  # ignored by English-only models; None lets a multilingual one detect
            beam_size=beam,
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

    def _transcribe_short(self, samples: Audio, prompt_text: str = "", beam_size: int | None = None,
                          abandon: threading.Event | None = None) -> str | None:
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
        encoded = model.encode(window)
        if abandon is not None and abandon.is_set():
            return ""  # withdrawn while encoding: nobody wants the words, and another decode waits for the worker
        result = model.model.generate(
            encoded, [prompt], beam_size=beam_size or self.beam_size, max_length=model.max_length,
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

    def submit(self, audio16k: Audio, speculative: bool = False, context: str = "",
               beam_size: int | None = None) -> asyncio.Future[Transcript]:
        """Queue a decode on the worker thread now; await the returned future for the result."""
        abandon = threading.Event()
        job = self._executor.submit(self.transcribe_sync, audio16k, speculative, context, beam_size, abandon)
        # Done callbacks run in the order they were added, on the worker thread: this one before wrap_future's, so
        # `busy` is already false when an awaiting task resumes (added after, the loop could resume it first).
        job.add_done_callback(lambda done: self._jobs.pop(done, None))
        future = asyncio.wrap_future(job, loop=asyncio.get_running_loop())
        self._jobs[job] = (future, abandon)
        if job.done():  # finished (or cancelled) before it was listed: its callback found nothing to take away
            self._jobs.pop(job, None)
        return future

    @property
    def busy(self) -> bool:
        """A decode is queued or running on the worker (a cancelled future whose thread still runs counts)."""
        return bool(self._jobs)

    def withdraw(self, future: asyncio.Future[Transcript]) -> None:
        """A decode nobody needs any more: off the queue if it has not started; if it runs, it gives up after its
        encoder pass (CTranslate2 cannot stop a pass midway) with an empty text, so that the decode that replaces
        it (a stop's, a pause's, a turn's end) waits for the worker at most that long (tiny.en: ~half a decode)."""
        for job, (listed, abandon) in list(self._jobs.items()):  # a copy: the worker thread takes jobs out
            if listed is future:
                abandon.set()
                job.cancel()  # only succeeds while queued; the future follows it

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


class Decoder(Protocol):
    """What TurnTranscriber needs of a Transcriber (tests give it a fake)."""

    def submit(self, audio16k: Audio, speculative: bool = False, context: str = "",
               beam_size: int | None = None) -> asyncio.Future[Transcript]: ...

    @property
    def busy(self) -> bool: ...

    def withdraw(self, future: asyncio.Future[Transcript]) -> None: ...


QUIET_MARGIN_DB = 6.0
"""Windows added after a stop count as silence when no louder than the stop's own silent window plus this."""


def only_silence_after(audio: Audio, samples: int) -> bool:
    """True when every window of `audio` after its first `samples` is no louder than the window just before them
    (the silent window a SpeechStopped was called on) + QUIET_MARGIN_DB: nothing Whisper would hear was added."""
    floor = rms_dbfs(audio[max(0, samples - WINDOW) : samples])
    return all(rms_dbfs(audio[start : start + WINDOW]) <= floor + QUIET_MARGIN_DB
               for start in range(samples, len(audio), WINDOW))


PARTIAL_BEAM = 1
"""A draft of the words so far is decoded greedily: it is only shown, and the shorter it runs the less a stop that
comes while it runs waits for the worker (tiny.en, quality set: beam 1 ~121 ms p50 against beam 5's ~185)."""


class TurnTranscriber:
    """Follows the endpointer's events and produces one Transcript per turn, decoding speculatively at pauses.

    Call observe() with every event; for SpeechEnded it returns the future of that turn's transcript, for
    SpeechStopped and SpeechPaused the future of the speculative one (the app answers it speculatively and reads it
    to choose the hang-over). A speculative decode is handed over to a later SpeechPaused or SpeechEnded of the same
    turn when no speech window came between them (same `voiced`) and what was added is silence (only_silence_after).
    Otherwise it is dropped (taken off the queue, or cut short after its encoder pass: Transcriber.withdraw) and the
    later audio is decoded.

    partial() decodes the utterance so far while the user speaks, only when the worker is idle: a stop's, a pause's
    or the final decode is never queued behind more than the one draft already running, and that one is withdrawn
    (it gives way after its encoder pass, Transcriber.withdraw), as is a stop's decode made stale by more speech.
    """

    def __init__(self, transcriber: Decoder, speculate: bool = True) -> None:
        self._transcriber = transcriber
        self._speculate = speculate
        # turn, voiced, samples decoded, the decode
        self._speculation: tuple[int, int, int, asyncio.Future[Transcript]] | None = None
        self.reused = 0
        self.discarded = 0
        self.partials = 0
        self._partial: asyncio.Future[Transcript] | None = None

    def observe(self, event: TurnEvent) -> asyncio.Future[Transcript] | None:
        if isinstance(event, SpeechStopped | SpeechPaused):
            if not self._speculate:
                return None
            taken = self._take(event.turn, event.voiced, event.audio)
            if taken is not None:
                self._speculation = (event.turn, event.voiced, *taken)
                return taken[1]
            self._give_way()
            future = self._transcriber.submit(event.audio, speculative=True)
            self._speculation = (event.turn, event.voiced, len(event.audio), future)
            return future
        if isinstance(event, SpeechResumed | SpeechStarted):
            self._drop()
            return None
        if isinstance(event, SpeechEnded):
            taken = None if event.forced else self._take(event.turn, event.voiced, event.audio)
            if taken is not None:
                return taken[1]
            self._give_way()
            return self._transcriber.submit(event.audio)
        return None

    def _give_way(self) -> None:
        """A decode the turn needs is about to be queued: a draft of the words so far still running yields."""
        if self._partial is not None:
            self._transcriber.withdraw(self._partial)
            self._partial = None

    def partial(self, audio16k: Audio) -> asyncio.Future[Transcript] | None:
        """Decode the utterance so far (greedy, speculative) if nothing else is queued or running; else None."""
        if self._transcriber.busy:
            return None
        self.partials += 1
        self._partial = self._transcriber.submit(audio16k, speculative=True, beam_size=PARTIAL_BEAM)
        return self._partial

    def _take(self, turn: int, voiced: int, audio: Audio) -> tuple[int, asyncio.Future[Transcript]] | None:
        """The speculative decode (samples decoded, its future) if it is of this turn with no speech and no sound
        since (and was not cancelled), else None (and it is dropped)."""
        if self._speculation is None:
            return None
        held_turn, held_voiced, held_samples, future = self._speculation
        if (held_turn == turn and held_voiced == voiced and voiced > 0 and not future.cancelled()
                and len(audio) >= held_samples and only_silence_after(audio, held_samples)):
            self._speculation = None
            self.reused += 1
            return held_samples, future
        self._drop()
        return None

    def _drop(self) -> None:
        if self._speculation is None:
            return
        _, _, _, future = self._speculation
        self._speculation = None
        self.discarded += 1
        self._transcriber.withdraw(future)
        future.add_done_callback(_consume)


def _consume(future: asyncio.Future[Transcript]) -> None:
    if not future.cancelled():
        future.exception()
