"""Transcription with the real faster-whisper tiny.en: offline, speculative at pauses, and live from the virtual mic."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from tests.listen.test_endpointing import loud_span, run, silence, speak
from tests.pulse import PrivatePulse
from voicecli.audio.rates import SPEECH_RATE
from voicecli.listen.endpointing import (
    WINDOW,
    Endpointer,
    PushToTalk,
    SileroVad,
    SpeechEnded,
    SpeechPaused,
    SpeechStopped,
    TurnEvent,
)
from voicecli.listen.microphone import Microphone
from voicecli.listen.transcription import (
    Transcriber,
    Transcript,
    TurnTranscriber,
    WhisperModelMissing,
    drop_repeats,
    normalise,
    whisper_model_dir,
)

Audio = NDArray[np.float32]
KEY_WORDS = ("legs", "spider")
"""tiny.en hears this espeak-ng question right with either encoder window and voice tried (unlike "the capital of
France", which it hears as "capital and friends" or "on thrones" depending on window, voice and CPU)."""


def whisper_models_dir() -> Path:
    env = os.environ.get("VOICECLI_MODELS_DIR")
    directory = Path(env) if env else Path.home() / ".local" / "share" / "voicecli" / "models"
    if not (directory / "whisper-tiny.en" / "model.bin").is_file():
        pytest.fail(f"whisper-tiny.en missing under {directory}: run `voicecli models install --only whisper-tiny.en`")
    return directory


def has_key_words(transcript: Transcript) -> bool:
    words = normalise(transcript.text).split()
    return all(word in words for word in KEY_WORDS)


@pytest.fixture(scope="module")
def transcriber() -> Iterator[Transcriber]:
    model = Transcriber("tiny.en", beam_size=5, threads=2, models_dir=whisper_models_dir())
    model.warm_up()
    yield model
    model.close()


@pytest.fixture(scope="module")
def prompt(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Audio]:
    return speak("How many legs does a spider have", tmp_path_factory.mktemp("speech"))


def test_names_resolve_to_local_directories(tmp_path: Path) -> None:
    for name in ("whisper-tiny.en", "whisper-base"):
        (tmp_path / name).mkdir()
        for file in ("model.bin", "config.json", "tokenizer.json"):
            (tmp_path / name / file).write_bytes(b"x")
    assert whisper_model_dir("tiny.en", tmp_path) == tmp_path / "whisper-tiny.en"
    assert whisper_model_dir("whisper-tiny.en", tmp_path) == tmp_path / "whisper-tiny.en"
    assert whisper_model_dir("base", tmp_path) == tmp_path / "whisper-base"
    assert whisper_model_dir(tmp_path / "whisper-base", Path("/elsewhere")) == tmp_path / "whisper-base"


def test_missing_model_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(WhisperModelMissing, match=r"voicecli models install --only whisper-tiny\.en"):
        Transcriber("tiny.en", models_dir=tmp_path)
    (tmp_path / "whisper-small").mkdir()
    (tmp_path / "whisper-small" / "model.bin").write_bytes(b"x")
    with pytest.raises(WhisperModelMissing, match=r"missing config\.json, tokenizer\.json"):
        whisper_model_dir("small", tmp_path)
    with pytest.raises(WhisperModelMissing, match="CTranslate2"):
        whisper_model_dir(tmp_path / "nowhere", tmp_path)


def test_normalise() -> None:
    assert normalise(" What is the capital of France? ") == "what is the capital of france"
    assert normalise("It's -- done!") == "it's done"


@pytest.mark.slow
async def test_transcribes_the_prompt(transcriber: Transcriber, prompt: tuple[Path, Audio]) -> None:
    audio = np.concatenate([silence(0.3), prompt[1], silence(0.3)])
    transcript = await transcriber.transcribe(audio)
    assert has_key_words(transcript), transcript.text
    assert transcript.audio_seconds == pytest.approx(len(audio) / SPEECH_RATE)
    assert transcript.language == "en" and not transcript.speculative
    assert transcript.finished_at - transcript.started_at == pytest.approx(transcript.seconds)
    empty = await transcriber.transcribe(np.zeros(0, dtype=np.float32))
    assert empty.text == ""


@pytest.mark.slow
async def test_decoding_does_not_block_the_event_loop(transcriber: Transcriber, prompt: tuple[Path, Audio]) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    transcript = await transcriber.transcribe(prompt[1])
    task.cancel()
    # The loop kept turning while Whisper worked on its thread (a blocked loop would tick at most once).
    assert ticks >= 5, f"{ticks} ticks in {transcript.seconds:.2f} s of decoding"


@pytest.mark.slow
async def test_speculative_decode_is_reused_when_the_user_stays_silent(
    transcriber: Transcriber, prompt: tuple[Path, Audio]
) -> None:
    turns = TurnTranscriber(transcriber)
    futures: list[asyncio.Future[Transcript]] = []
    for _, event in run(Endpointer(), np.concatenate([silence(0.5), prompt[1], silence(1.2)])):
        future = turns.observe(event)
        if future is not None and isinstance(event, SpeechEnded):
            futures.append(future)
    assert len(futures) == 1
    transcript = await futures[0]
    assert transcript.speculative and turns.reused == 1 and turns.discarded == 0
    assert has_key_words(transcript), transcript.text


@pytest.mark.slow
async def test_speculation_is_discarded_when_speech_resumes(transcriber: Transcriber, tmp_path: Path) -> None:
    _, first = speak("How many legs", tmp_path, "first")
    _, second = speak("does a spider have", tmp_path, "second")
    a, b = loud_span(first), loud_span(second)
    audio = np.concatenate([silence(0.5), first[a[0] : a[1]], silence(0.45), second[b[0] : b[1]], silence(1.2)])
    turns = TurnTranscriber(transcriber)
    results = [f for _, event in run(Endpointer(silence_ms=700), audio)
               if (f := turns.observe(event)) is not None and isinstance(event, SpeechEnded)]
    assert len(results) == 1
    transcript = await results[0]
    # The decode started at the first pause is dropped; the one from the final pause covers both parts.
    assert turns.discarded == 1 and turns.reused == 1 and transcript.speculative
    assert has_key_words(transcript), transcript.text


async def live_turn(mic: Microphone, detector: Endpointer, turns: TurnTranscriber, seconds: float) -> Transcript:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        block = await asyncio.wait_for(mic.queue.get(), timeout=5.0)
        for event in detector.feed(block.samples, block.at):
            future = turns.observe(event)
            if future is not None:
                return await future
    raise AssertionError("no end of turn")


@pytest.mark.slow
async def test_live_microphone_to_transcript(
    pulse: PrivatePulse, transcriber: Transcriber, prompt: tuple[Path, Audio]
) -> None:
    detector = Endpointer(vad=SileroVad())
    turns = TurnTranscriber(transcriber)
    with Microphone() as mic:
        mic.start()
        player = pulse.play_into_mic(prompt[0], wait=False)
        transcript = await live_turn(mic, detector, turns, seconds=30.0)
        player.wait(timeout=30)
    assert has_key_words(transcript), transcript.text


@pytest.mark.slow
async def test_live_push_to_talk(pulse: PrivatePulse, transcriber: Transcriber, prompt: tuple[Path, Audio]) -> None:
    ptt = PushToTalk()
    events: list[TurnEvent] = []
    with Microphone() as mic:
        mic.start()
        started = ptt.press()
        assert started is not None
        player = pulse.play_into_mic(prompt[0], wait=False)
        played_out: float | None = None
        while True:  # every block until one captured well after paplay finished (however late it started)
            block = await asyncio.wait_for(mic.queue.get(), timeout=5.0)
            events += ptt.feed(block.samples, block.at)
            if played_out is None and player.poll() is not None:
                played_out = time.monotonic()
            if played_out is not None and block.at > played_out + 0.3:
                break
        ended = ptt.release()
    assert events == []
    assert isinstance(ended, SpeechEnded) and ended.turn == started.turn and ended.at > started.at
    transcript = await transcriber.transcribe(ended.audio)
    assert has_key_words(transcript), transcript.text


@pytest.mark.slow
async def test_short_window_hears_the_same_words_and_long_turns_take_the_standard_path(
    transcriber: Transcriber, prompt: tuple[Path, Audio]
) -> None:
    """The 10 s encoder window is a speed-up only: same key words as the 30 s window, silence is still nothing,
    and an utterance longer than the window is decoded the standard way (whole)."""
    assert transcriber.window_s == 10.0
    audio = np.concatenate([silence(0.3), prompt[1], silence(0.3)])
    assert transcriber._transcribe_short(audio) is not None
    short = await transcriber.transcribe(audio)
    assert has_key_words(short), short.text
    assert (await transcriber.transcribe(silence(1.0))).text == ""
    long_audio = np.concatenate([prompt[1], silence(6.0), prompt[1], silence(0.3)])
    assert transcriber._transcribe_short(long_audio) is None
    whole = await transcriber.transcribe(long_audio)
    assert normalise(whole.text).split().count("spider") == 2, whole.text


class _Recorder:
    """Stands in for the CTranslate2 Whisper model: records the prompts of generate() and delegates everything."""

    def __init__(self, model: object) -> None:
        self._model = model
        self.prompts: list[list[int]] = []

    def generate(self, features: object, prompts: list[list[int]], **options: object) -> object:
        self.prompts.extend(list(p) for p in prompts)
        return self._model.generate(features, prompts, **options)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._model, name)


