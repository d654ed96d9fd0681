"""Do the words so far read like a finished turn? A small language model's probability that the user stops here.

Why a model beside the word rules (voicecli.listen.turn_completion): the rules trust Whisper's punctuation, and
tiny.en ends almost every draft with "." or "?", so "Remind me to call." and "What is time plus?" (drafts of
hesitations: "Remind me to call | my mother tomorrow") read as finished, and a person thinking mid-sentence is
answered. A language model reads the words without the punctuation and says how likely the message ends there: the
idea of LiveKit's turn detector (a SmolLM2-135M fine-tuned to predict the end of the user's message); here the
stock SmolLM2-135M-Instruct the offline default already answers with, not fine-tuned, so no new model is fetched.

How: the draft is lowercased and stripped of punctuation (Whisper's guess at it is what misleads), put in the
model's chat template as an unfinished user message (`<|im_start|>user\\n...`), and one forward pass gives the
next-token distribution; the probability that the message ends now is the mass on the end-of-message token and on
sentence-final punctuation ("?", ".", "!"). Measured on `voicecli bench endpointing`'s drafts (runs
endpointing-20261204-lm and -holdout-lm, the rules' "unfinished" kept): it tells real ends from mid-sentence pauses
with a ranking AUC of 0.83 (tuned set) and 0.89 (holdout), where Smart Turn v3.2 on the same pauses scores 0.45 and
0.63 and the word rules' three verdicts 0.68 and 0.53. Cost: one pass of ~15 tokens, ~65-80 ms on one core of the
2-core VM, beside the draft's answer.

The verdict (`TurnLikelihood.completion`) calls the words COMPLETE at p >= turn.words_complete_probability,
INCOMPLETE below turn.words_incomplete_probability, UNSURE in between, so every policy that takes a Completion (the
text rule's hang-overs, the fused detector) uses it as is. The rules' INCOMPLETE mostly stands: after a trailing
comma or ellipsis, or a last word that cannot end a sentence with no final punctuation heard, the model is not
asked. Only when Whisper heard the sentence end after such a word ("Which planet do we live on?", "What do
caterpillars turn into?", "I think the answer is no.") is it asked, and then it can only say COMPLETE (at p >=
words_complete_probability) or leave the rules' verdict: in `voicecli bench endpointing`'s drafts those three were
real ends the rules held for 1.4 s (p 0.21-0.61) while every hesitation so heard ("What is the weather like?" for
"... like | in Paris") scored below 0.04.
"""

from __future__ import annotations

import functools
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np

from voicecli.config import Config
from voicecli.listen.turn_completion import Completion, classify, heard_sentence_end

__all__ = ["MODEL_FILE", "MODEL_NAME", "TurnLikelihood", "TurnModelMissing", "asks_model", "normalize",
           "turn_model_path", "words_verdict"]

