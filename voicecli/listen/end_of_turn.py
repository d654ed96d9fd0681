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
the silence heard so far.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from voicecli.listen.turn_completion import Completion

__all__ = ["EndOfTurnSettings", "Verdict", "decide", "end_after_ms"]


@dataclass(frozen=True)
class EndOfTurnSettings:
    """The fused policy's thresholds (proposed [turn] settings).

    Defaults: the quickest setting at <= 2% cut-offs on the `endpointing` bench set (voicecli bench endpointing;
    `holdout` is the check, never tuned on). They are slow, and that is the finding: on that set (Kokoro voices
    and espeak-ng, pauses of 400-1,500 ms, many after words that could end a sentence: "Play some music | by the
    Beatles", "my favourite colours are red, | blue") the draft transcript at 200 ms and Smart Turn v3.2 (p >= 0.5)
    both call 30% of the hesitations finished, so answering at 200 ms when they agree cuts off 42% of them;
    the safe setting gains ~200 ms over silence alone (p50 1.37 s vs 1.58 s). On `holdout` it cuts off 1 of 7
    pauses (1.34 s after "Who was the first president", which both signals call finished). Faster defaults need better
    signals (a draft of the whole utterance, a prosody model that hears TTS and hesitation better), measured by
    the same bench."""

    agree_ms: int = 1200
    """Silence that ends the turn when the text is complete AND prosody >= complete_probability."""
    one_signal_ms: int = 1500
    """When one signal says complete and the other is undecided (text unsure, or prosody in between)."""
    undecided_ms: int = 1500
    """When neither signal says complete nor unfinished."""
    hold_ms: int = 1600
    """When either signal hears an unfinished sentence (text incomplete, or prosody < incomplete_probability):
    a hesitation such as "the capital of ... Spain" is sat through."""
    max_ms: int = 1600
    """Any silence this long ends the turn, whatever the signals say (caps every other wait)."""
    complete_probability: float = 0.3
    """Prosody at or above this counts as "sounds finished" (Pipecat ends the turn at 0.5)."""
    incomplete_probability: float = 0.02
    """Prosody below this counts as "sounds unfinished"."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.incomplete_probability <= self.complete_probability <= 1.0:
            raise ValueError("need 0 <= incomplete_probability <= complete_probability <= 1")
        if min(self.agree_ms, self.one_signal_ms, self.undecided_ms, self.hold_ms, self.max_ms) <= 0:
            raise ValueError("every wait must be positive")


@dataclass(frozen=True)
class Verdict:
    """What to do at this moment of a pause."""

    end: bool
    """True: the turn is over now."""
    wait_ms: int
    """When not ending: the most silence still to wait before it ends (0 when ending)."""


def end_after_ms(completion: Completion | None, probability: float | None,
                 settings: EndOfTurnSettings = EndOfTurnSettings()) -> int:
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
           settings: EndOfTurnSettings = EndOfTurnSettings()) -> Verdict:
    """End now, or wait at most `wait_ms` more: the silence so far against `end_after_ms`."""
    remaining = end_after_ms(completion, probability, settings) - silence_ms
    if remaining <= 0:
        return Verdict(True, 0)
    return Verdict(False, math.ceil(remaining))
