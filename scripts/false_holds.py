"""Which holds the answer's echo alone would make, replayed on the recordings `voicecli bench duplex --keep-audio DIR`
kept, and how loud each was against the user's own voice (voicecli.listen.listener.HOLD_BELOW_VOICE_DB); given the
run's results too (DIR=RUN), which of its interruptions the replay hears, and how soon.

Each session's microphone is cleaned by this checkout's echo canceller (as scripts/duplex_replay.py does) and fed to
the voice detector the app builds from the default configuration. A hold (SpeechHint) inside an answer nobody
interrupted is the echo's; the others are mostly the user's (questions and interruptions; an interrupted answer's
own echo lands there too). The user's voice level is taken as the listener takes it: `speech_level_dbfs` of each
turn outside those answers, the median of the latest VOICE_TURNS. The level gate is not replayed, so holds in the
first second of a session (before the canceller converged, when the app's gate guards) are listed but not live.

With audio.echo_double_talk (off by default; VOICECLI_AUDIO__ECHO_DOUBLE_TALK=true), a hold is also made where the
canceller tells double talk (voicecli.audio.double_talk; the listener then holds the answer on it whatever the
level): at each onset of its flag.
An interruption is heard when a hold within HOLD_BELOW_VOICE_DB of the voice comes between the user's first voiced
sample and RESPONSE_S after their last (times from the run's results.json, whose wall clock is laid on the
recordings' monotonic one by the answers' first sounds); "double talk" are those the answer's echo sounded under for
at least half of them, as the bench counts them. Why: a live run takes ~25 min and the interruptions land where the
answers' timing puts them; replayed, a change to the canceller (or to AEC3 itself: a build of pywebrtc-audio on
PYTHONPATH) is compared on the very same audio (results/bench/aec3-tuning-20261206).
The barge-ins are replayed too, by the listener's rule: a SpeechOnset (audio.barge_in_ms of speech) when it is
within HOLD_BELOW_VOICE_DB of the voice, otherwise the turn's start; those in answers nobody interrupted are false,
and each interruption's first is how soon it stopped the answer. VOICECLI_AUDIO__BARGE_IN_MS=N compares lengths
on the same audio (results/bench/barge-in-length-20261206).
With --live, the voice detector is fed what the app's canceller handed on live instead (the echo dump that
`--keep-audio` keeps beside each session, voicecli.audio.echo_dump), and the double-talk holds are made where the
app's own detector told double talk live (the dump's state after each block): where the two disagree, the canceller
was fed differently live than the recordings tell.
Usage: .venv/bin/python scripts/false_holds.py [--live] DIR[=RUN_DIR] [DIR[=RUN_DIR] ...]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.echo_dump import COLUMNS, load_dump
from voicecli.audio.levels import speech_level_dbfs
from voicecli.audio.rates import SPEECH_RATE
from voicecli.bench.audio_marks import AUDIBLE_DBFS
from voicecli.bench.duplex import DOUBLE_TALK, Session, cancelled_capture, live_output, load_session
from voicecli.config import Config
from voicecli.listen.endpointing import Endpointer, SpeechEnded, SpeechHint, SpeechOnset, SpeechStarted
from voicecli.listen.listener import HOLD_BELOW_VOICE_DB, VOICE_TURNS, make_detector

BLOCK = 512
RESPONSE_S = 0.5
"""How long after the user's last voiced sample a hold still counts as hearing the interruption."""
QUIET_BEFORE_S = 1.5
"""Silence on the speaker before a sound that counts as an answer's first (aligning the run's clock)."""


@dataclass(frozen=True)
class Hold:
    """One SpeechHint of the replay: its microphone frame, whether it fell in an answer nobody interrupted, and how
    far below the user's voice it was (None until a turn of the user's was heard)."""

    frame: int
    echo_only: bool
    below: float | None
    double_talk: bool = False
    """Held because the canceller told a voice under the echo (voicecli.audio.double_talk), whatever its level."""
    barge_in: bool = False
    """Not a hold but a barge-in, which stops the answer (as the listener takes them: a SpeechOnset, audio.barge_in_ms
    of speech, or a turn's start that none came before): over an answer nobody interrupted, a false barge-in."""


