"""Endpointing on real speech: espeak-ng prompts through the real Silero VAD, offline and over a live PulseAudio mic."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from tests.pulse import PrivatePulse
from voicecli.audio.levels import rms_dbfs
from voicecli.audio.rates import SPEECH_RATE
from voicecli.listen.endpointing import (
    WINDOW,
    Endpointer,
    PushToTalk,
    SileroVad,
    SpeechEnded,
    SpeechFaded,
    SpeechHint,
    SpeechOnset,
    SpeechPaused,
    SpeechStarted,
    SpeechStopped,
    TurnEvent,
)
from voicecli.listen.microphone import Microphone

Audio = NDArray[np.float32]
PROMPT = "What is the capital of France"


def speak(text: str, directory: Path, name: str = "prompt") -> tuple[Path, Audio]:
    """espeak-ng, US voice, 120 words/min: the WAV for paplay and its samples at 16 kHz. (tiny.en hears the default
    voice's "of France" as "on thrones" on some CPUs: int8 kernels differ; the US voice was heard right
    at 120-140 words/min on the machines tried.)"""
    if shutil.which("espeak-ng") is None or shutil.which("sox") is None:
        pytest.fail("espeak-ng and sox are needed for speech fixtures: apt-get install espeak-ng sox")
    wav = directory / f"{name}.wav"
    raw = directory / f"{name}.16k.f32"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "120", "-w", str(wav), text], check=True, timeout=60)
    subprocess.run(["sox", str(wav), "-r", "16000", "-c", "1", "-t", "f32", str(raw)], check=True, timeout=60)
    return wav, np.fromfile(raw, dtype=np.float32)


def silence(seconds: float) -> Audio:
    return np.zeros(round(seconds * SPEECH_RATE), dtype=np.float32)


def loud_span(audio: Audio, floor_dbfs: float = -45.0) -> tuple[int, int]:
    """First and last sample index of the 32 ms windows louder than floor_dbfs (where the speech is)."""
    loud = [i for i in range(0, len(audio) - WINDOW + 1, WINDOW) if rms_dbfs(audio[i : i + WINDOW]) > floor_dbfs]
    assert loud, "no speech in the fixture"
    return loud[0], loud[-1] + WINDOW


def run(detector: Endpointer | PushToTalk, audio: Audio, block: int = WINDOW) -> list[tuple[int, TurnEvent]]:
    """Feed audio in blocks stamped with their end time in the stream; events paired with samples fed so far."""
    events: list[tuple[int, TurnEvent]] = []
    for start in range(0, len(audio), block):
        end = min(start + block, len(audio))
        events += [(end, e) for e in detector.feed(audio[start:end], at=end / SPEECH_RATE)]
    return events


def locate(stream: Audio, piece: Audio) -> int:
    """Where `piece` sits in `stream` as an exact copy starting on a window boundary (fails if it does not)."""
    starts = [
        s for s in range(0, len(stream) - len(piece) + 1, WINDOW) if np.array_equal(stream[s : s + len(piece)], piece)
    ]
    assert len(starts) == 1, f"the utterance is not one slice of the stream ({len(starts)} matches)"
    return starts[0]


def kinds(events: Sequence[tuple[float, TurnEvent]]) -> list[str]:
    return [type(e).__name__ for _, e in events]


@pytest.fixture(scope="module")
def prompt(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Audio]:
    return speak(PROMPT, tmp_path_factory.mktemp("speech"))


@pytest.fixture(scope="module")
def vad() -> SileroVad:
    return SileroVad()


def test_streaming_vad_matches_whole_file_vad(prompt: tuple[Path, Audio], vad: SileroVad) -> None:
    from faster_whisper.vad import get_vad_model

    audio = np.concatenate([silence(0.5), prompt[1], silence(0.5)])
    audio = audio[: len(audio) // WINDOW * WINDOW]
    vad.reset()
    streamed = np.array([vad(audio[i : i + WINDOW]) for i in range(0, len(audio), WINDOW)])
    whole = np.asarray(get_vad_model()(audio.copy())).reshape(-1)
    np.testing.assert_allclose(streamed, whole, atol=1e-5)
    assert streamed.max() > 0.9 and streamed[:10].max() < 0.2


def test_one_turn_with_pre_roll_tail_and_hang_over(prompt: tuple[Path, Audio], vad: SileroVad) -> None:
    speech = prompt[1]
    audio = np.concatenate([silence(1.0), speech, silence(1.5)])
    first_loud, last_loud = loud_span(audio)
    vad.reset()
    endpointer = Endpointer(silence_ms=700, pre_roll_ms=300, tail_ms=250, vad=vad)
    events = run(endpointer, audio)
    assert kinds(events) == ["SpeechStarted", "SpeechPaused", "SpeechEnded"]
    (started_fed, started), (_, paused), (ended_fed, ended) = events
    assert isinstance(started, SpeechStarted) and isinstance(paused, SpeechPaused) and isinstance(ended, SpeechEnded)
    assert started.turn == paused.turn == ended.turn == 1
    assert started_fed > first_loud
    # The turn ends only after the hang-over: at least 700 ms of audio went by after the last loud window.
    assert ended_fed - last_loud >= 0.7 * SPEECH_RATE - WINDOW
    assert ended.at >= ended.last_speech_at + 0.7 - WINDOW / SPEECH_RATE
    # The utterance is one contiguous slice of the stream: it starts before the speech (pre-roll) and covers it.
    start = locate(audio, ended.audio)
    assert start < first_loud - 0.1 * SPEECH_RATE
    assert start + len(ended.audio) >= last_loud
    # The trailing silence kept is about tail_ms, not the whole hang-over.
    assert start + len(ended.audio) - last_loud < 0.5 * SPEECH_RATE
    # The paused audio is exactly the ended audio: what makes speculative decoding reusable.
    np.testing.assert_array_equal(paused.audio, ended.audio)
    assert endpointer.speech_probability < 0.2 and not endpointer.in_speech


def test_silence_and_noise_produce_no_events(vad: SileroVad) -> None:
    vad.reset()
    assert run(Endpointer(vad=vad), silence(3.0)) == []
    rng = np.random.default_rng(5)
    noise = (rng.standard_normal(3 * SPEECH_RATE) * 0.01).astype(np.float32)
    vad.reset()
    endpointer = Endpointer(vad=vad)
    assert run(endpointer, noise) == []
    assert endpointer.speech_probability < 0.5


def test_blip_shorter_than_min_speech_is_ignored(prompt: tuple[Path, Audio], vad: SileroVad) -> None:
    speech = prompt[1]
    first_loud, _ = loud_span(speech)
    blip = speech[first_loud + 8000 : first_loud + 8000 + 2400]  # 150 ms out of the middle of the sentence
    vad.reset()
    assert run(Endpointer(min_speech_ms=250, vad=vad), np.concatenate([silence(1.0), blip, silence(1.5)])) == []
    vad.reset()
    assert kinds(run(Endpointer(min_speech_ms=64, vad=vad), np.concatenate([silence(1.0), blip, silence(1.5)]))) == [
        "SpeechStarted",
        "SpeechPaused",
        "SpeechEnded",
    ]


def test_an_onset_comes_before_the_start_and_for_a_blip_too(prompt: tuple[Path, Audio], vad: SileroVad) -> None:
    """onset_ms (barge-in) of speech is reported before the turn's start (min_speech_ms), with the turn number the
    start then carries; a blip that reaches onset_ms but not min_speech_ms gets the onset and nothing else."""
    speech = prompt[1]
    vad.reset()
    events = run(Endpointer(min_speech_ms=250, onset_ms=100, vad=vad),
                 np.concatenate([silence(1.0), speech, silence(1.5)]))
    assert kinds(events)[:2] == ["SpeechOnset", "SpeechStarted"]
    (onset_fed, onset), (started_fed, started) = events[:2]
    assert isinstance(onset, SpeechOnset) and isinstance(started, SpeechStarted)
    assert onset.turn == started.turn == 1
    assert 0.1 * SPEECH_RATE <= started_fed - onset_fed <= 0.2 * SPEECH_RATE  # ~150 ms sooner
    assert kinds(events).count("SpeechOnset") == 1  # not again inside the turn
    first_loud, _ = loud_span(speech)
    blip = speech[first_loud + 8000 : first_loud + 8000 + 2400]  # 150 ms
    vad.reset()
    assert kinds(run(Endpointer(min_speech_ms=250, onset_ms=64, vad=vad),
                     np.concatenate([silence(1.0), blip, silence(1.5)]))) == ["SpeechOnset"]
    for onset_ms in (0, 250, 400):  # off, or not shorter than a turn's start: no onsets
        vad.reset()
        assert "SpeechOnset" not in kinds(run(Endpointer(min_speech_ms=250, onset_ms=onset_ms, vad=vad),
                                              np.concatenate([silence(1.0), speech, silence(1.5)])))


def test_a_hint_comes_before_the_onset_and_a_blip_that_dies_fades(prompt: tuple[Path, Audio], vad: SileroVad) -> None:
    """hint_ms (hold the assistant's voice) of speech is reported before the onset (barge-in) and the start; speech
    that becomes a turn never fades; a blip past hint_ms that dies before the start is reported as faded."""
    speech = prompt[1]
    vad.reset()
    events = run(Endpointer(min_speech_ms=250, onset_ms=160, hint_ms=64, vad=vad),
                 np.concatenate([silence(1.0), speech, silence(1.5)]))
    assert kinds(events)[:3] == ["SpeechHint", "SpeechOnset", "SpeechStarted"]
    (hint_fed, hint), (onset_fed, _) = events[:2]
    assert isinstance(hint, SpeechHint) and hint.turn == 1
    assert 0.09 * SPEECH_RATE <= onset_fed - hint_fed <= 0.13 * SPEECH_RATE  # 3 windows sooner
    assert "SpeechFaded" not in kinds(events) and kinds(events).count("SpeechHint") == 1
    first_loud, _ = loud_span(speech)
    blip = speech[first_loud + 8000 : first_loud + 8000 + 2400]  # 150 ms
    vad.reset()
    blipped = run(Endpointer(min_speech_ms=250, hint_ms=64, vad=vad),
                  np.concatenate([silence(1.0), blip, silence(1.5)]))
    assert kinds(blipped) == ["SpeechHint", "SpeechFaded"]
    assert isinstance(blipped[1][1], SpeechFaded) and blipped[1][1].turn == 1  # the turn it would have been
    for hint_ms in (0, 160, 250):  # off, or not shorter than the onset: no hints
        vad.reset()
        assert "SpeechHint" not in kinds(run(Endpointer(min_speech_ms=250, onset_ms=160, hint_ms=hint_ms, vad=vad),
                                             np.concatenate([silence(1.0), speech, silence(1.5)])))


def test_short_gap_is_one_turn_long_gap_is_two(prompt: tuple[Path, Audio], vad: SileroVad) -> None:
    speech = prompt[1]
    first_loud, last_loud = loud_span(speech)
    core = speech[first_loud:last_loud]
    vad.reset()
    one = run(
        Endpointer(silence_ms=700, vad=vad), np.concatenate([silence(0.5), core, silence(0.45), core, silence(1.2)])
    )
    assert kinds(one) == ["SpeechStarted", "SpeechPaused", "SpeechResumed", "SpeechPaused", "SpeechEnded"]
    ended = one[-1][1]
    assert isinstance(ended, SpeechEnded) and len(ended.audio) > 2 * len(core)
    vad.reset()
    two = run(
        Endpointer(silence_ms=700, vad=vad), np.concatenate([silence(0.5), core, silence(1.0), core, silence(1.2)])
    )
    assert kinds(two) == ["SpeechStarted", "SpeechPaused", "SpeechEnded"] * 2
    assert [e.turn for _, e in two] == [1, 1, 1, 2, 2, 2]


def test_block_size_does_not_change_the_result(prompt: tuple[Path, Audio], vad: SileroVad) -> None:
    audio = np.concatenate([silence(0.7), prompt[1], silence(1.2)])
    results = []
    for block in (160, 512, 1000, 4800):
        vad.reset()
        events = run(Endpointer(vad=vad), audio, block)
        ended = events[-1][1]
        assert isinstance(ended, SpeechEnded)
        results.append((kinds(events), ended.audio))
    for names, utterance in results[1:]:
        assert names == results[0][0]
        np.testing.assert_array_equal(utterance, results[0][1])


def test_speculation_off_reports_only_start_and_end(prompt: tuple[Path, Audio], vad: SileroVad) -> None:
    vad.reset()
    events = run(Endpointer(speculate=False, vad=vad), np.concatenate([silence(0.5), prompt[1], silence(1.2)]))
    assert kinds(events) == ["SpeechStarted", "SpeechEnded"]


def test_endless_speech_is_cut_at_max_utterance(prompt: tuple[Path, Audio], vad: SileroVad) -> None:
    first_loud, last_loud = loud_span(prompt[1])
    core = prompt[1][first_loud:last_loud]
    vad.reset()
    events = run(Endpointer(max_utterance_ms=1000, vad=vad), np.concatenate([silence(0.5), core, silence(1.0)]))
    forced = [e for _, e in events if isinstance(e, SpeechEnded) and e.forced]
    assert forced and len(forced[0].audio) <= 1.1 * SPEECH_RATE


def test_bad_parameters_are_refused(vad: SileroVad) -> None:
    with pytest.raises(ValueError):
        Endpointer(threshold=1.5, vad=vad)
    with pytest.raises(ValueError):
        Endpointer(silence_ms=200, tail_ms=250, vad=vad)
    with pytest.raises(ValueError):
        vad(np.zeros(480, dtype=np.float32))


def test_push_to_talk_keeps_pre_roll_and_everything_while_pressed() -> None:
    ptt = PushToTalk(pre_roll_ms=100)
    stream = (np.arange(16000) / 16000).astype(np.float32)
    blocks = [stream[i : i + 800] for i in range(0, len(stream), 800)]  # 50 ms blocks
    for block in blocks[:6]:
        assert ptt.feed(block, at=0.0) == []
    assert ptt.release() is None
    started = ptt.press(at=1.0)
    assert started == SpeechStarted(1.0, 1) and ptt.pressed and ptt.speech_probability == 1.0
    assert ptt.press() is None
    for block in blocks[6:14]:
        assert ptt.feed(block, at=1.1) == []
    ended = ptt.release(at=2.0)
    assert isinstance(ended, SpeechEnded) and ended.turn == 1 and ended.at == 2.0 and not ended.forced
    np.testing.assert_array_equal(ended.audio, stream[4 * 800 : 14 * 800])  # 100 ms pre-roll + 8 blocks
    assert not ptt.pressed and ptt.speech_probability == 0.0
    for block in blocks[14:]:
        ptt.feed(block)
    second = ptt.press()
    assert second is not None and second.turn == 2


def test_push_to_talk_cuts_an_overlong_turn() -> None:
    ptt = PushToTalk(pre_roll_ms=0, max_utterance_ms=100)
    ptt.press()
    assert ptt.feed(np.zeros(800, dtype=np.float32)) == []
    events = ptt.feed(np.zeros(800, dtype=np.float32))
    assert len(events) == 1 and isinstance(events[0], SpeechEnded) and events[0].forced
    assert len(events[0].audio) == 1600 and not ptt.pressed


# -- live, over the private PulseAudio microphone --------------------------------------------------------------------


async def listen(
    mic: Microphone, detector: Endpointer, seconds: float, until_end: bool = True
) -> tuple[list[tuple[float, TurnEvent]], list[tuple[float, float]]]:
    """Feed live blocks to the detector for up to `seconds`; events with the captured seconds at detection, and
    (captured seconds, level) per block."""
    events: list[tuple[float, TurnEvent]] = []
    levels: list[tuple[float, float]] = []
    captured = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        block = await asyncio.wait_for(mic.queue.get(), timeout=5.0)
        captured += len(block.samples)
        levels.append((captured / SPEECH_RATE, rms_dbfs(block.samples)))
        events += [(captured / SPEECH_RATE, e) for e in detector.feed(block.samples, block.at)]
        if until_end and any(isinstance(e, SpeechEnded) for _, e in events):
            break
    return events, levels


@pytest.mark.slow
async def test_live_prompt_is_one_turn(pulse: PrivatePulse, prompt: tuple[Path, Audio], vad: SileroVad) -> None:
    vad.reset()
    endpointer = Endpointer(silence_ms=700, vad=vad)
    with Microphone() as mic:
        mic.start()
        player = pulse.play_into_mic(prompt[0], wait=False)
        events, levels = await listen(mic, endpointer, seconds=20.0)
        player.wait(timeout=30)
    assert kinds(events) == ["SpeechStarted", "SpeechPaused", "SpeechEnded"]
    last_loud = max(t for t, level in levels if level > -45.0)
    ended_captured, ended = events[-1]
    assert isinstance(ended, SpeechEnded)
    assert ended_captured - last_loud >= 0.7 - WINDOW / SPEECH_RATE
    speech_seconds = (loud_span(prompt[1])[1] - loud_span(prompt[1])[0]) / SPEECH_RATE
    assert len(ended.audio) / SPEECH_RATE > speech_seconds


@pytest.mark.slow
async def test_live_silence_produces_no_events(pulse: PrivatePulse, vad: SileroVad) -> None:
    vad.reset()
    endpointer = Endpointer(vad=vad)
    with Microphone() as mic:
        mic.start()
        events, levels = await listen(mic, endpointer, seconds=2.0, until_end=False)
    assert events == []
    assert len(levels) > 30 and endpointer.speech_probability < 0.5


@pytest.mark.parametrize("hold_ms", [300, 1400])
def test_end_after_sets_this_pauses_hang_over(prompt: tuple[Path, Audio], vad: SileroVad, hold_ms: int) -> None:
    """What the transcript-aware end of turn relies on: the hang-over chosen at the pause is the one applied."""
    audio = np.concatenate([silence(0.5), prompt[1], silence(2.5)])
    _, last_loud = loud_span(audio)
    vad.reset()
    endpointer = Endpointer(silence_ms=700, tail_ms=200, vad=vad)
    events: list[tuple[int, TurnEvent]] = []
    for start in range(0, len(audio), WINDOW):
        fed = [(start + WINDOW, e) for e in endpointer.feed(audio[start : start + WINDOW], at=start / SPEECH_RATE)]
        for _, event in fed:
            if isinstance(event, SpeechPaused):
                assert endpointer.paused_in(event.turn)
                endpointer.end_after(hold_ms)
        events += fed
    assert kinds(events) == ["SpeechStarted", "SpeechPaused", "SpeechEnded"]
    ended_fed, ended = events[-1]
    assert isinstance(ended, SpeechEnded)
    silence_ms = (ended_fed - last_loud) / SPEECH_RATE * 1000
    assert hold_ms - 64 <= silence_ms <= hold_ms + 200, silence_ms
    np.testing.assert_array_equal(events[1][1].audio, ended.audio)  # type: ignore[union-attr]


def test_end_after_is_forgotten_when_speech_resumes(prompt: tuple[Path, Audio], vad: SileroVad) -> None:
    """A short hang-over chosen at one pause must not cut the next pause: a resume restores the default."""
    speech = prompt[1]
    audio = np.concatenate([silence(0.5), speech, silence(0.4), speech, silence(2.0)])
    vad.reset()
    endpointer = Endpointer(silence_ms=700, tail_ms=200, vad=vad)
    events: list[TurnEvent] = []
    paused = 0
    for start in range(0, len(audio), WINDOW):
        for event in endpointer.feed(audio[start : start + WINDOW], at=start / SPEECH_RATE):
            events.append(event)
            if isinstance(event, SpeechPaused):
                paused += 1
                endpointer.end_after(1500 if paused == 1 else 700)
    assert [type(e).__name__ for e in events] == [
        "SpeechStarted", "SpeechPaused", "SpeechResumed", "SpeechPaused", "SpeechEnded"]
    endpointer.end_after(100)  # not paused any more: ignored
    assert not endpointer.in_speech


def test_a_stop_comes_first_with_the_pauses_speech_and_less_silence(prompt: tuple[Path, Audio], vad: SileroVad) -> None:
    """report_stops: the first silent window after the speech is reported before the pause, with the same speech
    (`voiced`) and one silent window where the pause keeps tail_ms: what lets the pause reuse its decode."""
    vad.reset()
    endpointer = Endpointer(silence_ms=700, tail_ms=96, report_stops=True, vad=vad)
    events = run(endpointer, np.concatenate([silence(1.0), prompt[1], silence(1.5)]))
    final = [(fed, e) for fed, e in events if isinstance(e, SpeechStopped | SpeechPaused | SpeechEnded)][-3:]
    assert kinds(final) == ["SpeechStopped", "SpeechPaused", "SpeechEnded"], kinds(events)
    (stop_fed, stopped), (pause_fed, paused), (_, ended) = final
    assert isinstance(stopped, SpeechStopped) and isinstance(paused, SpeechPaused) and isinstance(ended, SpeechEnded)
    assert stopped.voiced == paused.voiced == ended.voiced > 0 and stopped.turn == paused.turn == ended.turn == 1
    assert pause_fed - stop_fed == 2 * WINDOW  # 3 windows of tail: the stop is 64 ms sooner
    assert len(stopped.audio) == stopped.voiced + WINDOW and len(paused.audio) == paused.voiced + 3 * WINDOW
    np.testing.assert_array_equal(paused.audio[: len(stopped.audio)], stopped.audio)
    # Any stop before the last one was a dip inside the speech: speech came after it, so its `voiced` is older.
    assert all(e.voiced < stopped.voiced for _, e in events[:-3] if isinstance(e, SpeechStopped))


def test_the_utterance_so_far_grows_with_the_speech(prompt: tuple[Path, Audio], vad: SileroVad) -> None:
    vad.reset()
    endpointer = Endpointer(silence_ms=700, vad=vad)
    audio = np.concatenate([silence(1.0), prompt[1], silence(1.5)])
    seen: list[int] = []
    for start in range(0, len(audio), WINDOW):
        endpointer.feed(audio[start : start + WINDOW])
        if endpointer.speaking:
            so_far = endpointer.utterance()
            assert len(so_far) == endpointer.utterance_samples and endpointer.turn == 1
            assert locate(audio, so_far) + len(so_far) == start + WINDOW  # it ends with the window just fed
            seen.append(len(so_far))
    assert len(seen) > 20 and seen == sorted(seen)
    assert not endpointer.speaking and endpointer.utterance_samples == 0 and len(endpointer.utterance()) == 0


class ScriptedVad(SileroVad):
    """Speech probabilities from a script, one per window, and the window index of every reset: the endpointer's
    own rules without the model."""

    def __init__(self, probabilities: Sequence[float]) -> None:
        self.probabilities = list(probabilities)
        self.fed = 0
        self.resets: list[int] = []

    def reset(self) -> None:
        self.resets.append(self.fed)

    def __call__(self, window: Audio) -> float:
        self.fed += 1
        return self.probabilities[self.fed - 1]


def test_the_vad_state_starts_afresh_after_a_second_without_speech_between_turns() -> None:
    """Between turns, every vad_reset_ms of windows below the lower threshold resets Silero's state (it drifts over
    long streams); a candidate onset or a turn in progress restarts the count, and inside a turn (a pause included)
    it is never reset."""
    script = [0.0] * 70 + [0.9] * 3 + [0.0] * 20 + [0.9] * 20 + [0.0] * 15 + [0.9] * 10 + [0.0] * 80
    audio = silence(len(script) * WINDOW / SPEECH_RATE)
    vad = ScriptedVad(script)
    events = run(Endpointer(silence_ms=700, min_speech_ms=250, vad_reset_ms=1000, vad=vad), audio)
    assert [(fed // WINDOW, type(e).__name__) for fed, e in events] == [
        (101, "SpeechStarted"), (121, "SpeechPaused"), (129, "SpeechResumed"), (146, "SpeechPaused"),
        (160, "SpeechEnded")]
    # 32 windows (1.02 s) of quiet each time: twice in the lead-in; the blip at 70-72 restarts the count and the
    # turn starts 20 windows later; none inside the turn, its pauses included; then 32 windows after its end
    assert vad.resets == [32, 64, 160 + 32]
    off = ScriptedVad(script)
    run(Endpointer(silence_ms=700, min_speech_ms=250, vad_reset_ms=0, vad=off), audio)
    assert off.resets == []


def test_words_over_an_echo_cancelled_answer_start_a_barge_in() -> None:
    """A recording from `voicecli bench duplex` (2026-12-04, aec, echo 40 ms at +0 dB): the echo canceller's output
    over a whole app session, 40.8 s: a question, a 25 s answer's cancelled echo, the next question, and 2.2 s into
    the second answer the user's "Wait, stop." (39.26-40.35 s), which the canceller let through at -15 to -25 dBFS.
    Fed without resets of Silero's state (vad_reset_ms=0) the words scored 0.1-0.6 and made no onset (measured when
    the fixture was cut; in the app 6 of 7 barge-ins over an answer were missed so); with the default, the onset
    comes ~130 ms into "Wait,"."""
    import soundfile

    path = Path(__file__).parent / "data" / "aec-output-wait-stop.flac"
    audio = np.asarray(soundfile.read(str(path), dtype="float32")[0], dtype=np.float32)
    events = run(Endpointer(report_stops=True, onset_ms=150, vad=SileroVad()), audio, block=480)
    onsets = [fed / SPEECH_RATE for fed, e in events if isinstance(e, SpeechOnset)]
    assert any(39.2 <= at <= 40.4 for at in onsets), onsets


def onsets(script: Sequence[float], **options: int) -> list[tuple[int, SpeechOnset]]:
    """The SpeechOnsets of a scripted stream (windows fed so far, event), ahead of a turn's start at 250 ms."""
    audio = np.arange(len(script) * WINDOW, dtype=np.float32)  # each sample its own index: which windows it carries
    events = run(Endpointer(min_speech_ms=250, vad=ScriptedVad(script), **options), audio)
    return [(fed // WINDOW, e) for fed, e in events if isinstance(e, SpeechOnset)]


def test_speech_the_detector_is_sure_of_is_an_onset_sooner() -> None:
    """sure_onset_ms: speech whose speech windows average SURE_SPEECH or more is a SpeechOnset at 5 windows, not
    onset_ms's 7; lukewarm speech (the echo the canceller lets through scores so) waits for onset_ms; speech that
    becomes sure on the way is reported there; windows between the two thresholds are not averaged; once per
    candidate, and then again for the next. The onset carries the speech so far, from its first window."""
    lead = [0.0] * 10
    sure, lukewarm = [0.9] * 9, [0.6] * 9
    becomes_sure = [0.6, 0.8, 0.8, 0.8, 0.85, 1.0, 0.9, 0.9, 0.9]  # 0.77 at 5, 0.81 at 6
    undecided = [0.9, 0.4, 0.9, 0.4, 0.9, 0.9, 0.9, 0.9, 0.9]  # 0.4: between the thresholds, kept but not averaged
    options = {"onset_ms": 224, "sure_onset_ms": 160}
    assert [fed for fed, _ in onsets(lead + sure, **options)] == [15]
    assert [fed for fed, _ in onsets(lead + lukewarm, **options)] == [17]
    assert [fed for fed, _ in onsets(lead + becomes_sure, **options)] == [16]
    assert [fed for fed, _ in onsets(lead + undecided, **options)] == [17]  # 5 speech windows in 7
    assert [fed for fed, _ in onsets(lead + sure, onset_ms=224)] == [17]  # off
    assert [fed for fed, _ in onsets(lead + sure, onset_ms=224, sure_onset_ms=224)] == [17]  # not shorter: off
    blip = [0.9] * 6 + [0.0] * 5  # sure, dies before the turn's start: the next speech is a candidate afresh
    told = onsets(lead + blip + sure, **options)
    assert [fed for fed, _ in told] == [15, 26]
    first = told[0][1].audio
    assert len(first) == 5 * WINDOW and first[0] == 10 * WINDOW  # windows 10-14
