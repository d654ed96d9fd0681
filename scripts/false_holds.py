"""Which holds the answer's echo alone would make, replayed on the recordings `voicecli bench duplex --keep-audio DIR`
kept, and how loud each was against the user's own voice (voicecli.listen.listener.HOLD_BELOW_VOICE_DB).

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
from voicecli.listen.listener import HOLD_BELOW_VOICE_DB, HOLD_LEVEL_SPAN, VOICE_TURNS, make_detector

BLOCK = 512


def session_holds(path: Path) -> list[tuple[bool, float, float | None]] | None:
    """(in an answer nobody interrupted, seconds into the session, dB below the user's voice or None) per hold."""
    session, spans = load_session(path)
    cleaned = cancelled_capture(session)
    if cleaned is None:
        return None
    detector = make_detector("vad", Config.load().audio)
    assert isinstance(detector, Endpointer)
    voices: deque[float] = deque(maxlen=VOICE_TURNS)
    holds: list[tuple[bool, float, float | None]] = []
    for start in range(0, len(cleaned) - BLOCK + 1, BLOCK):
        for event in detector.feed(cleaned[start : start + BLOCK], (start + BLOCK) / SPEECH_RATE):
            end = round(event.at * SPEECH_RATE)
            echo_only = any(a <= end <= b for a, b in spans)
            if isinstance(event, SpeechEnded) and not echo_only:
                voices.append(speech_level_dbfs(event.audio))
            elif isinstance(event, SpeechHint):
                heard = rms_dbfs(cleaned[end - HOLD_LEVEL_SPAN : end])
                below = None if not voices else statistics.median(voices) - heard
                holds.append((echo_only, event.at, below))
    return holds


def main(folders: list[Path]) -> int:
    echo: list[float | None] = []
    user: list[float | None] = []
    for folder in folders:
        for path in sorted(folder.glob("*.npz")):
            holds = session_holds(path)
            if holds is None:
                print("the echo canceller's binding (pywebrtc-audio) is not installed")
                return 2
            for echo_only, at, below in holds:
                (echo if echo_only else user).append(below)
                if echo_only:
                    shown = "voice level not known yet" if below is None else f"{below:.1f} dB below the voice"
                    print(f"{folder.name}/{path.stem}: echo hold at {at:.1f} s, {shown}")
    kinds = (("in answers nobody interrupted (the echo's)", echo), ("elsewhere (mostly the user's)", user))
    for name, figures in kinds:
        known = [b for b in figures if b is not None]
        under = sum(1 for b in known if b > HOLD_BELOW_VOICE_DB)
        print(f"holds {name}: {len(figures)}, {under} of them more than {HOLD_BELOW_VOICE_DB:g} dB below the user's "
              f"voice (not held now)" + (f"; the least far below {min(known):.1f} dB, the most {max(known):.1f}"
                                         if known else ""))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main([Path(arg) for arg in sys.argv[1:]]))
