"""Turn taking on the input side: the echo gate, barge-in detection, and spoken turns with their marks.

Blocks are fed straight into the Listener (no device), with real espeak-ng speech, the real Silero VAD and the real
Whisper model, so the logic is tested without the timing noise of a live microphone (test_chat_spoken.py does that).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.listen.test_endpointing import silence, speak
from tests.listen.test_transcription import FakeDecoder
from voicecli.audio.rates import SPEECH_RATE
from voicecli.config import Config
from voicecli.listen.endpointing import Endpointer
from voicecli.listen.listener import (
    HOLD_MAX_S,
    HOLD_RELEASE_AFTER_S,
    HOLDS_RELEASED_MAX,
    BargeIn,
    EchoGate,
    HangOver,
    HoldVoice,
    InputLevel,
    Listener,
    ListenEvent,
    PartialTranscript,
    ReleaseVoice,
    SpokenDraft,
    SpokenTurn,
    turn_words,
)
from voicecli.listen.microphone import AudioBlock
from voicecli.listen.transcription import Transcriber, TurnTranscriber
from voicecli.listen.turn_completion import Completion, TurnEndPolicy
from voicecli.listen.turn_likelihood import TurnLikelihood


def test_echo_gate() -> None:
    speaking = [False]
    gate = EchoGate(True, 6.0, lambda: speaking[0], lambda: -20.0)
    assert gate.passes(-50.0)  # assistant silent: everything passes
    speaking[0] = True
    assert not gate.passes(-18.0)  # about as loud as the playback: probably its echo
    assert gate.passes(-10.0)  # clearly louder: a person talking over it
    assert EchoGate(False, 6.0, lambda: True, lambda: -20.0).passes(-60.0)  # gate off


def test_echo_the_canceller_let_through_is_muted_whatever_its_level() -> None:
    """With the canceller trusted the gate passes everything (playback -120 dBFS), except while its output is echo it
    let through (EchoGate.leaking: coherent with the far end): as loud as a voice, and muted all the same."""
    speaking, leaking = [True], [False]
    gate = EchoGate(True, 6.0, lambda: speaking[0], lambda: -120.0, leaking=lambda: leaking[0])
    assert gate.passes(-15.0)
    leaking[0] = True
    assert not gate.passes(-15.0) and not gate.passes(0.0)
    speaking[0] = False
    assert gate.passes(-15.0)  # the assistant quiet: nothing of its is left to leak


@pytest.fixture(scope="module")
def transcriber(models_dir: Path) -> Transcriber:
    return Transcriber("tiny.en", models_dir=models_dir, threads=2)


async def feed(listener: Listener, audio: np.ndarray, start: float = 1000.0) -> None:
    block = 512
    for index in range(0, len(audio), block):
        listener._block(AudioBlock(audio[index : index + block], start + (index + block) / 16_000))
    await asyncio.sleep(0)


@pytest.mark.slow
async def test_spoken_turn_with_marks_and_barge_in(tmp_path: Path, transcriber: Transcriber) -> None:
    _, prompt = speak("How many legs does a spider have?", tmp_path)
    events: list[ListenEvent] = []
    speaking = [True]
    gate = EchoGate(True, 6.0, lambda: speaking[0], lambda: -120.0)
    listener = Listener(None, Endpointer(silence_ms=500), TurnTranscriber(transcriber), events.append, gate)  # type: ignore[arg-type]
    await feed(listener, np.concatenate([silence(0.5), prompt, silence(1.0)]))
    for _ in range(600):
        if any(isinstance(e, SpokenTurn) for e in events):
            break
        await asyncio.sleep(0.05)
    barge = [e for e in events if isinstance(e, BargeIn)]
    turns = [e for e in events if isinstance(e, SpokenTurn)]
    assert len(barge) == 1  # speech while the assistant was speaking
    assert len(turns) == 1 and "spider" in turns[0].text.lower()
    marks = turns[0].marks
    assert marks["speech_start"] < marks["speech_end"] and marks["speech_start"] > 1000
    assert any(isinstance(e, InputLevel) for e in events)


@pytest.mark.slow
async def test_playback_level_speech_is_gated(tmp_path: Path, transcriber: Transcriber) -> None:
    _, prompt = speak("Hello there.", tmp_path)
    events: list[ListenEvent] = []
    gate = EchoGate(True, 6.0, lambda: True, lambda: 0.0)  # playback at full scale: nothing can exceed it
    listener = Listener(None, Endpointer(silence_ms=500), TurnTranscriber(transcriber), events.append, gate)  # type: ignore[arg-type]
    await feed(listener, np.concatenate([prompt, silence(1.0)]))
    await asyncio.sleep(0.5)
    assert not [e for e in events if isinstance(e, BargeIn | SpokenTurn)]
    assert all(e.gated for e in events if isinstance(e, InputLevel))


async def feed_live(listener: Listener, audio: np.ndarray, start: float = 1000.0) -> None:
    """Feed 32 ms blocks stamped by their samples, each once the listener's work on the ones before it is done: a
    draft transcribed at a pause comes back while the pause goes on, as it does live, on any machine.

    Why not the real clock: these tests are about which hang-over the listener picks and when the turn ends, and
    every mark comes from the blocks' stamps; fed at a microphone's pace, they also required tiny.en to finish
    within the hang-over on whatever else the machine was doing (a loaded CI core: the draft came after speech
    had resumed). How decodes race a live microphone is test_chat_spoken.py's subject."""
    block = 512
    for index in range(0, len(audio), block):
        listener._block(AudioBlock(audio[index : index + block], start + (index + block) / 16_000))
        await asyncio.sleep(0)
        while listener._pending:
            await asyncio.wait(set(listener._pending))


