"""Turn taking on the input side: the echo gate, barge-in detection, and spoken turns with their marks.

Blocks are fed straight into the Listener (no device), with real espeak-ng speech, the real Silero VAD and the real
Whisper model, so the logic is tested without the timing noise of a live microphone (test_chat_spoken.py does that).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from tests.test_endpointing import silence, speak
from voicecli.capture import AudioBlock
from voicecli.endpointing import Endpointer
from voicecli.listening import BargeIn, EchoGate, InputLevel, Listener, ListenEvent, SpokenTurn
from voicecli.transcription import Transcriber, TurnTranscriber


def test_echo_gate() -> None:
    speaking = [False]
    gate = EchoGate(True, 6.0, lambda: speaking[0], lambda: -20.0)
    assert gate.passes(-50.0)  # assistant silent: everything passes
    speaking[0] = True
    assert not gate.passes(-18.0)  # about as loud as the playback: probably its echo
    assert gate.passes(-10.0)  # clearly louder: a person talking over it
    assert EchoGate(False, 6.0, lambda: True, lambda: -20.0).passes(-60.0)  # gate off


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
