"""How the microphone's blocks arrive at each block size: PortAudio's reported input latency and the intervals
between the callbacks' stamps, on a private PulseAudio (the virtual microphone the benches use), 4 s each.
Usage: .venv/bin/python results/bench/mic-block-20261206/mic_block.py [BLOCK_MS ...]   (default 32 16 10)
"""

from __future__ import annotations

import asyncio
import sys
import time

import numpy as np

from voicecli.audio_devices import reinitialize_portaudio
from voicecli.bench.virtual_audio import PrivatePulse
from voicecli.listen.microphone import Microphone


async def measure(block_ms: float, seconds: float = 4.0) -> None:
    with Microphone(None, block_ms=block_ms) as mic:
        mic.start()
        stamps: list[float] = []
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            stamps.append((await mic.queue.get()).at)
        latency = mic.latency_s
    gaps = np.diff(stamps) * 1000
    p10, p50, p90 = np.percentile(gaps, [10, 50, 90])
    print(f"block {block_ms:g} ms: reported input latency {latency * 1000:.1f} ms, {len(stamps)} blocks in "
          f"{seconds:g} s, between stamps p10 / p50 / p90 {p10:.1f} / {p50:.1f} / {p90:.1f} ms, max {gaps.max():.1f}")


def main(arguments: list[str]) -> int:
    sizes = [float(a) for a in arguments] or [32.0, 16.0, 10.0]
    with PrivatePulse():
        reinitialize_portaudio()
        for size in sizes:
            asyncio.run(measure(size))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
