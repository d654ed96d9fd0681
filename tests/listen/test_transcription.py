"""Transcription with the real faster-whisper tiny.en: offline, speculative at pauses, and live from the virtual mic."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from tests.listen.test_endpointing import loud_span, run, silence, speak
from tests.pulse import PrivatePulse
from voicecli.audio.rates import SPEECH_RATE
from voicecli.listen.endpointing import Endpointer, PushToTalk, SileroVad, SpeechEnded, TurnEvent
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
        deadline = time.monotonic() + len(prompt[1]) / SPEECH_RATE + 0.5
        while time.monotonic() < deadline:
            block = await asyncio.wait_for(mic.queue.get(), timeout=5.0)
            events += ptt.feed(block.samples, block.at)
        player.wait(timeout=30)
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
