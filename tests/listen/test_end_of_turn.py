"""The fused end-of-turn policy, without models: silence + the draft's verdict + the prosody probability."""

from __future__ import annotations

import pytest

from voicecli.config import Config, ConfigError, TurnSettings
from voicecli.listen.end_of_turn import Verdict, decide, end_after_ms
from voicecli.listen.turn_completion import Completion, classify

SETTINGS = TurnSettings(agree_ms=200, one_signal_ms=600, undecided_ms=1000, hold_ms=1600, max_ms=2000,
                             complete_probability=0.5, incomplete_probability=0.1)


def test_agreeing_signals_end_the_turn_at_200_ms() -> None:
    completion = classify("What is the capital of Spain?")
    assert completion is Completion.COMPLETE
    assert end_after_ms(completion, 0.9, SETTINGS) == 200
    assert decide(150, completion, 0.9, SETTINGS) == Verdict(False, 50)
    assert decide(200, completion, 0.9, SETTINGS) == Verdict(True, 0)


@pytest.mark.parametrize("draft", ["What is the capital of", "Tell me the opposite of", "I need eggs,", "Um"])
def test_an_unfinished_draft_holds_through_the_hesitation_whatever_the_voice(draft: str) -> None:
    completion = classify(draft)
    assert completion is Completion.INCOMPLETE
    assert end_after_ms(completion, 0.99, SETTINGS) == 1600
    assert not decide(1000, completion, 0.99, SETTINGS).end


def test_an_unfinished_sounding_voice_holds_a_finished_looking_draft() -> None:
    # Whisper punctuates "what is the capital" as a question: the voice still says more is coming.
    assert end_after_ms(Completion.COMPLETE, 0.05, SETTINGS) == 1600


def test_one_signal_alone_waits_longer_than_two_agreeing() -> None:
    assert end_after_ms(Completion.COMPLETE, 0.3, SETTINGS) == 600  # voice undecided
    assert end_after_ms(Completion.UNSURE, 0.8, SETTINGS) == 600  # text undecided
    assert end_after_ms(Completion.UNSURE, 0.3, SETTINGS) == 1000  # neither


def test_a_missing_signal_counts_as_undecided() -> None:
    assert end_after_ms(None, 0.9, SETTINGS) == 600
    assert end_after_ms(Completion.COMPLETE, None, SETTINGS) == 600
    assert end_after_ms(None, None, SETTINGS) == 1000
    assert end_after_ms(Completion.INCOMPLETE, None, SETTINGS) == 1600


def test_a_long_silence_always_ends_the_turn() -> None:
    capped = TurnSettings(hold_ms=5000, max_ms=1800)
    assert end_after_ms(Completion.INCOMPLETE, 0.0, capped) == 1800
    assert decide(1800, Completion.INCOMPLETE, 0.0, capped).end
    for completion in (*Completion, None):
        for probability in (None, 0.0, 0.3, 1.0):
            assert decide(SETTINGS.max_ms, completion, probability, SETTINGS).end


def test_the_wait_only_shrinks_as_the_silence_grows() -> None:
    waits = [decide(ms, Completion.UNSURE, 0.3, SETTINGS).wait_ms for ms in range(0, 1001, 100)]
    assert waits == sorted(waits, reverse=True)
    assert waits[0] == 1000 and waits[-1] == 0


def test_defaults_are_ordered_and_validated() -> None:
    default = TurnSettings()
    assert default.agree_ms <= default.one_signal_ms <= default.undecided_ms <= default.hold_ms <= default.max_ms
    with pytest.raises(ValueError):
        TurnSettings(complete_probability=0.2, incomplete_probability=0.5)
    with pytest.raises(ValueError):
        TurnSettings(agree_ms=0)


def test_the_shipped_turn_section_is_the_policys_default() -> None:
    """The app reads [turn] from config/default.toml; the bench and these tests start from TurnSettings()."""
    assert Config.defaults().turn == TurnSettings()


def test_a_turn_setting_reaches_the_policy_from_the_environment() -> None:
    config = Config.load(env={"VOICECLI_TURN__AGREE_MS": "900"})
    assert end_after_ms(Completion.COMPLETE, 0.9, config.turn) == 900
    with pytest.raises(ConfigError, match="incomplete_probability"):
        Config.load(env={"VOICECLI_TURN__INCOMPLETE_PROBABILITY": "0.9"})


def test_the_words_judge_is_a_checked_choice_with_ordered_thresholds() -> None:
    assert Config.load(env={"VOICECLI_TURN__WORDS": "smollm2"}).turn.words == "smollm2"
    with pytest.raises(ConfigError, match=r"turn\.words"):
        Config.load(env={"VOICECLI_TURN__WORDS": "gpt"})
    with pytest.raises(ConfigError, match="words_incomplete_probability"):
        Config.load(env={"VOICECLI_TURN__WORDS_INCOMPLETE_PROBABILITY": "0.5"})