def hang_overs(events: list[ListenEvent]) -> list[tuple[int, int]]:
    return [(e.turn, e.hold_ms) for e in events if isinstance(e, HangOver)]


async def one_spoken_question(tmp_path: Path, transcriber: Transcriber, after_s: float = 2.0,
                              **options: Any) -> tuple[SpokenDraft, SpokenTurn, int, float]:
    """"How many legs does a spider have?" then `after_s` of silence, fed to a listener made with `options`: its one
    draft, its one turn, the hang-over chosen at the pause, and the wait from the end of speech to the turn."""
    _, prompt = speak("How many legs does a spider have?", tmp_path)
    events: list[ListenEvent] = []
    listener = Listener(None, Endpointer(silence_ms=1500, tail_ms=120), TurnTranscriber(transcriber),  # type: ignore[arg-type]
                        events.append, **options)
    await feed_live(listener, np.concatenate([silence(0.5), prompt, silence(after_s)]))
    await asyncio.sleep(0.5)
    drafts = [e for e in events if isinstance(e, SpokenDraft)]
    turns = [e for e in events if isinstance(e, SpokenTurn)]
    assert len(drafts) == 1 and len(turns) == 1, events
    ((turn, hold_ms),) = hang_overs(events)
    assert turn == drafts[0].turn
    return drafts[0], turns[0], hold_ms, turns[0].marks["turn_confirmed"] - turns[0].marks["speech_end"]


@pytest.mark.slow
async def test_a_finished_question_is_drafted_then_confirmed_on_its_shorter_hang_over(
    tmp_path: Path, transcriber: Transcriber
) -> None:
    policy = TurnEndPolicy(default_ms=1500, complete_ms=400, incomplete_ms=2500)
    draft, turn, hold_ms, waited = await one_spoken_question(tmp_path, transcriber, policy=policy)
    assert hold_ms == 400 and "spider" in draft.text.lower()
    assert (turn.turn, turn.text) == (draft.turn, draft.text)  # what makes the draft's answer usable
    assert 0.35 <= waited < 1.0, waited  # the finished question's 400 ms, not the 1.5 s default


class FixedProsody:
    """Smart Turn's place in the listener, answering one fixed probability (the model itself: test_smart_turn.py)."""

    def __init__(self, probability: float) -> None:
        self.value = probability
        self.heard: list[int] = []

    def probability(self, audio16k: np.ndarray) -> float:
        self.heard.append(len(audio16k))
        return self.value