def session_holds(path: Path, live: bool = False, out: NDArray[np.float32] | None = None,
                  ) -> tuple[Session, list[Hold]] | None:
    """The session and the holds its replay makes (`live`: on what the app's canceller handed on, from its dump, or
    on `out`, a signal of the dump's length in its place); None when the canceller's binding is not installed (or,
    `live`, the dump is missing)."""
    session, spans = load_session(path)
    flags: list[bool] = []
    cleaned = live_output(session, path.with_suffix(""), out) if live else cancelled_capture(session, flags)
    if cleaned is None:
        return None
    if live:
        flags = live_double_talk(session, path.with_suffix(""))
    audio = Config.load().audio
    detector = make_detector("vad", audio)
    assert isinstance(detector, Endpointer)
    voices: deque[float] = deque(maxlen=VOICE_TURNS)
    holds: list[Hold] = []
    onset = False  # the speech under way already barged in at its SpeechOnset
    for index, start in enumerate(range(0, len(cleaned) - BLOCK + 1, BLOCK)):
        if audio.echo_double_talk and flags and flags[index] and (index == 0 or not flags[index - 1]):
            holds.append(Hold(start + BLOCK, any(a <= start + BLOCK <= b for a, b in spans), None, double_talk=True))
        for event in detector.feed(cleaned[start : start + BLOCK], (start + BLOCK) / SPEECH_RATE):
            end = round(event.at * SPEECH_RATE)
            echo_only = any(a <= end <= b for a, b in spans)
            if isinstance(event, SpeechEnded) and not echo_only:
                voices.append(speech_level_dbfs(event.audio))
            elif isinstance(event, SpeechHint | SpeechOnset | SpeechStarted):
                # the speech so far, as the listener takes it (a turn's start: its utterance, pre-roll and all)
                heard = speech_level_dbfs(detector.utterance() if isinstance(event, SpeechStarted) else event.audio)
                hold = Hold(end, echo_only, None if not voices else statistics.median(voices) - heard,
                            barge_in=not isinstance(event, SpeechHint))
                # the listener's rule: a SpeechOnset barges in when it is as loud as the user's voice, the turn's
                # start when no SpeechOnset barged in before it
                barge_in = (isinstance(event, SpeechOnset) and loud(hold)) or (
                    isinstance(event, SpeechStarted) and not onset)
                onset = isinstance(event, SpeechOnset) and barge_in
                if barge_in or isinstance(event, SpeechHint):
                    holds.append(hold)
    return session, holds


def live_double_talk(session: Session, folder: Path) -> list[bool]:
    """The canceller's `double_talk` as the app had it live (the echo dump's state after each block), laid on the
    session's microphone recording as `live_output` lays the output: one flag per BLOCK of the recording."""
    _, blocks = load_dump(folder)
    told = np.repeat(blocks[:, COLUMNS.index("double_talk")], blocks[:, COLUMNS.index("samples")].astype(np.int64))
    placed = live_output(session, folder, told.astype(np.float32))
    assert placed is not None  # the dump's output was there for live_output already
    return [bool(placed[end - 1] > 0.5) for end in range(BLOCK, len(placed) + 1, BLOCK)]


