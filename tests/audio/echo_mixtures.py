"""Synthetic far-end/near-end mixtures for the echo tests: real speech (the bench's espeak-ng questions, committed
under results/bench/questions-alt-20261202), a synthetic room, a delay and an echo level relative to the user."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voicecli.audio.rates import SPEECH_RATE
from voicecli.audio.wav import load_wav_16k

SPEECH = Path(__file__).resolve().parents[2] / "results" / "bench" / "questions-alt-20261202"
NEAR_LEVEL = 10 ** (-26 / 20)


def speech(*names: str) -> np.ndarray:
    joined: np.ndarray = np.concatenate([load_wav_16k(SPEECH / name) for name in names]).astype(np.float32)
    return joined


def room_impulse(rt60: float = 0.25, seed: int = 7) -> np.ndarray:
    """Direct path, four early reflections and an exponential diffuse tail (the same room as scripts/aec_choice.py)."""
    rng = np.random.default_rng(seed)
    n = int(0.3 * SPEECH_RATE)
    t = np.arange(n) / SPEECH_RATE
    h = rng.normal(0, 1, n) * np.exp(-6.9 * t / rt60) * 0.08
    h[: int(0.004 * SPEECH_RATE)] = 0
    h[0] = 1.0
    for ms, gain in ((3.1, -0.5), (5.7, 0.35), (8.9, -0.25), (13.3, 0.2)):
        h[int(ms * SPEECH_RATE / 1000)] += gain
    out: np.ndarray = (h / np.sqrt(np.sum(h**2))).astype(np.float32)
    return out


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64)) + 1e-20))


@dataclass(frozen=True)
class Mixture:
    far: np.ndarray  # what the speaker played
    capture: np.ndarray  # what the microphone heard: echo + near + noise
    near: np.ndarray  # the user's voice alone, as it reaches the microphone
    near_span: slice


def mixture(far: np.ndarray, near: np.ndarray | None, delay_s: float, echo_over_near_db: float,
            near_at_s: float = 3.5) -> Mixture:
    delay = round(delay_s * SPEECH_RATE)
    echo = np.convolve(far, room_impulse())[: len(far)]
    echo = np.concatenate([np.zeros(delay, np.float32), echo])[: len(far)].astype(np.float32)
    active = np.abs(echo) > 0.01 * np.max(np.abs(echo))
    echo *= NEAR_LEVEL * 10 ** (echo_over_near_db / 20) / rms(echo[active])
    voice = np.zeros(len(far), np.float32)
    start = round(near_at_s * SPEECH_RATE)
    span = slice(start, start)
    if near is not None:
        span = slice(start, min(len(far), start + len(near)))
        voice[span] = near[: span.stop - span.start] / rms(near) * NEAR_LEVEL
    noise = np.random.default_rng(3).normal(0, 10 ** (-70 / 20), len(far)).astype(np.float32)
    return Mixture(far, (echo + voice + noise).astype(np.float32), voice, span)