@pytest.mark.slow
@pytest.mark.parametrize(("probability", "hold_ms"), [(0.9, 400), (0.01, 1100), (0.1, 700)])
async def test_with_prosody_the_hang_over_comes_from_the_words_and_the_voice(
    tmp_path: Path, transcriber: Transcriber, probability: float, hold_ms: int
) -> None:
    """A finished question (text: complete) whose voice sounds finished ends on the agreed wait, one that sounds
    unfinished is held, one the voice is unsure of waits for one signal (voicecli.listen.end_of_turn)."""
    from voicecli.config import TurnSettings

    fused = TurnSettings(agree_ms=400, one_signal_ms=700, undecided_ms=900, hold_ms=1100, max_ms=1500)
    prosody = FixedProsody(probability)
    _, _, chosen, waited = await one_spoken_question(tmp_path, transcriber, prosody=prosody, fused=fused)
    assert chosen == hold_ms
    assert prosody.heard and prosody.heard[0] > 16_000  # it heard the utterance
    assert hold_ms / 1000 - 0.05 <= waited < hold_ms / 1000 + 0.5, waited


def test_without_smollm2_the_word_rules_judge_and_the_user_is_told_how_to_get_it(tmp_path: Path) -> None:
    """turn.words = "smollm2" with no model installed still listens (a Bedrock user may never have fetched the
    offline LLM): no judge, and one note naming the install command and the setting."""
    config = Config.load(env={"VOICECLI_TURN__WORDS": "smollm2", "VOICECLI_MODELS__DIR": str(tmp_path)})
    words, notes = turn_words(config)
    assert words is None and len(notes) == 1
    assert "word rules" in notes[0] and "voicecli models install --only smollm2" in notes[0]
    assert 'turn.words = "rules"' in notes[0]
    assert turn_words(Config.load(env={"VOICECLI_TURN__WORDS": "rules"})) == (None, ())


@pytest.mark.slow
def test_with_smollm2_installed_it_judges_the_words(models_dir: Path) -> None:
    words, notes = turn_words(Config.load(env={"VOICECLI_TURN__WORDS": "smollm2",
                                               "VOICECLI_MODELS__DIR": str(models_dir)}))
    assert isinstance(words, TurnLikelihood) and notes == ()
    words.close()


class FixedWords:
    """SmolLM2's place in the listener (turn.words = "smollm2"), giving one fixed verdict on the words (the model
    itself: test_turn_likelihood.py)."""

    def __init__(self, verdict: Completion) -> None:
        self.verdict = verdict
        self.judged: list[str] = []

    def completion(self, text: str) -> Completion:
        self.judged.append(text)
        return self.verdict


@pytest.mark.slow
async def test_with_a_words_model_the_hang_over_follows_its_verdict_not_the_rules(
    tmp_path: Path, transcriber: Transcriber
) -> None:
    """A question the rules call finished (400 ms) that the model hears as unfinished is held the incomplete
    hang-over, and the turn is confirmed only after it."""
    policy = TurnEndPolicy(default_ms=1500, complete_ms=400, incomplete_ms=2000)
    words = FixedWords(Completion.INCOMPLETE)
    _, _, hold_ms, waited = await one_spoken_question(tmp_path, transcriber, 2.6, policy=policy, words=words)
    assert hold_ms == 2000
    assert len(words.judged) == 1 and "spider" in words.judged[0].lower()
    assert 1.95 <= waited < 2.5, waited


@pytest.mark.slow
async def test_speech_after_a_pause_withdraws_the_draft(tmp_path: Path, transcriber: Transcriber) -> None:
    _, first = speak("How many legs", tmp_path, "first")
    _, second = speak("does a spider have?", tmp_path, "second")
    events: list[ListenEvent] = []
    listener = Listener(None, Endpointer(silence_ms=1500, tail_ms=120), TurnTranscriber(transcriber),  # type: ignore[arg-type]
                        events.append, policy=TurnEndPolicy(default_ms=1500, complete_ms=1400, incomplete_ms=2500))
    await feed_live(listener, np.concatenate([silence(0.5), first, silence(0.6), second, silence(2.5)]))
    await asyncio.sleep(0.5)
    kinds = [type(e).__name__ for e in events if not isinstance(e, InputLevel | HangOver)]
    assert kinds[:2] == ["SpokenDraft", "DraftWithdrawn"], kinds
    turns = [e for e in events if isinstance(e, SpokenTurn)]
    assert len(turns) == 1 and "spider" in turns[0].text.lower()  # one turn, the whole question


