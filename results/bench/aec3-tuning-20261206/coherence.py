"""A lead for double talk, measured on the same two runs' kept recordings: does the user's voice under the answer's
echo show as a drop in the coherence between the microphone and the far end (what the speaker played, at the echo's
delay)? A linear echo path keeps them coherent; a second voice breaks it in the bands it fills.

Per 32 ms frame (16 ms hop): magnitude-squared coherence per bin, 300-3,400 Hz, cross- and auto-spectra smoothed
exponentially (ALPHA), averaged over bins weighted by the microphone's power; frames count where the far end plays
(> -45 dBFS) and the microphone hears something (> -50 dBFS). Echo-only answers are cut into 0.5 s windows; each
interruption is read over its first 0.5 s. Not the app's code: a measurement for the next step.
Usage (from the repository root, with the recordings):
  .venv/bin/python results/bench/aec3-tuning-20261206/coherence.py /tmp/keepH2=results/bench/duplex-20261205-dacsettle \
      /tmp/keepN=results/bench/duplex-20261206-nosettle
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from false_holds import interruption_starts, kept_sessions, played_at_echo

from voicecli.bench.duplex import DOUBLE_TALK

N, HOP, RATE = 512, 256, 16000
ALPHA = 0.8
LOW = 0.25
"""Coherence below which a frame counts as 'not the echo alone'."""
WINDOW = 31
"""Frames in 0.5 s."""


def coherence(mic: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per frame: the mic-weighted mean coherence over 300-3,400 Hz, and whether the frame is active."""
    window = np.hanning(N).astype(np.float32)
    lo, hi = int(300 / RATE * N), int(3400 / RATE * N)
    frames = (len(mic) - N) // HOP
    x = np.lib.stride_tricks.sliding_window_view(mic, N)[::HOP][:frames] * window
    y = np.lib.stride_tricks.sliding_window_view(ref, N)[::HOP][:frames] * window
    big_x, big_y = np.fft.rfft(x, axis=1)[:, lo:hi], np.fft.rfft(y, axis=1)[:, lo:hi]
    sxy = np.zeros(hi - lo, complex)
    sxx, syy = np.full(hi - lo, 1e-12), np.full(hi - lo, 1e-12)
    out = np.zeros(frames)
    for k in range(frames):
        sxy = ALPHA * sxy + (1 - ALPHA) * big_x[k] * np.conj(big_y[k])
        sxx = ALPHA * sxx + (1 - ALPHA) * np.abs(big_x[k]) ** 2
        syy = ALPHA * syy + (1 - ALPHA) * np.abs(big_y[k]) ** 2
        weight = np.abs(big_x[k]) ** 2
        out[k] = float(np.sum(np.abs(sxy) ** 2 / (sxx * syy) * weight) / (np.sum(weight) + 1e-12))
    level = 10 * np.log10(np.mean(x**2, axis=1) + 1e-12)
    far = 10 * np.log10(np.mean(y**2, axis=1) + 1e-12)
    return out, (far > -45) & (level > -50)


def main(arguments: list[str]) -> None:
    echo_windows: list[int] = []
    heard: list[tuple[float, int]] = []
    for session, spans, samples in kept_sessions(arguments):
        coh, active = coherence(session.mic, played_at_echo(session, samples))
        low = (coh < LOW) & active
        center = np.arange(len(coh)) * HOP + N // 2
        for a, b in spans:
            for k in range(a // HOP, b // HOP - WINDOW, WINDOW):
                if active[k : k + WINDOW].sum() >= 10:
                    echo_windows.append(int(low[k : k + WINDOW].sum()))
        for share, start in interruption_starts(session, samples):
            first = (center >= start) & (center <= start + RATE // 2)
            heard.append((share, int((low & first).sum())))
    print(f"coherence below {LOW} (ALPHA {ALPHA}); echo-only 0.5 s windows: {len(echo_windows)}")
    for count in (2, 3, 4, 5):
        over = [c for share, c in heard if share >= 0.15]
        double = [c for share, c in heard if share >= DOUBLE_TALK]
        print(f">= {count} such frames in 0.5 s: echo-only windows {sum(c >= count for c in echo_windows)}; "
              f"interruptions >= 15 % over the echo {sum(c >= count for c in over)} of {len(over)}; "
              f"double talk {sum(c >= count for c in double)} of {len(double)}")


if __name__ == "__main__":
    main(sys.argv[1:])
