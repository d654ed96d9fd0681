"""Transcript-aware end of turn: does what the user said so far sound finished?

Why: a fixed silence hang-over is a bad compromise. Long enough to sit through a thinking pause ("what is the
capital of ... France?") it makes every finished question wait; short enough to feel quick it cuts people off.
People use the words themselves: a question that ends in "France?" is over, one that ends in "of" is not. So the
endpointer's hang-over is chosen per pause, from the speculative transcript Whisper makes of the utterance so far
(it is already decoded at the pause for the speculative answer, so this costs nothing):

- COMPLETE  (a final "?", "!" or "." after a word that can end a sentence): confirm after `complete_ms`;
- INCOMPLETE (a trailing comma/dash/ellipsis, or a last word that cannot end an English sentence: an article, a
  preposition, a conjunction, a filler; or an auxiliary without a question mark): wait `incomplete_ms`;
- UNSURE (no punctuation, nothing decided): the plain `default_ms` hang-over.

This is the rule set that Pipecat's and LiveKit's turn models learn from data, kept small and explainable: no
end-of-turn model can be fetched from the registries these machines reach (the smart-turn and turn-detector weights
live on the Hugging Face hub only). Whisper tiny.en punctuates almost every utterance, usually with a period, so a
period alone never makes a turn complete after a continuation word ("What is the capital of." stays incomplete).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

__all__ = ["Completion", "TurnEndPolicy", "classify", "heard_sentence_end"]


class Completion(enum.Enum):
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    UNSURE = "unsure"


_CONTINUATION = """
    a an the my your his her its our their some any every each no
    of to in on at by for from with about into onto over under than as like via per between through toward towards
    and or but nor because although though while if unless until whether whereas since
    um uh er erm hmm mm very really quite just
"""
_AUXILIARIES = """
    is are was were be been being am do does did have has had will would shall should can could may might must
"""
CONTINUATION_WORDS = frozenset(_CONTINUATION.split())
AUXILIARIES = frozenset(_AUXILIARIES.split())
"""Verbs that can end a question ("how many legs does a spider have?", "do you know what time it is?") but rarely
a statement ("the answer is."): after them only a question mark makes the turn complete."""
"""Words after which an English turn almost never ends: articles, possessives, prepositions, conjunctions,
auxiliaries, fillers. Pronouns, demonstratives and question words are NOT here: "can you help me?", "what is that?"
and "why?" are finished turns. A wrong INCOMPLETE only costs a longer wait; a wrong COMPLETE can cut a user off, so
the list leans towards waiting."""

SHORT_FINISHED = frozenset({"yes", "no", "okay", "ok", "thanks", "hello", "hi", "hey", "bye", "sure", "stop"})
"""One-word turns that are whole answers even without punctuation."""

_WORD = re.compile(r"[a-z0-9']+")


def _tail(text: str) -> str:
    """The transcript without surrounding space and closing quotes or brackets: where its punctuation is read."""
    return text.strip().strip("\"')]}").rstrip()


def heard_sentence_end(text: str) -> bool:
    """Whether the transcript ends with ".", "?" or "!" (an ellipsis is a trailing-off, not an end)."""
    stripped = _tail(text)
    return stripped.endswith(("?", "!", ".")) and not stripped.endswith(("...", "…"))


def classify(text: str) -> Completion:
    """Whether a (speculative) transcript sounds like a finished turn."""
    stripped = _tail(text)
    words = _WORD.findall(stripped.lower())
    if not words:
        return Completion.UNSURE
    last = words[-1]
    if stripped.endswith(("...", "…", ",", "-", "–", "—", ";", ":")):
        return Completion.INCOMPLETE
    if last in CONTINUATION_WORDS and not (len(words) == 1 and last in SHORT_FINISHED):
        return Completion.INCOMPLETE
    if last in AUXILIARIES:
        return Completion.COMPLETE if stripped.endswith("?") else Completion.INCOMPLETE
    if stripped.endswith(("?", "!", ".")):
        return Completion.COMPLETE
    if len(words) == 1 and last in SHORT_FINISHED:
        return Completion.COMPLETE
    return Completion.UNSURE


@dataclass(frozen=True)
class TurnEndPolicy:
    """Silence (ms) that confirms the end of a turn, given what the user said so far."""

    default_ms: int = 700
    complete_ms: int = 650
    incomplete_ms: int = 1400
    transcript_aware: bool = True

    def silence_ms(self, transcript: str | None) -> int:
        """The hang-over for this pause: `default_ms` when there is no transcript or the policy is switched off."""
        return self.hang_over(None if transcript is None else classify(transcript))

    def hang_over(self, completion: Completion | None) -> int:
        """The hang-over for a verdict on the words (None: no transcript), whoever gave it (these rules, or
        voicecli.listen.turn_likelihood)."""
        if completion is None or not self.transcript_aware:
            return self.default_ms
        if completion is Completion.COMPLETE:
            return self.complete_ms
        if completion is Completion.INCOMPLETE:
            return self.incomplete_ms
        return self.default_ms
