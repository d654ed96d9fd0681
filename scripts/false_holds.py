"""Which holds the answer's echo alone would make, replayed on the recordings `voicecli bench duplex --keep-audio DIR`
kept, how loud each was against the user's own voice (voicecli.listen.listener.HOLD_BELOW_VOICE_DB) and how much of
what the microphone heard the canceller took out there (HOLD_REMOVED_DB).

Each session's microphone is cleaned by this checkout's echo canceller (as scripts/duplex_replay.py does) and fed to
the voice detector the app builds from the default configuration. A hold (SpeechHint) inside an answer nobody
interrupted is the echo's; the others are mostly the user's (questions and interruptions; an interrupted answer's
own echo lands there too). The user's voice level is taken as the listener takes it: `speech_level_dbfs` of each
turn outside those answers, the median of the latest VOICE_TURNS. The level gate is not replayed, so holds in the
first second of a session (before the canceller converged, when the app's gate guards) are listed but not live.
Usage: .venv/bin/python scripts/false_holds.py DIR [DIR ...]
"""

from __future__ import annotations

import statistics
import sys
from collections import deque
from pathlib import Path

from voicecli.audio.levels import rms_dbfs, speech_level_dbfs
from voicecli.audio.rates import SPEECH_RATE
from voicecli.bench.duplex import cancelled_capture, load_session
from voicecli.config import Config
from voicecli.listen.endpointing import Endpointer, SpeechEnded, SpeechHint
from voicecli.listen.listener import (
    HOLD_BELOW_VOICE_DB,
    HOLD_LEVEL_SPAN,
    HOLD_REMOVED_DB,
    VOICE_TURNS,
    make_detector,
)

BLOCK = 512


Hold = tuple[bool, float, float | None, float]
"""In an answer nobody interrupted, seconds into the session, dB below the user's voice (None: not known yet), dB
the canceller removed from the microphone there."""


def session_holds(path: Path) -> list[Hold] | None:
    """Every hold (SpeechHint) the voice detector makes on the session's cleaned microphone."""
    session, spans = load_session(path)
    cleaned = cancelled_capture(session)
    if cleaned is None:
        return None
    detector = make_detector("vad", Config.load().audio)
    assert isinstance(detector, Endpointer)
    voices: deque[float] = deque(maxlen=VOICE_TURNS)
    holds: list[Hold] = []
    for start in range(0, len(cleaned) - BLOCK + 1, BLOCK):
        for event in detector.feed(cleaned[start : start + BLOCK], (start + BLOCK) / SPEECH_RATE):
            end = round(event.at * SPEECH_RATE)
            echo_only = any(a <= end <= b for a, b in spans)
            if isinstance(event, SpeechEnded) and not echo_only:
                voices.append(speech_level_dbfs(event.audio))
            elif isinstance(event, SpeechHint):
                heard = rms_dbfs(cleaned[end - HOLD_LEVEL_SPAN : end])
                below = None if not voices else statistics.median(voices) - heard
                removed = rms_dbfs(session.mic[end - HOLD_LEVEL_SPAN : end]) - heard
                holds.append((echo_only, event.at, below, removed))
    return holds


def main(folders: list[Path]) -> int:
    echo: list[Hold] = []
    user: list[Hold] = []
    for folder in folders:
        for path in sorted(folder.glob("*.npz")):
            holds = session_holds(path)
            if holds is None:
                print("the echo canceller's binding (pywebrtc-audio) is not installed")
                return 2
            for hold in holds:
                echo_only, at, below, removed = hold
                (echo if echo_only else user).append(hold)
                shown = "voice level not known yet" if below is None else f"{below:.1f} dB below the voice"
                kind = "echo" if echo_only else "other"
                print(f"{folder.name}/{path.stem}: {kind} hold at {at:.1f} s, {shown}, {removed:.1f} dB removed")
    kinds = (("in answers nobody interrupted (the echo's)", echo), ("elsewhere (mostly the user's)", user))
    for name, figures in kinds:
        known = [b for _, _, b, _ in figures if b is not None]
        under = sum(1 for b in known if b > HOLD_BELOW_VOICE_DB)
        removed = sum(1 for _, _, b, r in figures if r >= HOLD_REMOVED_DB and (b is None or b <= HOLD_BELOW_VOICE_DB))
        print(f"holds {name}: {len(figures)}, {under} of them more than {HOLD_BELOW_VOICE_DB:g} dB below the user's "
              f"voice and {removed} more where the canceller removed {HOLD_REMOVED_DB:g} dB or more (neither is held "
              f"now)" + (f"; below the voice: the least {min(known):.1f} dB, the most {max(known):.1f}"
                         if known else ""))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main([Path(arg) for arg in sys.argv[1:]]))
