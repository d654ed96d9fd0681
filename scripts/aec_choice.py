"""Choose the echo canceller binding by measurement (issue 27): ERLE, near-end kept, CPU per 10 ms frame.

The far end is real Kokoro speech (WAVs from `voicecli say --out`), the near end an espeak-ng voice (the bench's
question WAVs), the room a synthetic impulse response (direct path + early reflections + an exponential tail, RT60
~0.25 s), the acoustic delay 20-120 ms, the echo 0 and +6 dB over the near-end voice, a -70 dBFS noise floor.
Each candidate gets the reference unaligned (its own delay handling) and aligned by voicecli's delay estimate.

Run (candidates installed in a scratch directory, not the project venv):
    PYTHONPATH=/tmp/aecpkgs .venv/bin/python scripts/aec_choice.py FAR.wav [FAR.wav...] --near NEAR.wav
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.echo_delay import estimate_delay
from voicecli.audio.rates import SPEECH_RATE
from voicecli.audio.wav import load_wav_16k

Audio = NDArray[np.float32]
FRAME = SPEECH_RATE // 100
Processor = Callable[[Audio, Audio], Audio]  # one 10 ms frame: (capture, reference) -> cleaned


def room_impulse(rate: int = SPEECH_RATE, rt60: float = 0.25, seed: int = 7) -> Audio:
    """A synthetic room: direct path, a few early reflections, an exponentially decaying diffuse tail."""
    rng = np.random.default_rng(seed)
    n = int(0.3 * rate)
    t = np.arange(n) / rate
    h = rng.normal(0, 1, n) * np.exp(-6.9 * t / rt60) * 0.08
    h[:int(0.004 * rate)] = 0
    h[0] = 1.0
    for ms, gain in ((3.1, -0.5), (5.7, 0.35), (8.9, -0.25), (13.3, 0.2)):
        h[int(ms * rate / 1000)] += gain
    out: Audio = (h / np.sqrt(np.sum(h**2))).astype(np.float32)
    return out


def rms(x: Audio) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64)) + 1e-20))


def db(x: float) -> float:
    return 20 * math.log10(max(x, 1e-12))


def livekit_apm(delay_ms: int) -> Processor:
    from livekit import rtc  # type: ignore[import-not-found]

    apm = rtc.AudioProcessingModule(echo_cancellation=True, high_pass_filter=True)

    def run(capture: Audio, reference: Audio) -> Audio:
        ref = rtc.AudioFrame(to16(reference).tobytes(), SPEECH_RATE, 1, FRAME)
        apm.process_reverse_stream(ref)
        apm.set_stream_delay_ms(delay_ms)
        cap = rtc.AudioFrame(bytearray(to16(capture).tobytes()), SPEECH_RATE, 1, FRAME)
        apm.process_stream(cap)
        cleaned: Audio = np.frombuffer(cap.data, np.int16).astype(np.float32) / np.float32(32768)
        return cleaned

    return run


def pywebrtc(delay_ms: int) -> Processor:
    import pywebrtc_audio

    aec = pywebrtc_audio.AudioProcessor(SPEECH_RATE, 1, echo_cancellation=True, high_pass_filter=True,
                                        stream_delay_ms=delay_ms)

    def run(capture: Audio, reference: Audio) -> Audio:
        out: Audio = aec.process(capture, reference)
        return out

    return run


def speex(delay_ms: int) -> Processor:
    from speexdsp_aec import SpeexAec  # type: ignore[import-not-found]

    aec = SpeexAec(sample_rate=SPEECH_RATE, frame_ms=10, filter_tail_ms=200)

    def run(capture: Audio, reference: Audio) -> Audio:
        out = aec.process(to16(capture), to16(reference))
        got: Audio = np.frombuffer(out, np.int16).astype(np.float32) / np.float32(32768)
        return got if len(got) == FRAME else np.zeros(FRAME, np.float32)

    return run


def to16(x: Audio) -> NDArray[np.int16]:
    return np.clip(np.round(x * 32768), -32768, 32767).astype(np.int16)


CANDIDATES: dict[str, Callable[[int], Processor]] = {"livekit": livekit_apm, "pywebrtc-audio": pywebrtc,
                                                      "speexdsp-aec": speex}


def scenario(far: Audio, near: Audio, delay_s: float, echo_over_near_db: float, near_at_s: float = 6.0
             ) -> tuple[Audio, Audio, Audio, slice]:
    """(capture, reference, near-end as captured, the near-end's span): the mixture a desk microphone hears."""
    delay = round(delay_s * SPEECH_RATE)
    echo = np.convolve(far, room_impulse())[: len(far)]
    echo = np.concatenate([np.zeros(delay, np.float32), echo])[: len(far)].astype(np.float32)
    near_level = 10 ** (-26 / 20)
    start = round(near_at_s * SPEECH_RATE)
    span = slice(start, min(len(far), start + len(near)))
    voice = np.zeros(len(far), np.float32)
    voice[span] = near[: span.stop - span.start] / rms(near) * near_level
    active = np.abs(echo) > 0.01 * np.max(np.abs(echo))
    echo *= near_level * 10 ** (echo_over_near_db / 20) / rms(echo[active])
    noise = np.random.default_rng(3).normal(0, 10 ** (-70 / 20), len(far)).astype(np.float32)
    return (echo + voice + noise).astype(np.float32), far, voice, span


def delayed(x: Audio, n: int) -> Audio:
    return np.concatenate([np.zeros(n, np.float32), x])[: len(x)]


def run_candidate(make: Callable[[int], Processor], capture: Audio, ref: Audio, delay_ms: int) -> tuple[Audio, float]:
    """Cleaned capture and CPU seconds per 10 ms frame."""
    process = make(delay_ms)
    n = len(capture) // FRAME * FRAME
    out = np.zeros(n, np.float32)
    cpu = time.process_time()
    for i in range(0, n, FRAME):
        out[i : i + FRAME] = process(capture[i : i + FRAME], ref[i : i + FRAME])
    return out, (time.process_time() - cpu) / (n // FRAME)


def measure(out: Audio, capture: Audio, voice: Audio, span: slice) -> dict[str, float]:
    rate = SPEECH_RATE
    far_only = slice(2 * rate, span.start)  # after 2 s of convergence, before the near end speaks
    after = slice(span.stop + rate // 2, len(out))
    erle = db(rms(capture[far_only])) - db(rms(out[far_only]))
    erle_after = db(rms(capture[after])) - db(rms(out[after])) if after.stop - after.start > rate else float("nan")
    clean = voice[span]
    # The cancellers delay their output by a few ms (AEC3: 8 ms at 16 kHz): compare at the output's own latency.
    latency = max(range(0, rate // 40), key=lambda lag: float(np.dot(out[span.start + lag : span.stop + lag], clean)))
    kept = out[span.start + latency : span.stop + latency]
    clean = clean[: len(kept)]
    corr = float(np.dot(kept, clean) / (np.linalg.norm(kept) * np.linalg.norm(clean) + 1e-12))
    sdr_in = db(rms(voice[span])) - db(rms(capture[span] - voice[span]))
    sdr_out = db(rms(clean)) - db(rms(kept - clean))
    return {"latency_ms": latency / rate * 1000, "erle_db": erle, "erle_after_db": erle_after, "near_corr": corr,
            "near_level_db": db(rms(kept)) - db(rms(clean)), "sir_in_db": sdr_in, "sir_out_db": sdr_out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("far", nargs="+", type=Path)
    parser.add_argument("--near", type=Path, required=True)
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    args = parser.parse_args()
    near = load_wav_16k(args.near)
    print("| candidate | far | delay ms | echo/near dB | alignment | est. delay ms | ERLE dB | ERLE after dB "
          "| near corr | near level dB | SIR in -> out dB | latency ms | CPU us/frame |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for far_path in args.far:
        far = load_wav_16k(far_path)
        for delay_ms in (20, 60, 120):
            for over in (0.0, 6.0):
                capture, reference, voice, span = scenario(far, near, delay_ms / 1000, over)
                window = slice(SPEECH_RATE, 5 * SPEECH_RATE)
                max_lag = SPEECH_RATE // 2
                est = estimate_delay(capture[window], reference[window.start - max_lag : window.stop], max_lag)
                est_ms = float("nan") if est is None else est.lag / SPEECH_RATE * 1000
                for name in args.candidates.split(","):
                    lag = 0 if est is None else max(0, est.lag - round(0.01 * SPEECH_RATE))  # 10 ms causal margin
                    for label, shifted, hint in (("raw", reference, 0), ("aligned", delayed(reference, lag), 10)):
                        out, cpu = run_candidate(CANDIDATES[name], capture, shifted, hint)
                        m = measure(out, capture[: len(out)], voice[: len(out)], span)
                        print(f"| {name} | {far_path.name} | {delay_ms} | {over:+.0f} | {label} | {est_ms:.1f} "
                              f"| {m['erle_db']:.1f} | {m['erle_after_db']:.1f} | {m['near_corr']:.3f} "
                              f"| {m['near_level_db']:+.1f} | {m['sir_in_db']:.1f} -> {m['sir_out_db']:.1f} "
                              f"| {m['latency_ms']:.0f} | {cpu * 1e6:.0f} |", flush=True)


if __name__ == "__main__":
    main()