def session_samples(path: Path, results: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's samples of the app session kept at `path` (named `{mode}-{delay}ms.npz` by voicecli.bench.duplex:
    one session per echo delay)."""
    delay = float(path.stem.rsplit("-", 1)[-1].removesuffix("ms"))
    return [s for s in results["samples"] if s["detail"]["delay_ms"] == delay]


def wall_offset(session: Session, samples: list[dict[str, Any]]) -> float:
    """Wall-clock seconds minus monotonic ones for the run that recorded `session`: the offset that lays the run's
    answer starts (wall) on the first sounds after QUIET_BEFORE_S of silence in the speaker's recording."""
    size = SPEECH_RATE // 100
    count = len(session.speaker) // size
    power = np.mean(np.square(session.speaker[: count * size].reshape(count, size)), axis=1)
    loud = power > 10 ** (AUDIBLE_DBFS / 10)
    onsets, quiet = [], 0
    for index, is_loud in enumerate(loud):
        if is_loud and quiet >= QUIET_BEFORE_S * 100:
            onsets.append(session.speaker_timing.time(index * size))
        quiet = 0 if is_loud else quiet + 1
    walls = [s["detail"]["played_at_wall"] + s["detail"]["times_s"]["answer_start"] for s in samples
             if s["detail"]["times_s"]["answer_start"] is not None]
    if not onsets or not walls:
        raise ValueError("no answer found to align the run's clock with the recordings")

    def misfit(offset: float) -> float:
        return float(sum(min(abs(wall - offset - onset) for onset in onsets) for wall in walls))

    return float(min((walls[0] - onset for onset in onsets), key=misfit))


def kept_sessions(arguments: list[str]) -> Iterator[tuple[Session, list[tuple[int, int]], list[dict[str, Any]]]]:
    """Each session kept in the folders of `arguments` (KEEP_DIR=RUN_DIR each): the recordings, the echo-only
    answers' spans, and the run's samples of that session."""
    for argument in arguments:
        folder, _, run = argument.partition("=")
        results = json.loads((Path(run) / "results.json").read_text())
        for path in sorted(Path(folder).glob("*.npz")):
            session, spans = load_session(path)
            yield session, spans, session_samples(path, results)


def speaker_on_mic(session: Session, lag_s: float, off_s: float = 0.0) -> NDArray[np.float32]:
    """What the speaker played, laid sample for sample on the microphone's recording `lag_s` + `off_s` later, by the
    two recorders' clocks (the two taken off one after the other, as the replays' logs were made)."""
    times = np.interp(np.arange(len(session.mic), dtype=np.float64), session.mic_timing.frames,
                      session.mic_timing.times)
    at = np.interp(times - lag_s - off_s, session.speaker_timing.times, session.speaker_timing.frames)
    return np.asarray(np.interp(at, np.arange(len(session.speaker)), session.speaker), np.float32)


def played_at_echo(session: Session, samples: list[dict[str, Any]], off_s: float = 0.0) -> NDArray[np.float32]:
    """What the speaker played, laid on the microphone's recording at the echo's delay (the median the run's
    canceller reported for the session) plus `off_s`: the far end a canceller aligned exactly would read."""
    lag = statistics.median(s["detail"]["echo_delay_ms"] for s in samples if s["detail"]["echo_delay_ms"]) / 1000
    return speaker_on_mic(session, lag, off_s)


def interruption_spans(session: Session, samples: list[dict[str, Any]]) -> list[tuple[float | None, float, float]]:
    """Each interruption of the session's turns: the share of it over the answer's echo (None: not measured), and
    the microphone frames of the user's first voiced sample and of RESPONSE_S after their last."""
    offset = wall_offset(session, samples)
    spans = []
    for sample in samples:
        detail = sample["detail"]
        times = detail["times_s"]
        if detail["kind"] == "echo_only" or times["speech_start"] is None:
            continue
        base = detail["played_at_wall"] - offset
        spans.append((detail["talk_over"], session.mic_timing.frame(base + times["speech_start"]),
                      session.mic_timing.frame(base + times["speech_end"] + RESPONSE_S)))
    return spans


def interruption_starts(session: Session, samples: list[dict[str, Any]]) -> list[tuple[float, int]]:
    """Each interruption of the session's turns: the share of it over the answer's echo, and the microphone frame
    of the user's first voiced sample."""
    return [(share or 0.0, int(first)) for share, first, _ in interruption_spans(session, samples)]


Heard = tuple[float, float | None]
"""An interruption: the share of it over the answer's echo, and when the replay held for it (ms, or None)."""


def loud(hold: Hold) -> bool:
    """Whether the speech was within HOLD_BELOW_VOICE_DB of the user's voice (or came before it was known)."""
    return (hold.below or 0.0) <= HOLD_BELOW_VOICE_DB