class LoudnessVad:
    """Silero's place in the endpointer: any window with a sample above 0.05 is speech, one above 0.02 is between
    the two thresholds (0.4: undecided), others silence (the real VAD: test_endpointing.py), so that the listener's
    logic is tested on exact, fast input."""

    def reset(self) -> None:
        pass

    def __call__(self, window: np.ndarray) -> float:
        peak = float(np.abs(window).max())
        return 0.9 if peak > 0.05 else 0.4 if peak > 0.02 else 0.0


async def feed_windows(listener: Listener, audio: np.ndarray, clock: list[float]) -> None:
    """32 ms blocks on a fake clock, letting the listener's tasks run after each."""
    for index in range(0, len(audio), 512):
        clock[0] += 0.032
        listener._block(AudioBlock(audio[index : index + 512], clock[0]))
        await asyncio.sleep(0)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_words_so_far_while_speaking_then_the_stops_decode_is_the_draft_and_the_turn() -> None:
    decoder = FakeDecoder()
    events: list[ListenEvent] = []
    endpointer = Endpointer(silence_ms=500, tail_ms=96, report_stops=True, vad=LoudnessVad())  # type: ignore[arg-type]
    listener = Listener(None, endpointer, TurnTranscriber(decoder), events.append, partial_ms=320)  # type: ignore[arg-type]
    clock = [1000.0]
    speech = np.full(32 * 512, 0.1, dtype=np.float32)  # whole windows, so that no speech spills into the silence
    await feed_windows(listener, np.concatenate([silence(0.512), speech]), clock)
    assert [beam for _, _, beam in decoder.jobs] == [1]  # one greedy partial, none while it runs
    decoder.finish("how many", started_at=1.0)
    await settle()
    await feed_windows(listener, speech[: 13 * 512], clock)  # 416 ms more: the next partial starts at once
    assert [beam for _, _, beam in decoder.jobs] == [1, 1] and decoder.jobs[1][1] > decoder.jobs[0][1]
    decoder.finish("how many legs", started_at=2.0)
    await feed_windows(listener, silence(0.16), clock)  # the stop (first silent window) and the pause (3rd)
    assert len(decoder.jobs) == 3 and decoder.jobs[2][2] is None  # the stop's decode, at the configured beam
    assert endpointer.paused_in(1)
    decoder.finish("How many legs?", started_at=3.0)
    await settle()
    await feed_windows(listener, silence(1.5), clock)
    await settle()
    told = [e for e in events if not isinstance(e, InputLevel)]
    kinds = [type(e).__name__ for e in told]
    assert kinds == ["PartialTranscript"] * 3 + ["SpokenDraft", "HangOver", "SpokenTurn"], told
    assert [e.text for e in told if isinstance(e, PartialTranscript)] == ["how many", "how many legs", "How many legs?"]
    assert all(e.turn == 1 for e in told if isinstance(e, PartialTranscript | SpokenDraft | SpokenTurn))
    assert len(decoder.jobs) == 3  # the pause and the end took the stop's decode: no other decode


async def test_words_decoded_after_the_turn_ended_are_not_shown() -> None:
    decoder = FakeDecoder()
    events: list[ListenEvent] = []
    endpointer = Endpointer(silence_ms=300, tail_ms=96, report_stops=True, vad=LoudnessVad())  # type: ignore[arg-type]
    listener = Listener(None, endpointer, TurnTranscriber(decoder), events.append, partial_ms=320)  # type: ignore[arg-type]
    clock = [1000.0]
    await feed_windows(listener, np.concatenate([silence(0.5), np.full(16_000, 0.1, dtype=np.float32),
                                                 silence(1.0)]), clock)
    assert not endpointer.in_speech and [beam for _, _, beam in decoder.jobs] == [1, None]  # partial, stop
    decoder.finish("how many")  # the partial, done only after the turn ended
    await settle()
    assert not [e for e in events if isinstance(e, PartialTranscript)]


async def test_no_partials_when_off() -> None:
    decoder = FakeDecoder()
    endpointer = Endpointer(silence_ms=300, tail_ms=96, vad=LoudnessVad())  # type: ignore[arg-type]
    listener = Listener(None, endpointer, TurnTranscriber(decoder), lambda _: None)  # type: ignore[arg-type]
    await feed_windows(listener, np.concatenate([silence(0.5), np.full(32_000, 0.1, dtype=np.float32)]), [0.0])
    assert decoder.jobs == []


