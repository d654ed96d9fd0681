"""Where a restarted output stream really plays, against the DAC times the player hands the far-end reference, on
the private PulseAudio (voicecli.bench.virtual_audio).

The player (voicecli.playback.player) stamps each block it hands the device with a DAC time: the monotonic time of
its callback plus PortAudio's output latency for it. A restart (every hold and barge-in flushes the device) begins a
new stretch of the far-end reference, placed by those stamps. This plays noise through the real Player, holds it
and releases it RESTARTS times (a restart each), and:
1. prints, per restart, where each of the first BLOCKS blocks says the stretch began (its DAC time less the audio
   before it in the stretch) against the first block's: a stretch placed by its first block alone is off by what the
   others disagree with it;
2. records the speaker's monitor in the same process (a PortAudio input stream, its samples laid on the monotonic
   clock by sample count from the earliest callback, as the echo canceller lays the capture) and prints, per
   release, when the noise came back there less the DAC time of the block that carried it back. A constant is the
   monitor's own latency; what varies from one restart to the next is what the DAC times miss. The monitor's
   sample count runs on the card's clock, so the difference also drifts by its ppm (~0.3 ms per 1.3 s cycle at
   ~242 ppm); a linear fit over the restarts takes that out;
3. prints how the monitor's delivery moved across each restart: how much later its callbacks came for the same
   samples. The bench's echo path (voicecli.bench.echo_path) writes each piece of the monitor into the microphone
   as it arrives, so a move there moves the echo's delay by as much, where a room would not.
Usage: .venv/bin/python results/bench/stretch-placement-20261206/restart_dac_times.py
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from voicecli.audio_devices import load_sounddevice, reinitialize_portaudio
from voicecli.bench.virtual_audio import SPEAKER_MONITOR, PrivatePulse
from voicecli.playback.player import Player

RESTARTS = 20
BLOCKS = 40
RATE = 24_000
MONITOR_RATE = 48_000
HELD_S = 0.3
PLAYED_S = 1.0


class Pushes:
    """Stands in for the far-end reference at the player's tap: (DAC time, peak, frames) per block, peak -1 a cut."""

    def __init__(self) -> None:
        self.blocks: list[tuple[float, float, int]] = []

    def push(self, block: NDArray[np.float32], rate: int, dac_time: float) -> None:
        self.blocks.append((dac_time, float(np.abs(block).max()), len(block)))

    def cut(self, at: float) -> None:
        self.blocks.append((at, -1.0, 0))


def stretch_starts(blocks: list[tuple[float, float, int]], rate: int) -> list[NDArray[np.float64]]:
    """Per stretch after a cut: where each of its first BLOCKS blocks says it began, in ms against the first's."""
    stretches: list[list[tuple[float, float, int]]] = []
    for block in blocks:
        if block[1] < 0:
            stretches.append([])
        elif stretches:
            stretches[-1].append(block)
    starts = []
    for stretch in stretches:
        if len(stretch) >= BLOCKS:
            first = stretch[:BLOCKS]
            before = np.cumsum([0] + [n for _, _, n in first[:-1]])
            starts.append((np.array([dac for dac, _, _ in first]) - before / rate - first[0][0]) * 1000)
    return starts


def comebacks(blocks: list[tuple[float, float, int]]) -> list[float]:
    """The DAC time of each block that carried the noise back after a hold (the first loud one after silence)."""
    found, silent = [], 0
    for dac, peak, _ in blocks:
        if peak < 0:
            continue
        if peak > 0.001 and silent >= 20:
            found.append(dac)
        silent = 0 if peak > 0.001 else silent + 1
    return found


