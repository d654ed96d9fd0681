"""Microphone capture over a private PulseAudio: what is played into the virtual mic arrives, at 16 kHz, intact."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from tests.listen.test_endpointing import loud_span, speak
from tests.pulse import PrivatePulse
from voicecli.audio.levels import SILENCE_DBFS, rms_dbfs
from voicecli.audio.rates import SPEECH_RATE
from voicecli.listen.microphone import AudioBlock, Microphone, NoMicrophoneError

Audio = NDArray[np.float32]


async def record(mic: Microphone, seconds: float) -> list[AudioBlock]:
    """Blocks until they hold `seconds` of audio (counted in samples, not on the clock: a test task that waits
    behind the machine's other work still gets every block; a microphone that stops delivering times out)."""
    blocks: list[AudioBlock] = []
    while sum(len(block.samples) for block in blocks) < seconds * SPEECH_RATE:
        blocks.append(await asyncio.wait_for(mic.queue.get(), timeout=5.0))
    return blocks


def best_correlation(captured: Audio, reference: Audio) -> float:
    """Peak normalised cross-correlation of `reference` against every offset in `captured` (FFT)."""
    n = len(captured) + len(reference)
    size = 1 << (n - 1).bit_length()
    corr = np.fft.irfft(np.fft.rfft(captured, size) * np.conj(np.fft.rfft(reference, size)), size)[: len(captured)]
    energy = np.convolve(np.square(captured.astype(np.float64)), np.ones(len(reference)), mode="full")
    window_energy = energy[len(reference) - 1 : len(reference) - 1 + len(captured)]
    denom = np.sqrt(np.maximum(window_energy, 1e-12) * float(np.sum(np.square(reference.astype(np.float64)))))
    return float(np.max(corr / denom))


@pytest.fixture(scope="module")
def prompt(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Audio]:
    return speak("What is the capital of France", tmp_path_factory.mktemp("speech"))


@pytest.mark.slow
@pytest.mark.parametrize("device_rate", [None, 44100], ids=["native-16k", "resampled-44k1"])
async def test_played_prompt_is_captured_at_16k(
    pulse: PrivatePulse, prompt: tuple[Path, Audio], device_rate: int | None
) -> None:
    with Microphone(device_rate=device_rate) as mic:
        assert mic.device_rate == (device_rate or SPEECH_RATE)
        mic.start()
        assert mic.active
        player = pulse.play_into_mic(prompt[0], wait=False)
        blocks = await record(mic, seconds=len(prompt[1]) / SPEECH_RATE + 1.5)
        player.wait(timeout=30)
        level_while_open = mic.level_dbfs
    assert all(b.samples.dtype == np.float32 and b.samples.ndim == 1 for b in blocks)
    stamps = [b.at for b in blocks]
    assert stamps == sorted(stamps)
    captured = np.concatenate([b.samples for b in blocks])
    # 16 kHz whatever the device rate: the samples delivered match the wall time spent (within a few blocks).
    assert abs(len(captured) / SPEECH_RATE - (stamps[-1] - stamps[0])) < 0.3
    first, last = loud_span(prompt[1])
    # Each quarter second of the prompt is found in the capture nearly unchanged (a wrong rate or mangled blocks
    # would give ~0). Judged per piece and by the median: on a loaded machine paplay itself may underrun, inserting
    # a gap into what was played, which would sink a whole-prompt correlation without any fault of ours.
    reference = prompt[1][first:last]
    piece = SPEECH_RATE // 4
    scores = [best_correlation(captured, reference[i : i + piece]) for i in range(0, len(reference) - piece, piece)]
    assert float(np.median(scores)) > 0.95, scores
    assert max(rms_dbfs(b.samples) for b in blocks) > -30.0
    assert level_while_open < -60.0  # the prompt is over: the meter shows the silence after it
    assert mic.level_dbfs == SILENCE_DBFS  # closed


@pytest.mark.slow
async def test_stop_pauses_delivery_and_start_resumes(pulse: PrivatePulse) -> None:
    with Microphone("pulse") as mic:
        assert mic.device_name == "pulse"
        mic.start()
        assert len(await record(mic, 0.3)) > 3
        mic.stop()
        assert not mic.active
        await asyncio.sleep(0.1)  # blocks captured before stop() may still be on their way to the loop
        mic.drain()
        await asyncio.sleep(0.3)
        assert mic.drain() == []
        mic.start()
        assert len(await record(mic, 0.3)) > 3
        assert mic.overflows == 0 and mic.dropped == 0


@pytest.mark.slow
async def test_consumer_falling_behind_drops_oldest_blocks(
    pulse: PrivatePulse, caplog: pytest.LogCaptureFixture
) -> None:
    """The oldest blocks go, and stopping says in the log how many were lost."""
    with Microphone(max_queue_s=0.2) as mic:
        mic.start()
        await asyncio.sleep(1.0)  # nobody reads
        assert mic.queue.qsize() * mic.block_ms <= 200 + mic.block_ms  # max_queue_s of blocks, whatever their size
        assert mic.dropped > 0
        with caplog.at_level(logging.WARNING, logger="voicecli.listen.microphone"):
            mic.stop()
        assert "the microphone lost input" in caplog.text and mic.dropped == 0  # said once, then counted afresh


def test_unknown_device_names_the_devices_that_exist(pulse: PrivatePulse) -> None:
    with pytest.raises(NoMicrophoneError) as caught:
        Microphone("no-such-microphone")
    assert "no-such-microphone" in str(caught.value)
    assert "pulse" in str(caught.value)  # the list of input devices that do exist
    with pytest.raises(NoMicrophoneError):
        Microphone(9999)


def test_no_sound_server_means_no_microphone(tmp_path: Path) -> None:
    """Without any sound server PortAudio lists no devices: the app gets NoMicrophoneError, not a crash."""
    code = (
        "from voicecli.listen.microphone import Microphone, NoMicrophoneError\n"
        "try:\n    Microphone()\nexcept NoMicrophoneError as exc:\n    print('NO-MIC:', exc)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULSE_", "XDG_RUNTIME_DIR", "ALSA"))}
    env["PULSE_SERVER"] = f"unix:{tmp_path / 'nothing-here'}"
    env["PULSE_RUNTIME_PATH"] = str(tmp_path)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "NO-MIC: no audio input device found" in result.stdout