@pytest.mark.slow
async def test_live_words_so_far_then_a_draft_decoded_from_the_stop(tmp_path: Path, transcriber: Transcriber) -> None:
    """Real tiny.en at the pace of a microphone: words so far while the question is spoken, then the draft and the
    turn from the decode started at the first silent window (handed to the pause and to the end, not redone)."""
    _, prompt = speak("How many legs does a spider have?", tmp_path)
    events: list[ListenEvent] = []
    turns = TurnTranscriber(transcriber)
    listener = Listener(None, Endpointer(silence_ms=1500, tail_ms=96, report_stops=True), turns,  # type: ignore[arg-type]
                        events.append, policy=TurnEndPolicy(default_ms=1500, complete_ms=400, incomplete_ms=2500),
                        partial_ms=500)
    await feed_live(listener, np.concatenate([silence(0.5), prompt, silence(2.0)]))
    await asyncio.sleep(0.5)
    told = [e for e in events if not isinstance(e, InputLevel)]
    partials = [e for e in told if isinstance(e, PartialTranscript)]
    drafts = [e for e in told if isinstance(e, SpokenDraft)]
    spoken = [e for e in told if isinstance(e, SpokenTurn)]
    assert partials and turns.partials >= 1 and len(drafts) == 1 and len(spoken) == 1, told
    assert told.index(partials[0]) < told.index(drafts[0])  # words were shown before the question ended
    assert spoken[0].text == drafts[0].text and "spider" in spoken[0].text.lower()
    assert turns.reused >= 2  # stop -> pause -> end: one decode


async def test_a_barge_in_comes_at_the_onset_once_and_only_while_the_assistant_speaks() -> None:
    """audio.barge_in_ms below a turn's start: the assistant is stopped at the onset (4 windows in, not 8), the turn
    that follows starts as usual and is not a second barge-in; with the assistant quiet an onset is nothing."""
    decoder = FakeDecoder()
    events: list[ListenEvent] = []
    speaking = [True]
    gate = EchoGate(True, -60.0, lambda: speaking[0], lambda: -120.0)
    endpointer = Endpointer(silence_ms=300, tail_ms=96, min_speech_ms=256, onset_ms=128,
                            vad=LoudnessVad())  # type: ignore[arg-type]
    listener = Listener(None, endpointer, TurnTranscriber(decoder), events.append, gate)  # type: ignore[arg-type]
    clock = [1000.0]
    speech = np.full(12 * 512, 0.1, dtype=np.float32)
    await feed_windows(listener, silence(0.256), clock)
    speech_from = clock[0]
    await feed_windows(listener, speech, clock)
    barge = [e for e in events if isinstance(e, BargeIn)]
    assert len(barge) == 1 and barge[0].at == pytest.approx(speech_from + 4 * 0.032)
    assert endpointer.in_speech  # the turn itself started, 4 windows later
    await feed_windows(listener, silence(0.5), clock)
    speaking[0] = False  # quiet: the next onset and start are an ordinary turn
    await feed_windows(listener, speech, clock)
    assert len([e for e in events if isinstance(e, BargeIn)]) == 1


async def over_the_answer(onset_ms: int) -> tuple[Listener, list[ListenEvent], list[float]]:
    """A listener that barges in at `onset_ms` (the turn's start at 8 windows), has heard one turn of the user's at
    -20 dBFS (their voice level), and now hears the assistant speaking: the listener, its events and its clock."""
    events: list[ListenEvent] = []
    speaking = [False]
    gate = EchoGate(True, -60.0, lambda: speaking[0], lambda: -120.0)
    endpointer = Endpointer(silence_ms=300, tail_ms=96, min_speech_ms=256, onset_ms=onset_ms,
                            vad=LoudnessVad())  # type: ignore[arg-type]
    listener = Listener(None, endpointer, TurnTranscriber(FakeDecoder()), events.append, gate)  # type: ignore[arg-type]
    clock = [1000.0]
    await feed_windows(listener, np.full(12 * 512, 0.1, dtype=np.float32), clock)  # the user's turn, -20 dBFS
    await feed_windows(listener, silence(0.5), clock)
    speaking[0] = True
    return listener, events, clock


