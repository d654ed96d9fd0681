"""How sure the voice detector was of each would-be barge-in at 160 ms, replayed on what the app's canceller handed on
live (the echo dumps `voicecli bench duplex --keep-audio` keeps), and how loud it was against the user's voice.

Every candidate that reaches 5 speech windows (audio.barge_in_ms 160, no sure onset) is reported with:
- the mean probability of its speech windows (what voicecli.listen.endpointing.SURE_SPEECH is compared with);
- how far below the user's voice it was, measured two ways: the speech so far (`speech_level_dbfs`, as the listener
  takes it now) and the latest 96 ms (as it took it until 2026-12-06);
- whether it fell in an answer nobody interrupted (the echo's alone: a false barge-in when the level rule lets it
  through), or is the first onset of an interruption (and how much of that interruption the answer's echo sounded
  under, as the bench counts it).
Onsets in a session's first FIRST_S are left out: the app's level gate guards there while the canceller adapts, which
the replay does not model. The user's voice level is the listener's: the median of the latest VOICE_TURNS turns
outside the echo-only answers.
Usage: .venv/bin/python results/bench/sure-onset-20261206/onset_certainty.py KEEP_DIR=RUN_DIR [...]
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
from collections import deque
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

from false_holds import interruption_spans, session_samples

from voicecli.audio.levels import rms_dbfs, speech_level_dbfs
from voicecli.audio.rates import SPEECH_RATE
from voicecli.bench.duplex import live_output, load_session
from voicecli.config import Config
from voicecli.listen.endpointing import SURE_SPEECH, WINDOW, Endpointer, SileroVad, SpeechEnded, SpeechOnset
from voicecli.listen.listener import HOLD_BELOW_VOICE_DB, VOICE_TURNS, make_detector

FIRST_S = 15.0
LEAD_S = 0.3
"""An onset up to this long before an interruption's first voiced sample is its (the detector's first window)."""


class RecordingVad(SileroVad):
    """Silero, keeping every probability it gives."""

    def __init__(self) -> None:
        super().__init__()
        self.probabilities: list[float] = []

    def __call__(self, window: np.typing.NDArray[np.float32]) -> float:
        probability = super().__call__(window)
        self.probabilities.append(probability)
        return probability


@dataclasses.dataclass(frozen=True)
class Onset:
    run: str
    session: str
    at_s: float
    echo_only: bool
    interruption_ms: float | None
    over_echo: float | None
    certainty: float
    below_so_far: float | None
    below_96ms: float | None


def onsets(keep: Path, run: Path) -> list[Onset]:
    results = json.loads((run / "results.json").read_text())
    audio = dataclasses.replace(Config.load().audio, barge_in_ms=160, barge_in_sure_ms=0)
    found: list[Onset] = []
    for path in sorted(keep.glob("*.npz")):
        session, spans = load_session(path)
        out = live_output(session, path.with_suffix(""))
        if out is None:
            continue
        samples = session_samples(path, results)
        interruptions = interruption_spans(session, samples)
        vad = RecordingVad()
        detector = make_detector("vad", audio, vad)
        assert isinstance(detector, Endpointer)
        voices: deque[float] = deque(maxlen=VOICE_TURNS)
        told: set[int] = set()  # interruptions whose first onset was seen
        for start in range(0, len(out) - WINDOW + 1, WINDOW):
            for event in detector.feed(out[start : start + WINDOW], (start + WINDOW) / SPEECH_RATE):
                end = round(event.at * SPEECH_RATE)
                echo_only = any(a <= end <= b for a, b in spans)
                if isinstance(event, SpeechEnded) and not echo_only:
                    voices.append(speech_level_dbfs(event.audio))
                if not isinstance(event, SpeechOnset) or event.at < FIRST_S:
                    continue
                windows = len(event.audio) // WINDOW
                speech = [p for p in vad.probabilities[-windows:] if p >= detector.threshold]
                voice = statistics.median(voices) if voices else None
                which = next((i for i, (_, first, last) in enumerate(interruptions)
                              if first - LEAD_S * SPEECH_RATE <= end <= last), None)
                first = which if which is not None and which not in told else None  # its first onset
                if which is not None:
                    told.add(which)
                found.append(Onset(
                    run.name, path.stem, event.at, echo_only,
                    None if first is None else (end - interruptions[first][1]) * 1000 / SPEECH_RATE,
                    None if first is None else interruptions[first][0],
                    float(np.mean(speech)),
                    None if voice is None else voice - speech_level_dbfs(event.audio),
                    None if voice is None else voice - rms_dbfs(out[end - 3 * WINDOW : end])))
    return found


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f} ({len(values)})" if values else "none"


def main(arguments: list[str]) -> int:
    found: list[Onset] = []
    for argument in arguments:
        keep, _, run = argument.partition("=")
        found += onsets(Path(keep), Path(run))
    for onset in found:
        print(json.dumps(dataclasses.asdict(onset)))
    echo = [o for o in found if o.echo_only]
    through = [o for o in echo if (o.below_so_far or 0.0) <= HOLD_BELOW_VOICE_DB]
    kept_out = [o for o in echo if o not in through]
    print(f"\nonsets at 160 ms past the first {FIRST_S:g} s, in answers nobody interrupted: {len(echo)}")
    print(f"  within {HOLD_BELOW_VOICE_DB:g} dB of the voice (the speech so far), mean speech probability "
          f"{spread([o.certainty for o in through])}")
    print(f"  more than {HOLD_BELOW_VOICE_DB:g} dB below: {spread([o.certainty for o in kept_out])}; below the voice "
          f"by the speech so far {spread([o.below_so_far or 0.0 for o in kept_out])}, by the latest 96 ms "
          f"{spread([o.below_96ms or 0.0 for o in kept_out])}")
    firsts = [o for o in found if o.interruption_ms is not None and not o.echo_only]
    print(f"interruptions' first onsets: {len(firsts)}, sure (>= {SURE_SPEECH:g}) "
          f"{sum(o.certainty >= SURE_SPEECH for o in firsts)}")
    for name, low, high in (("< 15 % over the echo", 0.0, 0.15), ("15-50 %", 0.15, 0.5), (">= 50 %", 0.5, 1.1)):
        group = [o for o in firsts if low <= (o.over_echo or 0.0) < high]
        print(f"  {name}: {len(group)}, sure {sum(o.certainty >= SURE_SPEECH for o in group)}, mean speech "
              f"probability {spread([o.certainty for o in group])}")
    so_far = [o.below_so_far for o in firsts if o.below_so_far is not None]
    latest = [o.below_96ms for o in firsts if o.below_96ms is not None]
    print(f"  below the voice by the speech so far {spread(so_far)}, by the latest 96 ms {spread(latest)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