def interruptions(session: Session, holds: list[Hold], samples: list[dict[str, Any]]) -> list[Heard]:
    """Each interruption of the session's turns: ms from the user's first voiced sample to the first of `holds`
    (holds loud enough to be theirs, or barge-ins) in it."""
    found: list[Heard] = []
    for share, first, last in interruption_spans(session, samples):
        if share is None:
            continue
        heard = [h.frame for h in holds if first <= h.frame <= last]
        found.append((share, (heard[0] - first) / SPEECH_RATE * 1000 if heard else None))
    return found


def print_heard(kind: str, heard: list[Heard]) -> None:
    """How many interruptions (and of them in double talk) `kind` came for, and how soon (p50, p95)."""
    for name, group in (("interruptions", heard), ("of them double talk", [h for h in heard if h[0] >= DOUBLE_TALK])):
        times = sorted(ms for _, ms in group if ms is not None)
        shown = f", {kind} p50 {statistics.median(times):.0f} ms" if times else ""
        if len(times) >= 2 and name == "interruptions":
            shown += f" p95 {np.percentile(times, 95):.0f} ms"
        print(f"{name}: {len(times)} of {len(group)} {'heard' if kind == 'held' else kind}{shown}")


def main(arguments: list[str]) -> int:
    live = arguments[:1] == ["--live"]
    arguments = arguments[live:]
    echo: list[Hold] = []
    user: list[Hold] = []
    barges: list[Hold] = []
    heard: list[Heard] = []
    barged: list[Heard] = []
    for argument in arguments:
        folder, _, run = argument.partition("=")
        results = json.loads((Path(run) / "results.json").read_text()) if run else None
        for path in sorted(Path(folder).glob("*.npz")):
            replayed = session_holds(path, live)
            if replayed is None:
                print(f"{path.with_suffix('')} holds no echo dump with the canceller's output" if live else
                      "the echo canceller's binding (pywebrtc-audio) is not installed")
                return 2
            session, found = replayed
            holds = [h for h in found if not h.barge_in]
            onsets = [h for h in found if h.barge_in]
            for barge in (h for h in onsets if h.echo_only):
                barges.append(barge)
                shown = "voice level not known yet" if barge.below is None else f"{barge.below:.1f} dB below the voice"
                print(f"{Path(folder).name}/{path.stem}: echo barge-in at {barge.frame / SPEECH_RATE:.1f} s, {shown}")
            for hold in holds:
                (echo if hold.echo_only else user).append(hold)
                if hold.echo_only:
                    shown = ("double talk told" if hold.double_talk else "voice level not known yet"
                             if hold.below is None else f"{hold.below:.1f} dB below the voice")
                    print(f"{Path(folder).name}/{path.stem}: echo hold at {hold.frame / SPEECH_RATE:.1f} s, {shown}")
            if results is not None:
                samples = session_samples(path, results)
                heard += interruptions(session, [h for h in holds if loud(h)], samples)
                barged += interruptions(session, onsets, samples)
    kinds = (("in answers nobody interrupted (the echo's)", echo), ("elsewhere (mostly the user's)", user))
    for name, figures in kinds:
        known = [h.below for h in figures if h.below is not None]
        under = sum(1 for b in known if b > HOLD_BELOW_VOICE_DB)
        told = sum(h.double_talk for h in figures)
        print(f"holds {name}: {len(figures)}, {told} of them on double talk told, {under} more than "
              f"{HOLD_BELOW_VOICE_DB:g} dB below the user's voice (not held now)"
              + (f"; the least far below {min(known):.1f} dB, the most {max(known):.1f}" if known else ""))
    print(f"barge-ins in answers nobody interrupted (false): {len(barges)}, "
          f"{sum(not loud(b) for b in barges)} more than {HOLD_BELOW_VOICE_DB:g} dB below the user's voice")
    if not any("=" in argument for argument in arguments):
        return 0
    print_heard("held", heard)
    print_heard("barged in", barged)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