async def test_an_onset_far_below_the_users_voice_barges_in_only_with_the_turns_start() -> None:
    """Once the user's voice level is known, speech over the answer more than HOLD_BELOW_VOICE_DB below it (echo
    left over) does not barge in at audio.barge_in_ms: only at the turn's start (8 windows, not 4); as loud as the
    voice, at the onset."""
    listener, events, clock = await over_the_answer(onset_ms=128)
    echo = np.zeros(12 * 512, dtype=np.float32)
    echo[::16] = 0.06  # peaks the detector takes for speech, -36.5 dBFS: 16.5 dB below the voice
    echo_from = clock[0]
    await feed_windows(listener, echo, clock)
    await feed_windows(listener, silence(0.5), clock)
    voice = np.zeros(12 * 512, dtype=np.float32)
    voice[::2] = 0.06  # the same peaks, -26 dBFS: within HOLD_BELOW_VOICE_DB of the voice
    voice_from = clock[0]
    await feed_windows(listener, voice, clock)
    barges = [e.at for e in events if isinstance(e, BargeIn)]
    assert barges == pytest.approx([echo_from + 8 * 0.032, voice_from + 4 * 0.032])


async def test_an_onset_is_as_loud_as_its_speech_so_far_not_its_fading_end() -> None:
    """The level rule takes the speech so far (speech_level_dbfs), not its latest 96 ms: a word whose end fades by
    the onset (in duplex-20261206-fedpath three interruptions were refused, 12.6-16.8 dB below the voice by their
    latest 96 ms) barges in at the onset; speech that was faint all along still waits for the turn's start."""
    listener, events, clock = await over_the_answer(onset_ms=160)
    loud = np.zeros(512, dtype=np.float32)
    loud[::2] = 0.06  # -26 dBFS: within HOLD_BELOW_VOICE_DB of the voice
    faint = np.zeros(512, dtype=np.float32)
    faint[0] = 0.06  # one peak the detector takes for speech, -51.5 dBFS
    word_from = clock[0]
    await feed_windows(listener, np.concatenate([loud, loud, faint, faint, faint, faint, faint, faint]), clock)
    await feed_windows(listener, silence(0.5), clock)
    faint_from = clock[0]
    await feed_windows(listener, np.tile(faint, 8), clock)
    barges = [e.at for e in events if isinstance(e, BargeIn)]
    assert barges == pytest.approx([word_from + 5 * 0.032, faint_from + 8 * 0.032])


def holding_listener(speaking: list[bool]) -> tuple[Listener, list[ListenEvent]]:
    """A listener that holds the voice after 3 windows of speech and barges in with the turn's start (8 windows)."""
    events: list[ListenEvent] = []
    gate = EchoGate(True, -60.0, lambda: speaking[0], lambda: -120.0)
    endpointer = Endpointer(silence_ms=300, tail_ms=96, min_speech_ms=256, hint_ms=96,
                            vad=LoudnessVad())  # type: ignore[arg-type]
    return Listener(None, endpointer, TurnTranscriber(FakeDecoder()), events.append, gate), events  # type: ignore[arg-type]


def voice_events(events: list[ListenEvent]) -> list[str]:
    return [type(e).__name__ for e in events if isinstance(e, HoldVoice | ReleaseVoice | BargeIn)]


async def test_speech_over_the_answer_holds_its_voice_then_barges_in() -> None:
    """3 windows of speech hold the voice, the turn's start (8) is the barge-in that answers the hold: no release."""
    listener, events = holding_listener([True])
    clock = [1000.0]
    await feed_windows(listener, silence(0.256), clock)
    speech_from = clock[0]
    await feed_windows(listener, np.full(12 * 512, 0.1, dtype=np.float32), clock)
    await feed_windows(listener, silence(0.5), clock)
    assert voice_events(events) == ["HoldVoice", "BargeIn"]
    hold, barge = (e for e in events if isinstance(e, HoldVoice | BargeIn))
    assert hold.at == pytest.approx(speech_from + 3 * 0.032) and barge.at == pytest.approx(speech_from + 8 * 0.032)