def test_prompt_is_the_initial_prompt_then_the_context() -> None:
    transcriber = Transcriber.__new__(Transcriber)
    transcriber.initial_prompt = " A question to a voice assistant. "
    assert transcriber.prompt_for() == "A question to a voice assistant."
    assert transcriber.prompt_for("The capital of France is Paris.") == (
        "A question to a voice assistant. The capital of France is Paris.")
    transcriber.initial_prompt = ""
    assert transcriber.prompt_for("  ") == "" and transcriber.prompt_for("Paris.") == "Paris."


@pytest.mark.slow
async def test_initial_prompt_reaches_the_decoder_and_keeps_the_words(
    transcriber: Transcriber, prompt: tuple[Path, Audio], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prompt goes before the start-of-transcript sequence after <|startofprev|>, on the short-window path and
    on the standard one, and the known espeak question is still heard right with it."""
    from faster_whisper.tokenizer import Tokenizer

    recorder = _Recorder(transcriber._model.model)
    monkeypatch.setattr(transcriber._model, "model", recorder)
    monkeypatch.setattr(transcriber, "initial_prompt", "A question to a voice assistant.")
    tokenizer = Tokenizer(transcriber._model.hf_tokenizer, False, task="transcribe", language="en")
    expected = [tokenizer.sot_prev, *tokenizer.encode(" A question to a voice assistant. About animals."),
                *tokenizer.sot_sequence]
    audio = np.concatenate([silence(0.3), prompt[1], silence(0.3)])
    for window_s in (10.0, 0.0):  # the short window, then Whisper's standard 30 s path
        monkeypatch.setattr(transcriber, "window_s", window_s)
        recorder.prompts.clear()
        heard = await transcriber.transcribe(audio, context="About animals.")
        assert has_key_words(heard), (window_s, heard.text)
        assert recorder.prompts and recorder.prompts[0][: len(expected)] == expected, window_s
    monkeypatch.setattr(transcriber, "window_s", 10.0)
    recorder.prompts.clear()
    monkeypatch.setattr(transcriber, "initial_prompt", "")
    plain = await transcriber.transcribe(audio)
    assert recorder.prompts[0][0] != tokenizer.sot_prev and has_key_words(plain), plain.text


def test_a_sentence_repeated_whole_is_heard_once() -> None:
    assert drop_repeats("What do bees make? What do bees make?") == "What do bees make?"
    assert drop_repeats(" What color are ripe bananas? what color are ripe bananas. ") == "What color are ripe bananas?"
    assert drop_repeats("No. No. Really?") == "No. No. Really?"  # short sentences are said twice
    assert drop_repeats("Hello there. Hello there, friend.") == "Hello there. Hello there, friend."
    assert drop_repeats("") == "" and drop_repeats("What is 2 + 2?") == "What is 2 + 2?"


class FakeDecoder:
    """The Whisper worker as TurnTranscriber sees it: decodes queue in order, the test finishes the running one."""

    def __init__(self) -> None:
        self.jobs: list[tuple[asyncio.Future[Transcript], int, int | None]] = []  # future, samples, beam
        self.withdrawn = 0
        self.cut_short = 0

    def submit(self, audio16k: Audio, speculative: bool = False, context: str = "",
               beam_size: int | None = None) -> asyncio.Future[Transcript]:
        future: asyncio.Future[Transcript] = asyncio.get_running_loop().create_future()
        self.jobs.append((future, len(audio16k), beam_size))
        return future

    def _live(self) -> list[asyncio.Future[Transcript]]:
        return [future for future, _, _ in self.jobs if not future.done()]

    @property
    def busy(self) -> bool:
        return bool(self._live())

    def withdraw(self, future: asyncio.Future[Transcript]) -> None:
        live = self._live()
        if future in live[1:]:  # queued behind the running one: taken off
            self.withdrawn += 1
            future.cancel()
        elif future in live:  # running: it gives up after the encoder pass (here: when the test finishes it)
            self.cut_short += 1

    def finish(self, text: str, started_at: float = 0.0) -> None:
        """The running decode (the oldest live one) returns `text`."""
        future = self._live()[0]
        future.set_result(Transcript(text, 0.1, 1.0, "en", started_at, started_at + 0.1, True))


def utterance(windows: int) -> Audio:
    return np.zeros(windows * WINDOW, dtype=np.float32)


async def test_a_stops_decode_is_handed_to_the_pause_and_the_end_with_no_speech_between() -> None:
    decoder = FakeDecoder()
    turns = TurnTranscriber(decoder)
    stop = turns.observe(SpeechStopped(1.0, 1, utterance(41), voiced=40 * WINDOW))
    pause = turns.observe(SpeechPaused(1.1, 1, utterance(43), voiced=40 * WINDOW))
    end = turns.observe(SpeechEnded(1.7, 1, utterance(43), 1.0, voiced=40 * WINDOW))
    assert stop is pause is end and len(decoder.jobs) == 1 and decoder.jobs[0][1] == 41 * WINDOW
    assert (turns.reused, turns.discarded) == (2, 0)


async def test_speech_after_a_stop_makes_its_decode_stale() -> None:
    """A dip inside the speech: the pause that follows has more speech (`voiced`), so it is decoded anew, and the
    stale decode is taken off the queue only if it has not started."""
    decoder = FakeDecoder()
    turns = TurnTranscriber(decoder)
    first = turns.observe(SpeechStopped(1.0, 1, utterance(21), voiced=20 * WINDOW))
    second = turns.observe(SpeechStopped(1.5, 1, utterance(36), voiced=35 * WINDOW))  # running: first, queued: this
    pause = turns.observe(SpeechPaused(1.6, 1, utterance(50), voiced=47 * WINDOW))
    assert first is not None and second is not None and pause not in (first, second)
    assert [samples for _, samples, _ in decoder.jobs] == [21 * WINDOW, 36 * WINDOW, 50 * WINDOW]
    assert second.cancelled() and not first.cancelled() and (decoder.withdrawn, decoder.cut_short) == (1, 1)
    assert (turns.reused, turns.discarded) == (0, 2)
    # Another turn's end, or a forced one, never takes a decode of a pause.
    assert turns.observe(SpeechEnded(2.0, 2, utterance(50), 1.5, voiced=47 * WINDOW)) is not pause
    turns.observe(SpeechPaused(3.0, 3, utterance(60), voiced=57 * WINDOW))
    assert len(decoder.jobs) == 5
    turns.observe(SpeechEnded(4.0, 3, utterance(60), 3.0, forced=True, voiced=57 * WINDOW))
    assert len(decoder.jobs) == 6


async def test_a_partial_is_greedy_and_only_decoded_when_the_worker_is_idle() -> None:
    decoder = FakeDecoder()
    turns = TurnTranscriber(decoder)
    partial = turns.partial(utterance(20))
    assert partial is not None and decoder.jobs[-1][1:] == (20 * WINDOW, 1)
    assert turns.partial(utterance(40)) is None and len(decoder.jobs) == 1  # one at a time
    stop = turns.observe(SpeechStopped(1.0, 1, utterance(41), voiced=40 * WINDOW))
    assert stop is not None and decoder.jobs[-1][2] is None  # the stop's decode has the configured beam
    assert decoder.cut_short == 1  # and the partial running in front of it gives way
    decoder.finish("how many")
    assert turns.partial(utterance(41)) is None  # the stop's decode runs now
    decoder.finish("how many legs")
    assert turns.partial(utterance(45)) is not None and turns.partials == 2


def test_no_decode_at_a_stop_without_speculation() -> None:
    turns = TurnTranscriber(FakeDecoder(), speculate=False)
    assert turns.observe(SpeechStopped(1.0, 1, utterance(41), voiced=40 * WINDOW)) is None


@pytest.mark.slow
async def test_a_withdrawn_decode_gives_way_after_its_encoder_pass(
    transcriber: Transcriber, prompt: tuple[Path, Audio], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A draft of the words so far (or a stale stop's decode) stops after the encoder pass when a stop's, a
    pause's or an end's decode waits for the worker. The draft is withdrawn while its encoder pass runs (held
    there by the test, not caught by a sleep that a loaded machine stretches past the pass)."""
    encoding, release = threading.Event(), threading.Event()
    encode = transcriber._model.encode

    def held_encode(features: Any) -> Any:
        encoding.set()
        release.wait(30)
        return encode(features)

    monkeypatch.setattr(transcriber._model, "encode", held_encode)
    partial = transcriber.submit(prompt[1], speculative=True, beam_size=1)
    assert await asyncio.to_thread(encoding.wait, 30)  # the worker runs the draft's encoder pass
    final = transcriber.submit(prompt[1])
    transcriber.withdraw(partial)  # running: it stops after the encoder pass
    assert transcriber.busy
    release.set()
    cut, whole = await partial, await final
    assert cut.text == "" and has_key_words(whole) and cut.seconds < whole.seconds
    alone = await transcriber.submit(prompt[1], speculative=True, beam_size=1)
    assert alone.text and not transcriber.busy


async def test_a_sound_after_the_stop_is_decoded_again() -> None:
    """A word-final plosive: Silero hears silence in its closure, so the stop comes before the burst, which only the
    pause's audio holds ("week" heard as "we"); noise as loud as the stop's own silent window is no such sound."""
    decoder = FakeDecoder()
    turns = TurnTranscriber(decoder)
    stop_audio = np.concatenate([np.full(40 * WINDOW, 0.1, dtype=np.float32), np.full(WINDOW, 0.001, np.float32)])
    noise = np.concatenate([stop_audio, np.full(2 * WINDOW, 0.0015, np.float32)])  # +3.5 dB: the same silence
    burst = np.concatenate([stop_audio, np.full(WINDOW, 0.02, np.float32), np.full(WINDOW, 0.001, np.float32)])
    stop = turns.observe(SpeechStopped(1.0, 1, stop_audio, voiced=40 * WINDOW))
    assert turns.observe(SpeechPaused(1.1, 1, noise, voiced=40 * WINDOW)) is stop
    stop = turns.observe(SpeechStopped(2.0, 2, stop_audio, voiced=40 * WINDOW))
    pause = turns.observe(SpeechPaused(2.1, 2, burst, voiced=40 * WINDOW))
    assert pause is not stop and decoder.jobs[-1][1] == len(burst) and turns.discarded == 2  # turn 1 never ended
    assert turns.observe(SpeechEnded(2.7, 2, burst, 2.0, voiced=40 * WINDOW)) is pause  # the same audio again
