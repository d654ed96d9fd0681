"""SmolLM2's verdict on the draft's words (voicecli.listen.turn_likelihood): the verdict's bands and the rules'
"unfinished" kept (no model), the model file the class loads, and the real model telling a finished question from
the same words cut mid-sentence (slow: it loads the GGUF)."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicecli.listen.turn_completion import Completion
from voicecli.listen.turn_likelihood import (
    MODEL_FILE,
    MODEL_NAME,
    TurnLikelihood,
    TurnModelMissing,
    asks_model,
    normalize,
    turn_model_path,
    words_verdict,
)


def test_the_rules_unfinished_stands_and_the_probability_decides_the_rest() -> None:
    assert words_verdict(Completion.INCOMPLETE, None, 0.1, 0.03) is Completion.INCOMPLETE  # not asked
    assert words_verdict(Completion.COMPLETE, 0.01, 0.1, 0.03) is Completion.INCOMPLETE  # Whisper's "." overruled
    assert words_verdict(Completion.UNSURE, 0.1, 0.1, 0.03) is Completion.COMPLETE  # at the threshold: finished
    assert words_verdict(Completion.COMPLETE, 0.05, 0.1, 0.03) is Completion.UNSURE
    assert words_verdict(Completion.UNSURE, 0.03, 0.1, 0.03) is Completion.UNSURE
    assert words_verdict(Completion.COMPLETE, None, 0.1, 0.03) is Completion.COMPLETE  # not asked: the rules stand
    assert asks_model(Completion.COMPLETE, "Remind me to call.") and asks_model(Completion.UNSURE, "play music")
    assert not asks_model(Completion.INCOMPLETE, "the capital of") and not asks_model(Completion.UNSURE, "...")
    assert not asks_model(Completion.INCOMPLETE, "What is the capital of...")  # trailing off: the rules stand


def test_an_unfinished_looking_last_word_yields_only_to_a_confident_model_when_the_end_was_heard() -> None:
    """ "Which planet do we live on?" ends in a preposition: the rules hold it, the model may call it finished, but
    never merely unsure."""
    assert asks_model(Completion.INCOMPLETE, "Which planet do we live on?")
    assert asks_model(Completion.INCOMPLETE, "I think the answer is no.")
    assert words_verdict(Completion.INCOMPLETE, 0.6, 0.1, 0.03) is Completion.COMPLETE
    assert words_verdict(Completion.INCOMPLETE, 0.05, 0.1, 0.03) is Completion.INCOMPLETE  # unsure: rules stand


def test_the_words_are_read_without_case_or_punctuation_and_only_their_end() -> None:
    assert normalize("What's the capital of... Spain?!") == "what's the capital of spain"
    assert normalize(" , . ") == ""
    assert normalize(" ".join(str(n) for n in range(100))).split() == [str(n) for n in range(40, 100)]


def test_the_model_file_is_the_local_llms_smollm2() -> None:
    """The same GGUF the offline default answers with: nothing new to install or keep in memory twice on disk."""
    from voicecli.llm.local import LOCAL_MODELS
    from voicecli.models.catalog import BY_NAME

    assert LOCAL_MODELS[MODEL_NAME] == MODEL_FILE
    assert MODEL_FILE.name in [f.name for f in BY_NAME[MODEL_NAME].files]


def test_a_missing_model_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(TurnModelMissing, match="voicecli models install --only smollm2"):
        turn_model_path(tmp_path)
    with pytest.raises(TurnModelMissing):
        TurnLikelihood(tmp_path / "missing.gguf", complete_at=0.1, incomplete_below=0.03)


def test_thresholds_out_of_order_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="incomplete_below"):
        TurnLikelihood(tmp_path / "missing.gguf", complete_at=0.02, incomplete_below=0.1)


@pytest.fixture(scope="module")
def likelihood(models_dir: Path) -> TurnLikelihood:
    return TurnLikelihood(turn_model_path(models_dir), complete_at=0.1, incomplete_below=0.03)


@pytest.mark.parametrize(("whole", "cut"), [
    ("What is the capital of Spain?", "What is the capital of Spain and"),
    ("Remind me to call my mother tomorrow.", "Remind me to call."),  # Whisper's period on a hesitation
    ("What is five plus seven?", "What is five plus?"),
    ("How many legs does a spider have?", "How many legs does a spider"),
])
def test_a_finished_question_is_likelier_to_end_than_the_same_words_cut(likelihood: TurnLikelihood, whole: str,
                                                                       cut: str) -> None:
    ended, going_on = likelihood.probability(whole), likelihood.probability(cut)
    assert 0.0 <= going_on < ended <= 1.0, (ended, going_on)
    assert likelihood.completion(whole) is not Completion.INCOMPLETE


def test_the_verdicts_of_the_real_model(likelihood: TurnLikelihood) -> None:
    """The drafts of the endpointing bench that the rules got wrong: a hesitation after words Whisper punctuated as
    finished is called unfinished; the finished question finished."""
    assert likelihood.completion("What is the capital of Spain?") is Completion.COMPLETE
    assert likelihood.completion("Remind me to call.") is Completion.INCOMPLETE
    assert likelihood.completion("What is time plus?") is Completion.INCOMPLETE
    assert likelihood.completion("What is the capital of") is Completion.INCOMPLETE
    assert likelihood.completion("What is the capital of?") is Completion.INCOMPLETE  # a "?" heard on a hesitation
    assert likelihood.completion("Which planet do we live on?") is Completion.COMPLETE  # the rules wait 1.4 s here
    assert likelihood.completion("...") is Completion.UNSURE  # no words: nothing to judge