async def test_a_blip_over_the_answer_holds_it_and_lets_it_play_on() -> None:
    """A cough (5 windows) holds the voice and releases it HOLD_RELEASE_AFTER_S after its first silent window; with
    the assistant quiet it holds nothing."""
    speaking = [True]
    listener, events = holding_listener(speaking)
    clock = [1000.0]
    blip = np.full(5 * 512, 0.1, dtype=np.float32)
    await feed_windows(listener, silence(0.256), clock)
    blip_from = clock[0]
    await feed_windows(listener, blip, clock)
    await feed_windows(listener, silence(HOLD_RELEASE_AFTER_S + 0.1), clock)
    assert voice_events(events) == ["HoldVoice", "ReleaseVoice"]
    release = next(e for e in events if isinstance(e, ReleaseVoice))
    assert 0 <= release.at - (blip_from + 6 * 0.032 + HOLD_RELEASE_AFTER_S) < 0.032
    speaking[0] = False
    await feed_windows(listener, blip, clock)
    await feed_windows(listener, silence(HOLD_RELEASE_AFTER_S + 0.1), clock)
    assert voice_events(events) == ["HoldVoice", "ReleaseVoice"]


async def test_a_pause_between_the_words_keeps_the_voice_held_until_the_barge_in() -> None:
    """"Wait, | stop." over the answer: held on "Wait" (too short for a turn), still held through the comma's
    pause (shorter than HOLD_RELEASE_AFTER_S), and "stop." is the barge-in: never released in between."""
    listener, events = holding_listener([True])
    clock = [1000.0]
    await feed_windows(listener, silence(0.256), clock)
    await feed_windows(listener, np.full(5 * 512, 0.1, dtype=np.float32), clock)
    await feed_windows(listener, silence(0.32), clock)
    await feed_windows(listener, np.full(10 * 512, 0.1, dtype=np.float32), clock)
    assert voice_events(events) == ["HoldVoice", "BargeIn"]


async def test_speech_far_below_the_users_voice_holds_nothing() -> None:
    """Once the user has spoken a turn, 'speech' over the answer more than HOLD_BELOW_VOICE_DB below their voice is
    the echo the canceller let through (the detector cannot tell it by its shape): it holds nothing. Before any
    spoken turn the voice's level is unknown and it holds as before; as loud as the voice, it holds."""
    speaking = [True]
    listener, events = holding_listener(speaking)
    clock = [1000.0]
    echo = np.zeros(5 * 512, dtype=np.float32)
    echo[::16] = 0.06  # peaks the detector takes for speech, -36.5 dBFS: 16.5 dB below the voice below
    await feed_windows(listener, echo, clock)
    await feed_windows(listener, silence(HOLD_RELEASE_AFTER_S + 0.1), clock)
    assert voice_events(events) == ["HoldVoice", "ReleaseVoice"]
    speaking[0] = False
    await feed_windows(listener, np.full(12 * 512, 0.1, dtype=np.float32), clock)  # the user's turn, -20 dBFS
    await feed_windows(listener, silence(0.5), clock)
    speaking[0] = True
    await feed_windows(listener, echo, clock)
    await feed_windows(listener, silence(HOLD_RELEASE_AFTER_S + 0.1), clock)
    assert voice_events(events) == ["HoldVoice", "ReleaseVoice"]
    voice = np.zeros(5 * 512, dtype=np.float32)
    voice[::2] = 0.06  # the same peaks, -26 dBFS: within HOLD_BELOW_VOICE_DB of the voice
    await feed_windows(listener, voice, clock)
    assert voice_events(events) == ["HoldVoice", "ReleaseVoice", "HoldVoice"]


