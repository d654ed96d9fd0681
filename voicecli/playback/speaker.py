"""The speaker as the pipeline sees it: playback.Player behind the AudioSink interface, and the choice of sink."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from voicecli.audio.pcm import Samples
from voicecli.config import Config
from voicecli.playback.player import Player
from voicecli.playback.sinks import AudioSink, CollectingSink

ECHO_TAIL_S = 0.3
"""How long after a sound left the DAC its echo may still reach the microphone: the acoustic path and capture
buffering (the bulk delay, 30-125 ms in bench duplex) plus the room's reverberation (a 0.3 s RT60 is down 20 dB
after 0.1 s). The echo gate compares the microphone with the loudest of what the DAC played over this span
(`Speaker.level_db`). Why it matters: at the answer's end, the queue empties a device latency before the last sound
and the echo of the last words comes after it; where the canceller was not yet relied on (restarted 0.7 s
before), that tail held the voice and barged in (bench duplex, duplex-diag 2026-12-05)."""


class Speaker:
    """Plays each answer as its samples arrive; reports when the first audible sample reached the device."""

    def __init__(self, player: Player) -> None:
        self.player = player

    def write(self, samples: Samples, answer_id: str) -> None:
        self.player.write(samples, answer_id)

    def level_db(self) -> float:
        """The loudest level of what the DAC played over the last ECHO_TAIL_S, whose echo the microphone may be
        hearing now (the echo gate compares the microphone with it); silence when nothing was. Not the level of the
        audio written last, as before: an answer is written seconds ahead of playback, in pieces of any level, so a
        quiet piece written last let the echo of a loud one through. In bench duplex 10 of the 42 holds in answers
        nobody interrupted, in five runs, came 0.3-0.6 s into the answer, where the gate guards (a session's first
        answer, before AEC3 has adapted; a restarted stream's delay not yet confirmed)."""
        now = time.monotonic()
        return self.player.level_db(now - ECHO_TAIL_S, now)

    def finish(self, answer_id: str) -> None:
        self.player.end_answer(answer_id)

    def first_played(self, answer_id: str) -> float | None:
        return self.player.first_audible(answer_id)

    def played_s(self, answer_id: str) -> float | None:
        """Seconds of the answer played out of the DAC: what the device took, less what it still holds (a barge-in
        reads this right after stop(), which flushes the device, so that part was never heard)."""
        timing = self.player.timing(answer_id)
        if timing is None:
            return None
        taken = timing.frames_played / self.player.stream_rate
        still = 0.0 if timing.last_sample_at_dac is None else max(0.0, timing.last_sample_at_dac - time.monotonic())
        return max(0.0, taken - still)

    def underruns(self, answer_id: str) -> int:
        timing = self.player.timing(answer_id)
        return 0 if timing is None else timing.underruns

    def stop(self) -> None:
        self.player.stop()

    def hold(self) -> None:
        self.player.hold()

    def release(self) -> None:
        self.player.release()

    def drained(self) -> bool:
        return self.player.wait_done(timeout=0)

    def watch(self, wake: Callable[[], None]) -> None:
        self.player.watch(wake)

    def close(self) -> None:
        self.player.close()


def open_speaker(config: Config) -> Speaker:
    """The configured output device (audio.output_device: name, index, or empty for the default)."""
    wanted = config.audio.output_device
    device: str | int | None = int(wanted) if wanted.isdigit() else (wanted or None)
    return Speaker(Player(device, latency=config.audio.output_latency_ms / 1000,
                          rebuffer_s=config.audio.rebuffer_ms / 1000))


def open_sink(config: Config, mute: bool, out: Path | None) -> tuple[AudioSink, str]:
    """The speaker when there is one; otherwise keep the audio (saved with --out) and say why nothing is heard.

    Every front end gets its sink from this, through converse.session.start_session.
    """
    if mute or out is not None:
        return CollectingSink(), "muted" if mute else f"saving to {out}"
    try:
        return open_speaker(config), "speaker"
    except Exception as exc:  # no PortAudio, no device, device busy: typing and answers still work
        return CollectingSink(), f"no audio output ({exc}); answers are shown, not played"
