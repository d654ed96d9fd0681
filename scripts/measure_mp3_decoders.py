#!/usr/bin/env python3
"""Streaming MP3 decode, side by side: voicecli's windowed miniaudio decoder against PyAV's incremental decoder.

What the pipeline needs from a streaming decoder: little CPU per second of audio (the 2-core box also runs the
endpoint and the LLM), samples the moment a frame's last byte arrives, and the same samples a whole-stream decode
gives (with LAME's 1105-sample delay trimmed, which the endpoint's Info-less stream needs). This measures the three
on the endpoint's own stream (lameenc 24 kHz mono 64 kbps, quality 5, cut into whole frames as the WebSocket sends
them) and writes results.json. Run it under the shared CPU lock:

    flock /work/coord/cpu.lock python scripts/measure_mp3_decoders.py --out results/bench/mp3-decoders
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
import wave
from pathlib import Path
from typing import Any

import av
import lameenc
import miniaudio
import numpy as np
from numpy.typing import NDArray

from voicecli.audio.mp3_decode import LAME_TOTAL_DELAY, Mp3StreamDecoder
from voicecli.audio.mp3_frames import Mp3FrameSplitter, split_frames

RATE = 24_000


class PyAvStreamDecoder:
    """The candidate: whole frames (cut by the shared splitter) fed one packet each to FFmpeg's mp3float decoder,
    which keeps the bit reservoir and filterbank state itself; LAME's delay trimmed as the windowed decoder does."""

    def __init__(self, delay: int = LAME_TOTAL_DELAY) -> None:
        self._codec = av.CodecContext.create("mp3float", "r")
        self._splitter = Mp3FrameSplitter()
        self._skip = delay

    def feed(self, chunk: bytes) -> NDArray[np.float32]:
        out = [frame.to_ndarray()[0] for data in self._splitter.frames(chunk) for frame in
               self._codec.decode(av.Packet(data))]
        samples = np.concatenate(out) if out else np.zeros(0, np.float32)
        if self._skip:
            cut = min(self._skip, samples.size)
            samples, self._skip = samples[cut:], self._skip - cut
        return np.ascontiguousarray(samples, dtype=np.float32)

    def flush(self) -> NDArray[np.float32]:
        return self.feed(b"")


def speech_24k() -> NDArray[np.float32]:
    """About 10 s of espeak-ng speech at 24 kHz (a chirp when espeak-ng is missing)."""
    if shutil.which("espeak-ng"):
        text = ("Voice assistants feel slow when they wait for the whole answer. Streaming each sentence as soon as "
                "it is complete lets the listener hear the answer almost at once. One connection stays open for the "
                "whole conversation.")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "s.wav"
            subprocess.run(["espeak-ng", "-w", str(path), text], check=True, capture_output=True)
            with wave.open(str(path)) as w:
                rate = w.getframerate()
                pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768
        positions = np.arange(0, len(pcm) * RATE / rate) * rate / RATE
        return np.interp(positions, np.arange(len(pcm)), pcm).astype(np.float32)
    t = np.arange(RATE * 10) / RATE
    return (0.4 * np.sin(2 * np.pi * (120 * t + 300 * t * t))).astype(np.float32)


def endpoint_stream(samples: NDArray[np.float32]) -> list[bytes]:
    """The endpoint's MP3 as the WebSocket delivers it: one message per ~100 ms piece, whole frames only."""
    enc = lameenc.Encoder()
    enc.set_bit_rate(64)
    enc.set_in_sample_rate(RATE)
    enc.set_out_sample_rate(RATE)
    enc.set_channels(1)
    enc.set_quality(5)
    pcm = (np.clip(samples, -1, 1) * 32767).round().astype("<i2")
    messages, pending = [], b""
    for start in range(0, pcm.size, RATE // 10):
        frames, pending = split_frames(pending + bytes(enc.encode(pcm[start : start + RATE // 10].tobytes())))
        if frames:
            messages.append(b"".join(frames))
    frames, pending = split_frames(pending + bytes(enc.flush()))
    messages.append(b"".join(frames) + pending)
    return messages


def run(factory: Any, messages: list[bytes]) -> tuple[NDArray[np.float32], float, float]:
    """Decode the messages; returns (samples, CPU seconds, seconds from the first byte fed to the first sample)."""
    decoder = factory()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    first: float | None = None
    pieces = []
    for message in messages:
        out = decoder.feed(message)
        if first is None and out.size:
            first = time.perf_counter() - wall0
        pieces.append(out)
    pieces.append(decoder.flush())
    cpu = time.process_time() - cpu0
    return np.concatenate(pieces), cpu, first if first is not None else float("nan")


def first_frame_latency(factory: Any, messages: list[bytes]) -> float:
    """Seconds to decode the frame that completes the first sample (bytes fed one frame at a time)."""
    decoder = factory()
    frames = [f for m in messages for f in split_frames(m)[0]]
    for frame in frames:
        start = time.perf_counter()
        if decoder.feed(frame).size:
            return time.perf_counter() - start
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/bench/mp3-decoders"))
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    load = os.getloadavg()
    messages = endpoint_stream(speech_24k())
    data = b"".join(messages)
    whole_mini = np.frombuffer(miniaudio.mp3_read_f32(data).samples, np.float32)[LAME_TOTAL_DELAY:]
    whole_av = PyAvStreamDecoder()
    whole_av_out = np.concatenate([whole_av.feed(data), whole_av.flush()])
    audio_s = whole_mini.size / RATE
    candidates = {
        "windowed-miniaudio": lambda: Mp3StreamDecoder(lame_delay_without_info_frame=LAME_TOTAL_DELAY),
        "pyav-incremental": PyAvStreamDecoder,
    }
    results: dict[str, Any] = {"audio_s": round(audio_s, 3), "messages": len(messages), "bytes": len(data),
                               "repeats": args.repeats, "load_average": [round(x, 2) for x in load]}
    for name, factory in candidates.items():
        cpu, first, frame_latency = [], [], []
        samples = np.zeros(0, np.float32)
        for _ in range(args.repeats):
            samples, c, f = run(factory, messages)
            cpu.append(c)
            first.append(f)
            frame_latency.append(first_frame_latency(factory, messages))
        reference = whole_mini if name.startswith("windowed") else whole_av_out
        n = min(samples.size, whole_mini.size)
        diff = np.abs(samples[:n] - whole_mini[:n])
        results[name] = {
            "cpu_ms_per_audio_s": round(1000 * float(np.median(cpu)) / audio_s, 3),
            "first_sample_ms_first_message": round(1000 * float(np.median(first)), 3),
            "first_frame_decode_ms": round(1000 * float(np.median(frame_latency)), 3),
            "samples": int(samples.size),
            "identical_to_own_whole_stream_decode": bool(np.array_equal(samples, reference)),
            "samples_vs_miniaudio_whole_stream": int(whole_mini.size),
            "max_abs_diff_vs_miniaudio_whole": float(diff.max()) if n else None,
            "snr_db_vs_miniaudio_whole": round(float(10 * np.log10(np.sum(whole_mini[:n] ** 2)
                                                                   / max(np.sum(diff ** 2), 1e-30))), 1),
        }
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