async def test_double_talk_holds_the_voice_and_the_words_after_it_barge_in(caplog: pytest.LogCaptureFixture) -> None:
    """The canceller tells a voice under the echo (EchoGate.double_talk) that the detector, fed the canceller's
    output, does not hear: the voice is held at once, and the log says why (a pause nobody asked for must be
    traceable to it); the user's next words, clean now, are the barge-in. Told with nobody after it, the hold runs
    out after HOLD_MAX_S; with the assistant quiet it holds nothing."""
    caplog.set_level(logging.INFO, logger="voicecli.listen.listener")
    speaking, double_talk = [True], [False]
    events: list[ListenEvent] = []
    gate = EchoGate(True, -60.0, lambda: speaking[0], lambda: -120.0, lambda: double_talk[0])
    endpointer = Endpointer(silence_ms=300, tail_ms=96, min_speech_ms=256, hint_ms=96,
                            vad=LoudnessVad())  # type: ignore[arg-type]
    listener = Listener(None, endpointer, TurnTranscriber(FakeDecoder()), events.append, gate)  # type: ignore[arg-type]
    clock = [1000.0]
    await feed_windows(listener, silence(0.256), clock)
    double_talk[0] = True
    told_at = clock[0]
    await feed_windows(listener, silence(0.064), clock)  # "Wait" under the echo: nothing reaches the detector
    double_talk[0] = False
    await feed_windows(listener, np.full(12 * 512, 0.1, dtype=np.float32), clock)  # "stop.", the echo gone
    assert voice_events(events) == ["HoldVoice", "BargeIn"]
    assert next(e for e in events if isinstance(e, HoldVoice)).at == pytest.approx(told_at + 0.032)
    assert [r.getMessage() for r in caplog.records if "double talk" in r.getMessage()] == [
        "more than the answer's echo at the microphone (double talk told): its voice held"]
    events.clear()
    double_talk[0] = True  # still told after the barge-in, while the app is stopping the answer: nothing to hold
    await feed_windows(listener, np.full(6 * 512, 0.1, dtype=np.float32), clock)
    double_talk[0] = False
    await feed_windows(listener, silence(0.5), clock)
    assert voice_events(events) == []
    speaking[0] = False  # the answer stopped; the next one may be held again
    await feed_windows(listener, silence(0.064), clock)
    speaking[0] = True
    events.clear()
    double_talk[0] = True  # a door: told, and nothing follows
    await feed_windows(listener, silence(0.064), clock)
    double_talk[0] = False
    await feed_windows(listener, silence(HOLD_MAX_S + 0.1), clock)
    assert voice_events(events) == ["HoldVoice", "ReleaseVoice"]
    events.clear()
    double_talk[0] = True  # told again in the same answer after one that nobody came to: held no more
    await feed_windows(listener, silence(0.2), clock)
    assert voice_events(events) == []
    speaking[0] = False  # quiet: nothing is held, and the next answer may be held on double talk again
    await feed_windows(listener, silence(0.2), clock)
    assert voice_events(events) == []
    speaking[0] = True
    await feed_windows(listener, silence(0.064), clock)
    assert voice_events(events) == ["HoldVoice"]


async def test_undecided_speech_holds_the_voice_at_most_hold_max_s() -> None:
    """Windows between Silero's thresholds keep the speech neither faded nor a turn: the answer plays on after
    HOLD_MAX_S."""
    listener, events = holding_listener([True])
    clock = [1000.0]
    await feed_windows(listener, silence(0.256), clock)
    await feed_windows(listener, np.full(3 * 512, 0.1, dtype=np.float32), clock)
    held_at = clock[0]
    await feed_windows(listener, np.full(int((HOLD_MAX_S + 0.2) * SPEECH_RATE), 0.03, dtype=np.float32), clock)
    assert voice_events(events) == ["HoldVoice", "ReleaseVoice"]
    release = next(e for e in events if isinstance(e, ReleaseVoice))
    assert HOLD_MAX_S <= release.at - held_at <= HOLD_MAX_S + 0.04


async def test_after_holds_released_max_one_answer_is_no_longer_held() -> None:
    """Echo that reaches the detector (no canceller on speakers) would hold and release the answer without end:
    after HOLDS_RELEASED_MAX released holds the listener stops holding until the assistant is quiet again."""
    speaking = [True]
    listener, events = holding_listener(speaking)
    clock = [1000.0]
    blip = np.full(5 * 512, 0.1, dtype=np.float32)
    for _ in range(HOLDS_RELEASED_MAX + 2):
        await feed_windows(listener, blip, clock)
        await feed_windows(listener, silence(HOLD_RELEASE_AFTER_S + 0.1), clock)
    assert voice_events(events) == ["HoldVoice", "ReleaseVoice"] * HOLDS_RELEASED_MAX
    speaking[0] = False
    await feed_windows(listener, silence(0.064), clock)  # quiet: the count starts again with the next answer
    speaking[0] = True
    await feed_windows(listener, blip, clock)
    assert voice_events(events)[-1] == "HoldVoice"
