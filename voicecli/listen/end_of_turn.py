"""End of turn from three signals: the silence so far, the draft transcript's verdict, and the voice's prosody.

Why fuse them: each alone is either slow or unsafe. Silence alone must outlast the longest hesitation (people pause
600-1500 ms mid-sentence), so every finished question waits that long. The text rule
(voicecli.listen.turn_completion) knows "the capital of" is unfinished but trusts Whisper's punctuation, which
calls "What is the capital." finished. The prosody model (voicecli.listen.smart_turn) hears a falling, finished
voice but is fooled by a flat synthetic one and by an abrupt stop. When two independent signals agree that the
turn is over, the chance that both are wrong is small enough to answer as a person does, ~200 ms into the pause;
when either hears an unfinished sentence, the turn is held through the hesitation; and a long silence always ends
the turn, so a wrong "unfinished" costs a wait, never a hang.

Pure code: it takes the signals, runs no model, so the rules are unit-tested and benchmarked (voicecli bench
endpointing) without audio. The signals are read once per pause (they do not change while the silence grows), and
the verdict is the silence at which the turn ends: `end_after_ms`; `decide` answers "now or wait how long" for
the silence heard so far. The thresholds are the [turn] settings (voicecli.config.TurnSettings, where their
defaults are explained).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from voicecli.config import TurnSettings
from voicecli.listen.turn_completion import Completion

__all__ = ["Verdict", "decide", "end_after_ms"]


@dataclass(frozen=True)
class Verdict:
    """What to do at this moment of a pause."""

    end: bool
    """True: the turn is over now."""
    wait_ms: int
    """When not ending: the most silence still to wait before it ends (0 when ending)."""


def end_after_ms(completion: Completion | None, probability: float | None,
                 settings: TurnSettings) -> int:
    """The silence (ms) after which the turn ends, given the draft's verdict and the prosody probability (None:
    that signal is not available, which counts as undecided)."""
    text_complete = completion is Completion.COMPLETE
    text_incomplete = completion is Completion.INCOMPLETE
    voice_complete = probability is not None and probability >= settings.complete_probability
    voice_incomplete = probability is not None and probability < settings.incomplete_probability
    if text_incomplete or voice_incomplete:
        wait = settings.hold_ms
    elif text_complete and voice_complete:
        wait = settings.agree_ms
    elif text_complete or voice_complete:
        wait = settings.one_signal_ms
    else:
        wait = settings.undecided_ms
    return min(wait, settings.max_ms)


def decide(silence_ms: float, completion: Completion | None, probability: float | None,
           settings: TurnSettings) -> Verdict:
    """End now, or wait at most `wait_ms` more: the silence so far against `end_after_ms`."""
    remaining = end_after_ms(completion, probability, settings) - silence_ms
    if remaining <= 0:
        return Verdict(True, 0)
    return Verdict(False, math.ceil(remaining))