MODEL_NAME = "smollm2"
"""The catalog model (`voicecli models install --only smollm2`; the offline default LLM, so usually there)."""
MODEL_FILE = Path("smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
"""Its GGUF under the models directory (the same file voicecli.llm.local loads; a test holds the two equal)."""
PROMPT = "<|im_start|>user\n"
"""SmolLM2's chat template up to the user's words: what follows them is the end of the message or more words."""
END_OF_MESSAGE = "<|im_end|>"
SENTENCE_ENDS = frozenset({"?", ".", "!", '?"'})
"""Tokens (stripped) that end the sentence: the model often puts the punctuation first, then the end token."""
CONTEXT_TOKENS = 128
MAX_WORDS = 60
"""Only the last words of a long draft are read: how a sentence ends is decided near its end."""

_NOT_WORD = re.compile(r"[^a-z0-9' ]+")


class TurnModelMissing(FileNotFoundError):
    """The SmolLM2 GGUF is not in the models directory; the message names the command that installs it."""


def turn_model_path(models_dir: Path) -> Path:
    """`<models_dir>/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`, or a clear error naming the install command."""
    path = models_dir / MODEL_FILE
    if not path.is_file():
        raise TurnModelMissing(f"SmolLM2 (turn.words = \"smollm2\") not found at {path}: run "
                               f"`voicecli models install --only {MODEL_NAME}`, or set turn.words = \"rules\"")
    return path


def normalize(text: str) -> str:
    """Lowercase words without punctuation (apostrophes kept), the last MAX_WORDS of them."""
    words = _NOT_WORD.sub(" ", text.lower()).split()
    return " ".join(words[-MAX_WORDS:])


def asks_model(rules: Completion, text: str) -> bool:
    """Whether the words need the model at all: not without words, nor when the rules hear them unfinished, unless
    Whisper heard the sentence end after the word that looks unfinished ("Which planet do we live on?")."""
    if not normalize(text):
        return False
    return rules is not Completion.INCOMPLETE or heard_sentence_end(text)


def words_verdict(rules: Completion, probability: float | None, complete_at: float,
                  incomplete_below: float) -> Completion:
    """The model's probability decides: COMPLETE at >= `complete_at`, INCOMPLETE below `incomplete_below`, UNSURE
    between (None: the model was not asked, the rules' verdict stands). The rules' INCOMPLETE yields only to a
    COMPLETE: a last word that cannot end a sentence is not made merely unsure. Pure, so `voicecli bench
    endpointing` sweeps the thresholds on saved probabilities."""
    if probability is None:
        return rules
    if rules is Completion.INCOMPLETE:
        return Completion.COMPLETE if probability >= complete_at else rules
    if probability >= complete_at:
        return Completion.COMPLETE
    if probability < incomplete_below:
        return Completion.INCOMPLETE
    return Completion.UNSURE


class TurnLikelihood:
    """SmolLM2-135M on llama.cpp: `probability(text)` that the user's message ends after `text`.

    One llama context, used by one call at a time (a lock: the listener asks from a worker thread)."""

    def __init__(self, model_path: Path, *, complete_at: float, incomplete_below: float, threads: int = 1) -> None:
        if not 0.0 <= incomplete_below <= complete_at <= 1.0:
            raise ValueError("incomplete_below must not exceed complete_at (both 0..1)")
        if not model_path.is_file():
            raise TurnModelMissing(f"SmolLM2 model not found at {model_path}")
        try:
            import llama_cpp
        except ImportError as exc:
            raise TurnModelMissing(f"turn.words = \"smollm2\" needs llama-cpp-python ({exc}): run `pip install "
                                   "'voicecli[local-llm]'`, or set turn.words = \"rules\"") from exc

        self.model_path = model_path
        self.complete_at = complete_at
        self.incomplete_below = incomplete_below
        # n_threads_batch too: the words are read as one batch, on every core by default, which then slowed the
        # draft's answer starting on the other core at the same moment (bench turns: LLM first token +30-40 ms).
        # Only the last token's logits are computed (no logits_all: the output layer over the 49k vocabulary for
        # every token of the words took a third of the time: 100 ms -> 66 ms per call, the same probabilities).
        self._llm: Any = llama_cpp.Llama(model_path=str(model_path), n_ctx=CONTEXT_TOKENS, n_batch=CONTEXT_TOKENS,
                                         n_threads=max(1, threads), n_threads_batch=max(1, threads), verbose=False)
        self._logits = functools.partial(llama_cpp.llama_get_logits, self._llm.ctx)
        self._vocabulary = int(self._llm.n_vocab())
        self._prompt = self._llm.tokenize(PROMPT.encode(), add_bos=False, special=True)
        ends = [t for t in range(self._vocabulary) if self._llm.detokenize([t]).decode("utf-8", "replace").strip()
                in SENTENCE_ENDS]
        self._ends = np.array([*ends, *self._llm.tokenize(END_OF_MESSAGE.encode(), add_bos=False, special=True)])
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: Config) -> TurnLikelihood:
        """The judge [turn] configures, from the models directory (raises TurnModelMissing naming the install
        command). Blocking (~0.3 s to load)."""
        turn = config.turn
        return cls(turn_model_path(config.models_dir), complete_at=turn.words_complete_probability,
                   incomplete_below=turn.words_incomplete_probability)

    def probability(self, text: str) -> float:
        """P(the message ends now | its words so far): the next token's mass on the end of the message and on
        sentence-final punctuation. Blocking (~65 ms on one core)."""
        words = normalize(text)
        tokens = self._llm.tokenize(words.encode(), add_bos=False, special=False) if words else []
        tokens = [*self._prompt, *tokens[-(CONTEXT_TOKENS - len(self._prompt)):]]
        with self._lock:
            self._llm.reset()
            self._llm.eval(tokens)
            logits = np.ctypeslib.as_array(self._logits(), shape=(self._vocabulary,)).astype(np.float64)
        weights = np.exp(logits - logits.max())
        return float(weights[self._ends].sum() / weights.sum())

    def completion(self, text: str) -> Completion:
        """The words' verdict (`words_verdict`), asking the model only when `asks_model` says so."""
        rules = classify(text)
        if not asks_model(rules, text):
            return rules
        return words_verdict(rules, self.probability(text), self.complete_at, self.incomplete_below)

    def close(self) -> None:
        with self._lock:
            self._llm.close()