def onsets(recorded: list[tuple[float, NDArray[np.float32]]]) -> list[float]:
    """Monotonic times of the monitor's sounds after 0.2 s of silence, laid by sample count from the earliest
    callback (each entry: its callback time, its samples)."""
    counts = np.cumsum([0] + [len(samples) for _, samples in recorded])
    ends = np.array([at for at, _ in recorded]) - counts[1:] / MONITOR_RATE
    base = float(np.min(ends))  # the monotonic time of sample 0 by the earliest callback
    loud = np.abs(np.concatenate([samples for _, samples in recorded])) > 0.01
    found, quiet = [], 0
    for i, is_loud in enumerate(loud):
        if is_loud and quiet >= 0.2 * MONITOR_RATE:
            found.append(base + i / MONITOR_RATE)
        quiet = 0 if is_loud else quiet + 1
    return found


def delivery_moves(recorded: list[tuple[float, NDArray[np.float32]]], back: list[float]) -> list[float]:
    """How much later the monitor's callbacks delivered its samples after each comeback (the second from 0.2 s
    after it) than before its hold (the second before HELD_S + 0.1 s ahead of it), in ms: the earliest of each
    callback's time less the time its sample count says, over each span."""
    counts = np.cumsum([len(samples) for _, samples in recorded])
    times = np.array([at for at, _ in recorded])
    late = times - counts / MONITOR_RATE
    moves = []
    for at in back:
        before = late[(times > at - HELD_S - 1.1) & (times < at - HELD_S - 0.1)]
        after = late[(times > at + 0.2) & (times < at + 1.2)]
        if len(before) and len(after):
            moves.append(float(np.min(after) - np.min(before)) * 1000)
    return moves


def main() -> None:
    recorded: list[tuple[float, NDArray[np.float32]]] = []

    def record(indata: NDArray[np.float32], frames: int, time_info: Any, status: Any) -> None:
        recorded.append((time.monotonic(), indata[:, 0].copy()))

    with PrivatePulse():
        os.environ["PULSE_SOURCE"] = SPEAKER_MONITOR
        reinitialize_portaudio()
        monitor = load_sounddevice().InputStream(samplerate=MONITOR_RATE, channels=1, dtype="float32",
                                                 blocksize=MONITOR_RATE // 100, latency=0.02, callback=record)
        monitor.start()
        player = Player(source_rate=RATE)
        pushes = Pushes()
        player.tap(pushes)  # type: ignore[arg-type]
        noise = (np.random.default_rng(0).standard_normal(RATE * 60) * 0.1).astype(np.float32)
        player.write(noise, "noise")
        time.sleep(PLAYED_S)
        for _ in range(RESTARTS):
            player.hold()
            time.sleep(HELD_S)
            player.release()
            time.sleep(PLAYED_S)
        player.stop()
        player.close()
        monitor.stop()
        monitor.close()
        del os.environ["PULSE_SOURCE"]
    starts = stretch_starts(pushes.blocks, player.stream_rate)
    for s in starts:
        print(f"first {BLOCKS} blocks: the stretch's start against the first block's min {s.min():+.2f} ms, "
              f"p50 {np.median(s):+.2f}, max {s.max():+.2f}")
    spread = np.concatenate(starts)
    print(f"{len(starts)} restarts: every block of the first {BLOCKS} within {spread.min():+.2f}..{spread.max():+.2f} "
          "ms of where the first placed the stretch")
    back, heard = comebacks(pushes.blocks), onsets(recorded)
    if len(back) != len(heard):
        print(f"the monitor heard {len(heard)} comebacks, the player played {len(back)}: not paired")
        return
    late = (np.array(heard) - np.array(back)) * 1000
    fit = np.polyval(np.polyfit(np.arange(len(late)), late, 1), np.arange(len(late)))
    print(f"the noise back on the monitor less its DAC time, ms: {np.round(late, 2).tolist()}")
    print(f"less the card's drift (a linear fit): {np.round(late - fit, 2).tolist()}; max |residual| "
          f"{np.max(np.abs(late - fit)):.2f} ms over {len(late)} restarts")
    moves = np.array(delivery_moves(recorded, back))
    print(f"the monitor's delivery across each restart (its callbacks' earliest lateness after less before), ms: "
          f"{np.round(moves, 2).tolist()}; |move| p50 {np.median(np.abs(moves)):.2f}, max {np.max(np.abs(moves)):.2f}")


if __name__ == "__main__":
    main()
